"""The reads of a cluster's state: brokers and controller (and, for those the metadata no longer
lists, whether their listeners answer), topics and their partitions (with KIP-966 ELR), topic
and broker configs, stable offsets, the KRaft quorum, log dirs and partition reassignments.
Metadata, configs and offsets come from librdkafka; the quorum, log dirs, reassignments and
ELR from kafka-python, which has those APIs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition

# confluent_kafka.admin re-exports these from private modules without listing them in __all__
from confluent_kafka.admin import ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]

from kbot_settings import KbotSettings
from live import model, probe
from live.config import ClusterConfig
from live.gateway.confluent import latest_offset
from live.gateway.convert import config_source, enum_name, tp_list
from live.gateway.errors import GatewayError, UnknownTopic
from live.gateway.kafkapython import KafkaPythonTransport

# How long describe_cluster waits for librdkafka's DescribeCluster before it asks every broker
# for Metadata beside it (see describe_cluster); a healthy cluster answers in milliseconds.
DESCRIBE_STALL_S = 1.0

T = TypeVar("T")


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _nodes_of(desc: Any) -> tuple[str | None, int | None, list[model.Broker]]:
    """(cluster id, controller id, brokers) of a librdkafka DescribeClusterResult."""
    brokers = [model.Broker(n.id, n.host, n.port, n.rack) for n in desc.nodes]
    return desc.cluster_id, (desc.controller.id if desc.controller is not None else None), brokers


def _discard_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class ReadsMixin(KafkaPythonTransport):
    """Cluster, topic, config and storage reads; see the module docstring."""

    def __init__(
        self, config: ClusterConfig | str | None = None, timeout_s: float = 10, *, settings: KbotSettings | None = None
    ):
        super().__init__(config, timeout_s, settings=settings)
        # Where each broker listened when last registered: a fenced broker vanishes from metadata,
        # and its address is what tells a dead process from a paused one (live.probe).
        self._broker_addresses: dict[int, tuple[str, int]] = {}
        self._controller_voters: dict[int, tuple[str, int]] | None = None

    async def _live_broker_ids(self) -> list[int]:
        return (await self.describe_cluster()).broker_ids

    # ---- cluster & topics ----------------------------------------------------------------
    async def describe_cluster(self) -> model.ClusterInfo:
        """The registered brokers and the "controller" they report (DescribeCluster).

        librdkafka sends DescribeCluster to the broker its last Metadata answer named controller,
        which in KRaft is a random live broker.  When that broker is hung but still registered
        (a stop-the-world pause before its session times out; request threads stuck while its
        heartbeats go on) the request waits the whole timeout for it.  So a request not answered
        within ``DESCRIBE_STALL_S`` gets a second one beside it: a Metadata request to every
        known broker address, each on a client of its own, and the first answer of the two is
        used (it carries the same brokers and controller; no racks)."""
        self._check_open()
        started = time.monotonic()
        asked = asyncio.ensure_future(
            self._await(self._rdkafka().describe_cluster(request_timeout=self.timeout_s), "describe_cluster", started)
        )
        pending: set[asyncio.Future[Any]] = {asked}
        try:
            done, _ = await asyncio.wait(pending, timeout=DESCRIBE_STALL_S)
            if not done:
                pending.add(asyncio.ensure_future(self._cluster_from_any_broker(started + self.timeout_s)))
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if task.exception() is None:
                            self._ok()  # (the cluster answered, through whichever request)
                            return self._cluster_info(_nodes_of(task.result()) if task is asked else task.result())
            return self._cluster_info(_nodes_of(await asked))  # raises the gateway's error if none answered
        finally:
            for task in pending:  # the slower one, or both when the caller gave up
                task.cancel()

    def _cluster_info(self, found: tuple[str | None, int | None, list[model.Broker]]) -> model.ClusterInfo:
        cluster_id, controller_id, brokers = found
        brokers = sorted(brokers, key=lambda b: b.id)
        self._broker_addresses.update({b.id: (b.host, b.port) for b in brokers})
        expected = list(self.config.expected_brokers)
        present = {b.id for b in brokers}
        return model.ClusterInfo(
            cluster_id=cluster_id,
            controller_id=controller_id,
            brokers=brokers,
            expected_brokers=expected,
            missing_brokers=[b for b in expected if b not in present],
        )

    async def _cluster_from_any_broker(self, deadline: float) -> tuple[str | None, int | None, list[model.Broker]]:
        """Cluster id, controller and brokers from the first of the known brokers (the ones last
        registered, and the bootstrap addresses) to answer a Metadata request before
        ``deadline``.  Raises GatewayError when none does."""
        addresses = list(
            dict.fromkeys(
                [_address(host, port) for host, port in self._broker_addresses.values()]
                + [a.strip() for a in self.config.bootstrap_list]
            )
        )

        def ask(address: str) -> tuple[str | None, int | None, list[model.Broker]]:
            _, md = self.metadata_from(address, max(0.1, deadline - time.monotonic()))
            brokers = [model.Broker(b.id, str(b.host), b.port, None) for b in md.brokers.values() if b.host]
            if not brokers:
                raise GatewayError(f"{address} answered Metadata without brokers", self.config.name)
            controller = md.controller_id if md.controller_id is not None and md.controller_id >= 0 else None
            return md.cluster_id, controller, brokers

        pending = {asyncio.ensure_future(asyncio.to_thread(ask, a)) for a in addresses}
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    if task.exception() is None:
                        return task.result()
        finally:
            for task in pending:  # their threads end by the deadline; nobody reads the outcome
                task.add_done_callback(_discard_outcome)
        raise GatewayError(f"no broker of cluster {self.config.name!r} answered Metadata", self.config.name)

    # ---- liveness of nodes the metadata no longer lists (live.probe) -----------------------
    def _unclaimed_bootstrap(self) -> list[tuple[str, int]]:
        """Bootstrap addresses that no known broker id listens on."""
        claimed = set(self._broker_addresses.values())
        out = []
        for hp in self.config.bootstrap_list:
            host, _, port = hp.rpartition(":")
            if port.isdigit() and (host.strip("[]"), int(port)) not in claimed:
                out.append((host.strip("[]"), int(port)))
        return out

    async def broker_liveness(self, broker_ids: Iterable[int]) -> dict[int, probe.ProbeResult]:
        """Probe the listeners of brokers that are missing from the metadata or suspected hung.

        The address is the one the broker had when the gateway last saw it registered; a process
        that never saw it (a one-shot ``kbot ask``) uses the bootstrap addresses no registered
        broker claims, when that is unambiguous (one broker missing, one address left) or when
        every unclaimed address gives the same answer. Brokers whose address is unknown are left
        out of the result: the caller says the probe was not possible instead of guessing."""
        ids = sorted(set(int(b) for b in broker_ids))
        if not ids:
            return {}
        known = {b: self._broker_addresses[b] for b in ids if b in self._broker_addresses}
        results = await probe.probe_all(known) if known else {}
        unknown = [b for b in ids if b not in known]
        leftovers = self._unclaimed_bootstrap() if unknown else []
        if unknown and leftovers:
            found = await probe.probe_all(dict(enumerate(leftovers)))
            if len(unknown) == 1 and len(leftovers) == 1:
                results[unknown[0]] = found[0]
            elif len({r.state for r in found.values()}) == 1:
                for b in unknown:
                    results[b] = found[0]
        return results

    async def _answering_broker(self) -> int | None:
        """The id of the first known broker whose listener answers a request (live.probe), or None.
        Returns as soon as one answers: an unreachable broker's probe is not waited for."""
        if not self._broker_addresses:
            await self.describe_cluster()
        tasks = {asyncio.ensure_future(probe.probe(*a)): b for b, a in sorted(self._broker_addresses.items())}
        pending = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: tasks[t]):
                    if task.result().state == "answers":
                        return tasks[task]
            return None
        finally:
            for task in pending:
                task.cancel()

    async def _hedged(self, first: Awaitable[T], pinned: Callable[[int], Awaitable[T]]) -> T:
        """``first`` as usual; when it has not answered within DESCRIBE_STALL_S, the same read
        pinned to the first broker whose listener answers (``pinned(broker id)``) runs beside it,
        and the first good answer wins. A request that a client library routed to a broker that is
        registered but unreachable (cut off by the network, hung) would otherwise hold the answer
        for the whole admin timeout. When neither answers, ``first``'s error is raised."""
        asked = asyncio.ensure_future(first)
        pending: set[asyncio.Future[T]] = {asked}
        try:
            done, _ = await asyncio.wait(pending, timeout=DESCRIBE_STALL_S)
            if not done:
                try:
                    broker = await self._answering_broker()
                except GatewayError:
                    broker = None
                if broker is not None and not asked.done():
                    pending.add(asyncio.ensure_future(pinned(broker)))
                while pending:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if task.exception() is None:  # (a failed read just loses the race)
                            return task.result()
            return await asked
        finally:
            for task in pending:
                task.cancel()

    async def _quorum_via(self, broker: int) -> Any:
        """DescribeQuorum sent to ``broker`` (kafka-python's answer shape, as describe_metadata_quorum)."""
        client = await self._kafka_python()
        return await self._blocking(f"describe_metadata_quorum via broker {broker}", describe_quorum_on, client, broker)

    async def controller_voters(self) -> dict[int, tuple[str, int]]:
        """The KRaft controllers the brokers are configured with (``controller.quorum.voters``, or
        ``controller.quorum.bootstrap.servers`` with negative placeholder ids), read once from a
        registered broker's static config. A broker answers DescribeConfigs about itself without
        the controller, so this works exactly when the quorum is in doubt."""
        if self._controller_voters is not None:
            return self._controller_voters
        ids = (await self.describe_cluster()).broker_ids
        if not ids:
            return {}
        configs = (await self.broker_configs(ids[:1]))[ids[0]]
        voters_cfg = configs.get("controller.quorum.voters")
        voters = probe.parse_voters(voters_cfg.value if voters_cfg else None)
        if not voters:
            boot = configs.get("controller.quorum.bootstrap.servers")
            voters = {-(i + 1): hp for i, hp in enumerate(probe.parse_addresses(boot.value if boot else None))}
        self._controller_voters = voters
        return voters

    async def controller_liveness(self) -> dict[int, probe.ProbeResult]:
        """Probe every configured controller (voter id -> result); empty if none is configured."""
        voters = await self.controller_voters()
        return await probe.probe_all(voters) if voters else {}

    async def topics(self, include_internal: bool = False) -> list[str]:
        md = await self._metadata()
        return sorted(t for t in md.topics if include_internal or not t.startswith("__"))

    async def metadata_views(
        self,
        brokers: Iterable[model.Broker] | None = None,
        budget_s: float = 1.5,
        most: int = 7,
        topic: str | None = None,
    ) -> model.BrokerViews:
        """Each broker's own view of every partition: {broker id: {(topic, partition): (leader,
        sorted ISR)}}, one Metadata request answered by each (``metadata_from``).

        A broker answers Metadata from its own copy of the cluster metadata, and one that stops
        applying updates (seen with a broker whose log dir stalled: the lab's slow-follower)
        keeps answering with the old ISRs; the single read of :meth:`describe_topics` lands on
        one broker chosen by librdkafka, so it can report "in sync" for a replica the others have
        already dropped.  The views let a caller compare (``diagnosis.snapshot.reconcile``).
        A broker that does not answer within ``budget_s`` (paused, unreachable) is left out: the
        caller must not wait on it.  ``brokers``: the registered ones (describe_cluster) when None;
        at most ``most`` of them are asked (the lowest ids): enough to outvote one broker's old
        view, and a large cluster does not get a client per broker on every question.  ``topic``:
        only that topic's partitions (a question about one topic does not read every broker's
        whole metadata)."""
        self._check_open()
        if brokers is None:
            brokers = (await self.describe_cluster()).brokers
        brokers = sorted(brokers, key=lambda b: b.id)[: max(1, most)]

        def views_via(b: model.Broker) -> model.BrokerViews:
            got: model.BrokerViews = {}
            deadline = time.monotonic() + budget_s
            # A new client sends the request through its bootstrap connection to ``b`` or, about
            # half the time (measured on 3 brokers), to a broker it connected to meanwhile: its
            # answer is kept under that broker, and ``b`` is asked again while the budget lasts
            # (each try ~0.1 s; three tries left ~1 call in 3 short of a broker).
            while True:
                left = deadline - time.monotonic()
                if left < 0.05:
                    break
                try:
                    who, md = self.metadata_from(_address(b.host, b.port), left, topic)
                except Exception:  # noqa: BLE001 - a broker that cannot answer gives no view
                    break
                got[b.id if who is None else who] = {
                    (name, p.id): (
                        p.leader if p.leader is not None and p.leader >= 0 else None,
                        tuple(sorted(p.isrs)),
                    )
                    for name, t in md.topics.items()
                    if t.error is None
                    for p in t.partitions.values()
                }
                if who is None or who == b.id:
                    break
            return got

        tasks = [asyncio.ensure_future(asyncio.to_thread(views_via, b)) for b in brokers]
        if not tasks:
            return {}
        done, _ = await asyncio.wait(tasks, timeout=budget_s + 0.5)
        out: model.BrokerViews = {}
        for task in done:
            if task.exception() is None:
                out.update(task.result())
        return out

    async def describe_topics(
        self, names: Iterable[str] | None = None, include_internal: bool = False, elr: bool = False
    ) -> list[model.TopicInfo]:
        """Partition layout (leader, replicas, ISR) of ``names`` (default: all
        topics) from ONE Metadata request (librdkafka ``list_topics``), which
        carries replicas/ISR for every partition; measured faster than the
        DescribeTopics admin API for thousands of partitions. ``elr=True``
        adds KIP-966 ELR / last-known-ELR / offline replicas from
        DescribeTopicPartitions (kafka-python, paginated)."""
        wanted = None if names is None else list(dict.fromkeys(names))
        if wanted is not None and not wanted:
            return []
        md = await self._metadata(wanted[0] if wanted is not None and len(wanted) == 1 else None)
        out: list[model.TopicInfo] = []
        missing: list[str] = []
        for tname in wanted if wanted is not None else sorted(md.topics):
            t = md.topics.get(tname)
            if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                if wanted is not None:
                    missing.append(tname)
                continue
            internal = tname.startswith("__")
            if wanted is None and internal and not include_internal:
                continue
            parts = [
                model.PartitionInfo(
                    topic=tname,
                    partition=p.id,
                    leader=p.leader if p.leader is not None and p.leader >= 0 else None,
                    replicas=list(p.replicas),
                    isr=list(p.isrs),
                    error=p.error.str() if p.error is not None else None,
                )
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            ]
            out.append(model.TopicInfo(tname, parts, internal, t.error.str() if t.error is not None else None))
        if missing:
            raise UnknownTopic(missing, self.config.name)
        if elr and out:
            out = await self._with_elr(out)
        return out

    async def _with_elr(self, topics: list[model.TopicInfo]) -> list[model.TopicInfo]:
        """Merge KIP-966 fields from DescribeTopicPartitions (cursor-paginated)."""
        names = [t.name for t in topics]
        extra: dict[tuple[str, int], dict[str, Any]] = {}
        cursor = None
        for _ in range(10_000):  # bounded: one page per 2000 partitions
            page = await self._kp_call("describe_topic_partitions", "describe_topic_partitions", names, 2000, cursor)
            for t in page["topics"]:
                for p in t["partitions"]:
                    extra[(t["name"], p["partition_index"])] = p
            cursor = page.get("next_cursor")
            if not cursor:
                break
        merged = []
        for t in topics:
            parts = []
            for p in t.partitions:
                x = extra.get((p.topic, p.partition))
                if x is not None:
                    p = replace(
                        p,
                        elr=list(x.get("eligible_leader_replicas") or []),
                        last_known_elr=list(x.get("last_known_elr") or []),
                        offline_replicas=list(x.get("offline_replicas") or []),
                    )
                parts.append(p)
            merged.append(replace(t, partitions=parts))
        return merged

    # ---- configs ---------------------------------------------------------------------
    @staticmethod
    def _config_values(entries: Mapping[str, ConfigEntry]) -> dict[str, model.ConfigValue]:
        return {
            name: model.ConfigValue(
                value=e.value,
                is_default=bool(e.is_default),
                source=config_source(e.source),
                read_only=bool(e.is_read_only),
                sensitive=bool(e.is_sensitive),
            )
            for name, e in sorted(entries.items())
        }

    async def topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, model.ConfigValue]]:
        """The topics' configs. librdkafka sends a DescribeConfigs of topics to the broker its last
        Metadata answer named controller, which in KRaft is any live broker - also one that is
        registered but unreachable (a network partition), where the request waits the whole
        timeout. So a request not answered within DESCRIBE_STALL_S is sent again beside it,
        pinned to a broker whose listener answers (``_hedged``)."""
        self._check_open()
        names = list(dict.fromkeys([names] if isinstance(names, str) else names))
        if not names:
            return {}
        return await self._hedged(
            self._topic_configs_via(names, None), lambda broker: self._topic_configs_via(names, broker)
        )

    async def _topic_configs_via(self, names: list[str], broker: int | None) -> dict[str, dict[str, model.ConfigValue]]:
        """One DescribeConfigs of ``names``; with ``broker``, sent to that broker: librdkafka sends
        a request that holds a BROKER resource to that broker, topics and all (its config is
        read along and dropped)."""
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        if broker is not None:
            resources.append(ConfigResource(ResourceType.BROKER, str(int(broker))))
        futs = self._rdkafka().describe_configs(resources, request_timeout=self.timeout_s)
        res = await self._await_all(
            {r.name: f for r, f in futs.items() if r.restype == ResourceType.TOPIC}, "describe_configs (topics)", names
        )
        missing = [
            n for n, r in res.items() if isinstance(r, KafkaError) and r.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ]
        if missing:
            raise UnknownTopic(missing, self.config.name)
        for n, r in res.items():
            if isinstance(r, KafkaError):
                raise await self._translate(
                    KafkaException(r), f"describe_configs of topic {n!r}", time.monotonic(), [n]
                )
        # (every value is a config by now: the loop above raised on the errors)
        return {n: self._config_values(r) for n in names if not isinstance(r := res[n], KafkaError)}

    async def describe_acls(self, principal: str | None = None) -> list[model.AclBinding]:
        """Every ACL binding (DescribeAcls), or those of one principal ("User:name", matched
        exactly: a "User:*" binding is listed only when asked for "User:*"). Kafka authorizes the
        request as DESCRIBE on the CLUSTER; a cluster without an authorizer answers
        SECURITY_DISABLED (a GatewayError with that code)."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
        )

        self._check_open()
        # None = any (name, principal, host); the stubs type them str
        flt = AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            principal,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        what = "describe_acls" + (f" of {principal!r}" if principal else "")
        found = await self._await(self._rdkafka().describe_acls(flt, request_timeout=self.timeout_s), what)
        out = []
        for b in found or []:
            rtype = enum_name(b.restype)
            out.append(
                model.AclBinding(
                    principal=str(b.principal),
                    host=str(b.host),
                    operation=enum_name(b.operation),
                    permission=enum_name(b.permission_type),
                    resource_type="CLUSTER" if rtype == "BROKER" else rtype,
                    resource_name=str(b.name),
                    pattern=enum_name(b.resource_pattern_type),
                )
            )
        return sorted(out, key=lambda a: (a.principal, a.resource_type, a.resource_name, a.operation))

    async def broker_configs(self, ids: Iterable[int] | None = None) -> dict[int, dict[str, model.ConfigValue]]:
        """Configs of the given brokers (default: all registered ones). One
        request per broker: librdkafka allows one BROKER resource per call."""
        self._check_open()
        ids = list(ids) if ids is not None else await self._live_broker_ids()
        futs: dict[int, Future[Any]] = {}
        for bid in ids:
            resource = ConfigResource(ResourceType.BROKER, str(int(bid)))
            futs[int(bid)] = self._rdkafka().describe_configs([resource], request_timeout=self.timeout_s)[resource]
        res = await self._await_all(futs, "describe_configs (brokers)")
        for bid, r in res.items():
            if isinstance(r, KafkaError):
                raise await self._translate(KafkaException(r), f"describe_configs of broker {bid}", time.monotonic())
        return {bid: self._config_values(r) for bid in ids if not isinstance(r := res[bid], KafkaError)}

    async def stable_offsets(self, topic_partitions: Iterable[object]) -> dict[tuple[str, int], model.PartitionOffsets]:
        """Last stable offset (read_committed's end) and high watermark of each partition, from two
        ListOffsets reads made together. LSO < HW means an open transaction holds read_committed
        consumers back; the gap is the records they cannot see yet. A partition whose leader did
        not answer is left out."""
        self._check_open()
        tps = list(dict.fromkeys(tp_list(topic_partitions)))
        if not tps:
            return {}

        async def read(level: IsolationLevel) -> dict[tuple[str, int], Any | KafkaError]:
            futs = self._rdkafka().list_offsets(
                {TopicPartition(t, p): latest_offset() for t, p in tps},
                isolation_level=level,
                request_timeout=self.timeout_s,
            )
            return await self._await_all(
                {(tp.topic, tp.partition): f for tp, f in futs.items()},
                "list_offsets (LSO and high watermark)",
                [t for t, _ in tps],
            )

        lso, hw = await asyncio.gather(read(IsolationLevel.READ_COMMITTED), read(IsolationLevel.READ_UNCOMMITTED))
        out: dict[tuple[str, int], model.PartitionOffsets] = {}
        for k in tps:
            a, b = lso.get(k), hw.get(k)
            if (
                a is None
                or isinstance(a, KafkaError)
                or b is None
                or isinstance(b, KafkaError)
                or a.offset is None
                or b.offset is None
                or a.offset < 0
                or b.offset < 0
            ):
                continue
            out[k] = model.PartitionOffsets(k[0], k[1], a.offset, b.offset)
        return out

    # ---- KRaft quorum, log dirs, reassignments (kafka-python) ---------------------------
    async def metadata_quorum(self) -> model.QuorumInfo:
        """DescribeQuorum, which kafka-python sends to its least loaded broker - also one that is
        registered but unreachable, where it waits the whole timeout: hedged like topic_configs,
        the second request pinned to a broker whose listener answers."""
        res = await self._hedged(
            self._kp_call("describe_metadata_quorum", "describe_metadata_quorum"), self._quorum_via
        )
        part = res["topics"][0]["partitions"][0]
        if part.get("error"):
            raise GatewayError(f"describe_metadata_quorum on {self.name!r}: {part['error']}", self.name)
        voters_raw = part.get("current_voters") or []
        leader = part["leader_id"]
        leader_leo = next(
            (v["log_end_offset"] for v in voters_raw if v["replica_id"] == leader), part.get("high_watermark", 0)
        )

        def replica(v: dict[str, Any], observer: bool) -> model.QuorumVoter:
            return model.QuorumVoter(
                id=v["replica_id"],
                log_end_offset=v["log_end_offset"],
                lag=max(0, leader_leo - v["log_end_offset"]) if v["log_end_offset"] >= 0 else leader_leo,
                last_fetch_timestamp=v.get("last_fetch_timestamp"),
                last_caught_up_timestamp=v.get("last_caught_up_timestamp"),
                observer=observer,
            )

        return model.QuorumInfo(
            leader_id=leader,
            leader_epoch=part["leader_epoch"],
            high_watermark=part["high_watermark"],
            voters=sorted((replica(v, False) for v in voters_raw), key=lambda v: v.id),
            observers=sorted((replica(v, True) for v in part.get("observers") or []), key=lambda v: v.id),
        )

    async def log_dirs(self, broker_ids: Iterable[int] | None = None) -> list[model.LogDir]:
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()
        res = await self._kp_call("describe_log_dirs", "describe_log_dirs", None, ids)
        out: list[model.LogDir] = []
        import kafka.errors as E

        for entry in res:
            for d in entry["log_dirs"]:
                err = d.get("error_code", 0)
                parts = [
                    model.LogDirPartition(
                        t["name"],
                        p["partition_index"],
                        p["partition_size"],
                        p["offset_lag"],
                        bool(p.get("is_future_key")),
                    )
                    for t in d.get("topics") or []
                    for p in t.get("partitions") or []
                ]
                out.append(
                    model.LogDir(
                        broker=entry["broker"],
                        path=d["log_dir"],
                        error=None if not err else E.for_code(err).__name__,
                        partitions=sorted(parts, key=lambda p: (p.topic, p.partition)),
                        total_bytes=d.get("total_bytes"),
                        usable_bytes=d.get("usable_bytes"),
                    )
                )
        return sorted(out, key=lambda d: (d.broker, d.path))

    async def reassignments(self) -> list[model.Reassignment]:
        res = await self._kp_call(
            "list_partition_reassignments", "list_partition_reassignments", None, int(self.timeout_s * 1000)
        )
        return sorted(
            (
                model.Reassignment(
                    tp.topic,
                    tp.partition,
                    list(v.get("replicas", [])),
                    list(v.get("adding_replicas", [])),
                    list(v.get("removing_replicas", [])),
                )
                for tp, v in res.items()
            ),
            key=lambda r: (r.topic, r.partition),
        )


def describe_quorum_on(client: Any, node_id: int) -> dict[str, Any]:
    """Thread body: DescribeQuorum of the metadata log sent to one broker (kafka-python picks its
    least loaded one itself), as a dict in the shape of KafkaAdminClient.describe_metadata_quorum."""
    import kafka.errors as E
    from kafka.protocol.admin import DescribeQuorumRequest

    topic_t = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        topics=[topic_t(topic_name="__cluster_metadata", partitions=[topic_t.PartitionData(partition_index=0)])]
    )
    response = client._manager.run(client._manager.send, request, node_id)
    top = E.for_code(response.error_code)
    if top is not E.NoError:
        raise top(response.error_message or "")
    result: dict[str, Any] = response.to_dict()
    for t in result["topics"]:
        for part in t["partitions"]:
            err = E.for_code(part.pop("error_code"))
            msg = part.pop("error_message", None)
            part["error"] = None if err is E.NoError else str(err(msg))
    return result
