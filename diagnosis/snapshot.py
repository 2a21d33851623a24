"""Live evidence shared by the live commands: which gateway to ask, and one consistent snapshot.

A snapshot is a single metadata read of every partition plus the facts the diagnosis needs
(registered brokers, min.insync.replicas per topic), turned into the pure
``diagnosis.rules`` inputs. Extra calls (log dirs, reassignments) are made only when the
first read says they could change the answer, which keeps `why URP` fast on large clusters.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import overload

from diagnosis.rules import BrokerFacts, PartitionState, categories
from framework import sources
from framework.partial import note_missing
from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import Broker, BrokerViews, ClusterInfo, ConfigValue, PartitionInfo, PartitionView, TopicInfo

#: how long a cross-checked snapshot waits for the brokers' own views: a healthy broker answers a
#: Metadata request in milliseconds, and a paused one must not hold the answer
VIEWS_BUDGET_S = 1.0
VIEWS_RETRY_S = 1.5  # a broker whose view was missing is asked once more, alone, this long
VIEWS_ASKED = 7  # brokers asked for their own view: enough to outvote one broker's old view
#: how long the one Metadata read of the partitions may go unanswered before every registered broker
#: is asked for its own (a paused broker holds a request sent to it for the whole request timeout)
TOPICS_STALL_S = 1.0
#: {broker: [((topic, partition), its view, the view most brokers share)]} (``reconcile``)
StaleViews = dict[int, list[tuple[tuple[str, int], PartitionView, PartitionView]]]
SAMPLE = 8  # partitions named per finding; the JSON keeps the counts, the text stays readable


@dataclass
class Snapshot:
    cluster: ClusterInfo
    topics: list[TopicInfo]
    configs: dict[str, dict[str, ConfigValue]]  # describe_configs of the topics the min_isr choice read
    states: list[PartitionState]
    brokers: BrokerFacts
    floors_unread: bool = False  # the min ISR configs were refused: at/under-min-ISR counts are not known
    # brokers whose own metadata disagreed with the majority of brokers (``reconcile``)
    stale_views: StaleViews = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.states)

    def by_category(self) -> dict[str, list[PartitionState]]:
        out: dict[str, list[PartitionState]] = {"UnderReplicated": [], "AtMinIsr": [], "UnderMinIsr": [], "Offline": []}
        for p in self.states:
            for c in categories(p):
                if c in out:
                    out[c].append(p)
        return out


def reconcile(states: list[PartitionState], views: BrokerViews) -> tuple[list[PartitionState], StaleViews]:
    """The partitions as most brokers see them, and the brokers that see them otherwise.

    ``views`` are the brokers' own metadata (``AdminGateway.metadata_views``).  Where at least
    two brokers answered for a partition, its leader and ISR become the view most of them share;
    a tie goes to the view that shows the problem: the fewer in-sync replicas, then no leader.
    A broker whose view differs is listed with the partition, its view and the chosen one: a
    broker that goes on serving old metadata is not applying the controller's updates."""
    if len(views) < 2:
        return states, {}
    out: list[PartitionState] = []
    stale: StaleViews = {}
    for p in states:
        key = (p.topic, p.partition)
        seen = {b: v[key] for b, v in views.items() if key in v}
        if len(seen) < 2:
            out.append(p)
            continue
        votes = Counter(seen.values())
        leader, isr = max(
            votes,
            key=lambda v: (votes[v], -len(v[1]), v[0] is None, -1 if v[0] is None else v[0], tuple(-b for b in v[1])),
        )
        for b, view in sorted(seen.items()):
            if view != (leader, isr):
                stale.setdefault(b, []).append((key, view, (leader, isr)))
        if (p.leader, tuple(sorted(p.isr))) != (leader, isr):
            p = replace(p, leader=leader, isr=isr)
        out.append(p)
    return out, stale


def at_min_isr_by_design(parts: list[PartitionState]) -> list[PartitionState]:
    """AtMinIsr partitions with every replica in sync: RF equals the min ISR (RF=1, or RF=2 with
    min ISR 2). A configuration risk for `audit`, not a sign that anything failed."""
    return [p for p in parts if len(p.isr) == len(p.replicas)]


def _expected(cluster: ClusterInfo, topics: list[TopicInfo]) -> frozenset[int]:
    """Brokers that should exist: the configured list, else every broker some replica lives on."""
    if cluster.expected_brokers:
        return frozenset(cluster.expected_brokers) | frozenset(cluster.broker_ids)
    on_replicas = {b for t in topics for p in t.partitions for b in p.replicas}
    return frozenset(on_replicas) | frozenset(cluster.broker_ids)


async def snapshot(
    gw: AdminGateway,
    *,
    topics: list[str] | None = None,
    min_isr: str = "unhealthy",
    include_internal: bool = True,
) -> Snapshot:
    """Read the cluster once. ``min_isr``: "all" reads min.insync.replicas for every topic (status,
    audit), "unhealthy" only for topics with a partition out of sync (why URP), "none" skips it.

    Cross-checked: every broker is also asked for its own view, and the partitions are taken as
    most brokers see them (``reconcile``; ``stale_views`` names the brokers that disagree).  The
    one Metadata read of ``describe_topics`` lands on a broker librdkafka picks, and a broker
    that stopped applying the controller's updates (a stalled disk) answers with old leaders and
    ISRs: "in sync", "has a leader" or "no URP" that are no longer true."""

    started = time.monotonic()
    one = topics[0] if topics is not None and len(topics) == 1 else None

    async def read_cluster() -> ClusterInfo:
        try:
            found = await gw.describe_cluster()
        except GatewayError as exc:
            sources.record("admin", "failed", time.monotonic() - started, str(exc))
            raise
        sources.record("admin", "read", time.monotonic() - started)
        return found

    cluster_task = asyncio.ensure_future(read_cluster())

    async def cluster_and_views() -> tuple[ClusterInfo, BrokerViews]:
        # the brokers to ask are the ones this read registers: one describe_cluster for both
        cluster = await cluster_task
        asked = time.monotonic()
        views = await gw.metadata_views(cluster.brokers, budget_s=VIEWS_BUDGET_S, most=VIEWS_ASKED, topic=one)
        took = time.monotonic() - asked
        wanted = sorted(cluster.broker_ids)[:VIEWS_ASKED]
        late = [b for b in wanted if b not in views]
        if late and len(late) < len(wanted):
            # asked once more, alone: a new client now and then misses a healthy broker within the
            # budget, while a paused or starved one misses again (then it is the finding)
            again = await gw.metadata_views(
                [b for b in cluster.brokers if b.id in late], budget_s=VIEWS_RETRY_S, most=len(late), topic=one
            )
            views = {**again, **views}
        unseen = [b for b in wanted if b not in views]
        refused: set[int] = set()
        if unseen:
            # a port that refuses is a process that is not there (dead), not one that cannot serve
            try:
                probes = await gw.broker_liveness(unseen)
                refused = {b for b, r in probes.items() if r.state == "refused"}
            except GatewayError:
                pass
        for b in wanted:
            if b in refused:
                why = "its port refuses connections: the process is not running"
                sources.record(f"metadata {b}", "failed", time.monotonic() - asked, why, node=b)
            elif b not in views:
                why = f"its own view not read in {VIEWS_BUDGET_S:g} s, nor in {VIEWS_RETRY_S:g} s more"
                sources.record(f"metadata {b}", "no answer", time.monotonic() - asked, why, node=b)
            elif b in late:
                sources.record(f"metadata {b}", "slow", time.monotonic() - asked, "answered when asked again", node=b)
            else:
                sources.record(f"metadata {b}", "read", took, node=b)
        return cluster, views

    views_task = asyncio.ensure_future(cluster_and_views())
    try:
        described = await _described(gw, topics, include_internal, cluster_task)
        cluster, views = await views_task
    finally:
        views_task.cancel()
        cluster_task.cancel()
    states, stale = reconcile(
        [
            PartitionState(
                topic=p.topic, partition=p.partition, leader=p.leader, replicas=tuple(p.replicas), isr=tuple(p.isr)
            )
            for t in described
            for p in t.partitions
        ],
        views,
    )
    if min_isr == "all":
        wanted = [t.name for t in described]
    elif min_isr == "unhealthy":
        wanted = list(dict.fromkeys(p.topic for p in states if len(p.isr) < len(p.replicas) or p.leader is None))
    else:
        wanted = []
    floors_unread = False
    try:
        configs = await gw.topic_configs(wanted) if wanted else {}
    except NotAuthorized as exc:  # the partitions still answer; only the floors are unknown
        configs, floors_unread = {}, True
        note_missing(
            "the topics' configs (min.insync.replicas taken as 1, so a partition at or under a higher "
            "floor is not flagged)",
            exc,
        )
    floors: dict[str, int] = {}
    for name, cfg in configs.items():
        value = cfg.get("min.insync.replicas")
        if value is not None and value.value is not None:
            floors[name] = int(value.value)
    states = [replace(p, min_isr=floors[p.topic]) if p.topic in floors else p for p in states]
    facts = BrokerFacts(registered=frozenset(cluster.broker_ids), expected=_expected(cluster, described))
    return Snapshot(
        cluster=cluster,
        topics=described,
        configs=configs,
        states=states,
        brokers=facts,
        floors_unread=floors_unread,
        stale_views=stale,
    )


async def _described(
    gw: AdminGateway,
    topics: list[str] | None,
    include_internal: bool,
    cluster_task: asyncio.Future[ClusterInfo],
) -> list[TopicInfo]:
    """The partitions from the one Metadata read librdkafka sends, or, when that one has not answered
    within TOPICS_STALL_S (it went to a paused broker, which holds it for the whole request timeout),
    from the first registered broker that answers its own: a slow broker never holds the answer."""
    asked: asyncio.Future[list[TopicInfo] | None] = asyncio.ensure_future(
        gw.describe_topics(topics, include_internal=include_internal)
    )
    answered, _ = await asyncio.wait({asked}, timeout=TOPICS_STALL_S)
    if answered or not hasattr(gw, "metadata_from"):
        return await _first(asked)
    try:
        cluster = await cluster_task
    except GatewayError:
        return await _first(asked)
    one = topics[0] if topics is not None and len(topics) == 1 else None
    others = [asyncio.ensure_future(_topics_from(gw, b, one)) for b in cluster.brokers]
    pending: set[asyncio.Future[list[TopicInfo] | None]] = {asked, *others}
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.cancelled() or task.exception() is not None:
                    if task is asked:
                        raise task.exception() or GatewayError("the metadata read was cancelled", gw.name)
                    continue
                got = task.result()
                if got is not None and (topics is None or set(topics) <= {t.name for t in got}):
                    return _only(got, topics, include_internal)
        return await _first(asked)
    finally:
        for task in pending:
            task.cancel()
            task.add_done_callback(_discard)


async def _first(asked: asyncio.Future[list[TopicInfo] | None]) -> list[TopicInfo]:
    got = await asked
    assert got is not None  # describe_topics returns a list or raises
    return got


def _discard(task: asyncio.Future[list[TopicInfo] | None]) -> None:
    if not task.cancelled():
        task.exception()


def _only(described: list[TopicInfo], topics: list[str] | None, include_internal: bool) -> list[TopicInfo]:
    if topics is not None:
        wanted = set(topics)
        return [t for t in described if t.name in wanted]
    return [t for t in described if include_internal or not t.internal]


async def _topics_from(gw: AdminGateway, broker: Broker, topic: str | None) -> list[TopicInfo] | None:
    """Every partition as ``broker`` itself reports them (one Metadata request to it), or None when it
    does not answer within the request timeout."""

    address = f"[{broker.host}]:{broker.port}" if ":" in broker.host else f"{broker.host}:{broker.port}"
    try:
        _who, md = await asyncio.to_thread(gw.metadata_from, address, min(gw.timeout_s, 5.0), topic)
    except Exception:  # noqa: BLE001 - a broker that cannot answer gives no partitions
        return None
    out = []
    for name, t in sorted(md.topics.items()):
        if t.error is not None:
            continue
        parts = [
            PartitionInfo(
                topic=name,
                partition=p.id,
                leader=p.leader if p.leader is not None and p.leader >= 0 else None,
                replicas=list(p.replicas),
                isr=list(p.isrs),
                error=p.error.str() if p.error is not None else None,
            )
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        ]
        out.append(TopicInfo(name, parts, name.startswith("__")))
    return out


def name_partitions(parts: Iterable[PartitionState | tuple[str, int]], limit: int = SAMPLE) -> str:
    """'orders-0, orders-3 … (+1,220 more)' from (topic, partition) pairs or PartitionStates.
    The operator's own topics are named before internal ones (__consumer_offsets ...)."""
    pairs = [(p.topic, p.partition) if isinstance(p, PartitionState) else p for p in parts]
    pairs.sort(key=lambda tp: (tp[0].startswith("__"), tp[0], tp[1]))
    shown = ", ".join(f"{t}-{n}" for t, n in pairs[:limit])
    more = len(pairs) - limit
    return f"{shown} (+{more:,} more)" if more > 0 else shown


def broker_list(ids: Iterable[int]) -> str:
    ordered = sorted(ids)
    return ", ".join(str(i) for i in ordered) if ordered else "none"


@overload
def config_value(configs: Mapping[str, ConfigValue], key: str, default: str) -> str: ...
@overload
def config_value(configs: Mapping[str, ConfigValue], key: str, default: str | None = None) -> str | None: ...


def config_value(configs: Mapping[str, ConfigValue], key: str, default: str | None = None) -> str | None:
    """The value of ``key`` in one resource's describe_configs result, or ``default``."""
    entry = configs.get(key)
    return entry.value if entry is not None and entry.value is not None else default
