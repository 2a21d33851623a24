"""A small in-memory stand-in for live.gateway.AdminGateway: just the calls the action, triage and
digest modules make, returning the same live.model dataclasses. For pure plan/precondition tests;
the behaviour against Kafka itself is covered by the integration tests in this folder."""

from __future__ import annotations

import time

from live.gateway import GatewayError, UnknownTopic
from live.model import (
    Broker,
    ClusterInfo,
    ConfigValue,
    GroupLag,
    GroupMember,
    GroupRead,
    LogDir,
    PartitionInfo,
    PartitionLag,
    PartitionOffsets,
    ProducerState,
    QuorumInfo,
    QuorumVoter,
    TopicInfo,
    TransactionDescription,
    TransactionListing,
)


def cv(value, source="DYNAMIC_TOPIC_CONFIG"):
    return ConfigValue(value=value, is_default=source == "DEFAULT_CONFIG", source=source)


class FakeGateway:
    name = "fake"
    # no JMX exporters configured: the metric checks say so instead of reading
    config = type("FakeConfig", (), {"name": "fake", "metrics_urls": {}})()

    def __init__(self, brokers=(101, 102, 103), topics=None, producers=None, reassignments=(), fail=()):
        self.brokers = list(brokers)
        # topic -> list of (leader, replicas, isr)
        self.layout = topics or {"orders": [(101, [101, 102, 103], [101, 102, 103])]}
        self.producers = producers or {}
        self.moves = list(reassignments)
        self.topic_cfg: dict[str, dict[str, ConfigValue]] = {
            t: {
                "min.insync.replicas": cv("2"),
                "retention.ms": cv("604800000", "DEFAULT_CONFIG"),
                "cleanup.policy": cv("delete", "DEFAULT_CONFIG"),
            }
            for t in self.layout
        }
        self.broker_cfg: dict[int, dict[str, ConfigValue]] = {b: {} for b in self.brokers}
        self.hanging = []  # live.model.HangingTransaction
        self.dirs: list[LogDir] = []  # what log_dirs answers: no log directory unless a test gives some
        self.fail = set(fail)  # method names that raise
        self.calls: list[tuple] = []
        # When the fake's transactions began: fixed at creation, so a reader whose clock runs after
        # it sees each transaction at least as old as its age_ms (never a millisecond younger).
        self.created_ms = int(time.time() * 1000)

    def _check(self, what):
        if what in self.fail:
            raise GatewayError(f"{what} failed on purpose", self.name)

    async def describe_cluster(self):
        self._check("describe_cluster")
        return ClusterInfo(
            "cid", self.brokers[0] if self.brokers else None, [Broker(b, "127.0.0.1", 9000 + b) for b in self.brokers]
        )

    async def describe_topics(self, names=None, include_internal=False, elr=False):
        self._check("describe_topics")
        wanted = list(self.layout) if names is None else list(names)
        missing = [n for n in wanted if n not in self.layout]
        if missing:
            raise UnknownTopic(missing, self.name)
        return [
            TopicInfo(
                n,
                [PartitionInfo(n, i, leader, list(r), list(isr)) for i, (leader, r, isr) in enumerate(self.layout[n])],
            )
            for n in wanted
        ]

    async def metadata_views(self, brokers=None, budget_s=1.5, most=7, topic=None):
        """Every broker sees the same layout (a real cluster's disagreement is in tests/lab)."""
        self._check("metadata_views")
        view = {
            (t, i): (leader, tuple(sorted(isr)))
            for t, parts in self.layout.items()
            if topic is None or t == topic
            for i, (leader, _, isr) in enumerate(parts)
        }
        return {b: dict(view) for b in self.brokers}

    async def topics(self, include_internal=False):
        return sorted(self.layout)

    async def topic_configs(self, names):
        self._check("topic_configs")
        names = [names] if isinstance(names, str) else list(names)
        missing = [n for n in names if n not in self.topic_cfg]
        if missing:
            raise UnknownTopic(missing, self.name)
        return {n: dict(self.topic_cfg[n]) for n in names}

    async def broker_configs(self, ids=None):
        self._check("broker_configs")
        return {b: dict(self.broker_cfg[b]) for b in (ids or self.brokers)}

    async def alter_topic_config(self, topic, key, value, validate_only=False):
        self.calls.append(("topic", topic, key, value, validate_only))
        self._check("alter_topic_config")
        if not validate_only:
            if value is None:
                self.topic_cfg[topic].pop(key, None)
            else:
                self.topic_cfg[topic][key] = cv(value)

    async def alter_broker_config(self, broker, key, value, validate_only=False):
        self.calls.append(("broker", broker, key, value, validate_only))
        self._check("alter_broker_config")
        if not validate_only:
            if value is None:
                self.broker_cfg[broker].pop(key, None)
            else:
                self.broker_cfg[broker][key] = cv(value, "DYNAMIC_BROKER_CONFIG")

    async def reassignments(self):
        return self.moves

    async def client_quotas(self):
        self._check("client_quotas")
        return list(getattr(self, "quotas", []))

    async def describe_producers(self, topic, partition, broker_id=None):
        return list(self.producers.get((topic, partition), []))

    async def find_hanging_transactions(self, min_age_ms=None, **_):
        self._check("find_hanging_transactions")
        return [h for h in self.hanging if min_age_ms is None or h.age_ms >= min_age_ms]

    async def list_transactions_partial(self, broker_ids=None, states=None):
        self._check("list_transactions")
        return [
            TransactionListing(h.transactional_id, h.producer_id, h.state, h.coordinator_id) for h in self.hanging
        ], {}

    async def describe_transactions(self, ids):
        return {
            h.transactional_id: TransactionDescription(
                h.transactional_id,
                h.coordinator_id,
                h.state,
                h.producer_id,
                h.producer_epoch,
                60_000,
                self.created_ms - h.age_ms,
                list(h.partitions),
            )
            for h in self.hanging
            if h.transactional_id in ids
        }

    async def stable_offsets(self, topic_partitions):
        """High watermark 1,000 everywhere; the LSO sits at the first open transaction's start."""
        self._check("stable_offsets")
        out = {}
        for t, p in topic_partitions:
            starts = [s.current_txn_start_offset for s in self.producers.get((t, p), []) if s.has_open_transaction]
            out[(t, p)] = PartitionOffsets(t, p, min(starts, default=1_000), 1_000)
        return out

    async def broker_liveness(self, broker_ids):
        return {}

    async def controller_liveness(self):
        return {}

    async def consumer_group_lag(self, group, read_committed=False):
        self._check("consumer_group_lag")
        return GroupLag(group, "STABLE", [PartitionLag("orders", 0, 5, 15, 10)])

    async def list_consumer_groups(self, broker_ids=None):
        from live.model import GroupListing, GroupListings

        return GroupListings([GroupListing("payments", "STABLE", "consumer", 101)])

    async def consumer_groups_read(self, groups):
        from live.model import GroupMember, GroupRead

        return {
            g: GroupRead(await self.consumer_group_lag(g), [GroupMember("m1", "c", "/h")], "consumer", "range", 0.0)
            for g in groups
        }

    async def metadata_quorum(self):
        return QuorumInfo(1, 3, 100, [QuorumVoter(1, 100, 0)], [])

    async def log_dirs(self, broker_ids=None):
        self._check("log_dirs")
        return [d for d in self.dirs if broker_ids is None or d.broker in broker_ids]


class GroupReadingGateway(FakeGateway):
    """A FakeGateway that also has the real gateway's consumer_group_read (one group's lag and its
    members in one read), so `lag <group>` sees members as it does on a cluster. Each read is
    stamped by ``read_clock`` instead of the wall clock, so "5 reads over 2.0 s" never varies."""

    def __init__(self, *args, read_clock, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_clock = read_clock

    async def consumer_group_read(self, group, read_committed=False):
        lag = await self.consumer_group_lag(group, read_committed)
        return GroupRead(lag, [GroupMember("m1", "c", "/h")], "consumer", "range", self.read_clock())


class FakePool:
    def __init__(self, gw):
        self.gw = gw

    async def get(self, name=None):
        return self.gw


def producer(pid, start, epoch=0, last_ts=1_000, coord_epoch=3):
    return ProducerState(pid, epoch, 4, last_ts, coord_epoch, start)
