"""Plain dataclasses returned by :class:`live.gateway.AdminGateway`.

They hold only builtins (str/int/bool/None, lists, dicts) so commands can
render them, compare them in tests and serialise them with
``dataclasses.asdict`` without importing a Kafka client library.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a partition as one broker's metadata shows it: (leader or None, sorted ISR)
PartitionView = tuple[int | None, tuple[int, ...]]
#: each broker's own view of every partition: {broker id: {(topic, partition): PartitionView}}
BrokerViews = dict[int, dict[tuple[str, int], PartitionView]]


@dataclass(frozen=True)
class Broker:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str | None
    # The id the brokers report as "controller". In KRaft mode brokers report
    # a random live *broker* here (they forward controller requests); the
    # real active KRaft controller is ``QuorumInfo.leader_id``.
    controller_id: int | None
    brokers: list[Broker]
    # ids listed in the cluster config (KBOT_EXPECTED_BROKERS / expected_brokers)
    # that are not registered; empty when no expectation is configured.
    expected_brokers: list[int] = field(default_factory=list)
    missing_brokers: list[int] = field(default_factory=list)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(b.id for b in self.brokers)


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int | None  # None when the partition has no leader (offline)
    replicas: list[int]
    isr: list[int]
    # KIP-966 eligible leader replicas; None when not fetched / not reported.
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    offline_replicas: list[int] | None = None
    error: str | None = None  # per-partition error from the metadata response

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader is None

    @property
    def preferred_leader(self) -> int | None:
        return self.replicas[0] if self.replicas else None


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: list[PartitionInfo]
    internal: bool = False
    error: str | None = None

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


@dataclass(frozen=True)
class ConfigValue:
    value: str | None  # None for sensitive or unset values
    is_default: bool
    source: str  # e.g. DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG
    read_only: bool = False
    sensitive: bool = False


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group has no committed offset here
    log_end: int | None  # None: the end offset could not be read
    lag: int | None  # log_end - committed, None when either is unknown
    error: str | None = None
    log_start: int | None = None  # the earliest offset still on the log; None: not read

    @property
    def deleted_unread(self) -> int:
        """Records retention (or DeleteRecords) removed before the group read them: the committed
        offset lies below the log's start, so they count in ``lag`` but can never be consumed."""
        if self.committed is None or self.log_start is None:
            return 0
        return max(0, self.log_start - self.committed)


@dataclass(frozen=True)
class GroupLag:
    group: str
    state: str  # STABLE, EMPTY, ... as reported by the coordinator
    partitions: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def deleted_unread(self) -> int:
        return sum(p.deleted_unread for p in self.partitions)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Ongoing, PrepareCommit, CompleteAbort, ...
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is in progress
    partitions: list[tuple[str, int]]


@dataclass(frozen=True)
class HangingTransaction:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    age_ms: int
    coordinator_id: int
    partitions: list[tuple[str, int]]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    # first offset of the open transaction, -1 when none is open
    current_txn_start_offset: int

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_start_offset >= 0


@dataclass(frozen=True)
class QuorumVoter:
    id: int
    log_end_offset: int
    lag: int  # leader's log end offset - this voter's
    last_fetch_timestamp: int | None = None
    last_caught_up_timestamp: int | None = None
    observer: bool = False  # brokers follow the metadata log as observers


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumVoter]
    observers: list[QuorumVoter]


@dataclass(frozen=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDir:
    broker: int
    path: str
    error: str | None
    partitions: list[LogDirPartition]
    total_bytes: int | None = None
    usable_bytes: int | None = None

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions)


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


@dataclass(frozen=True)
class ElectionResult:
    topic: str
    partition: int
    outcome: str  # "elected" | "already_preferred" | "failed"
    error: str | None = None  # why it failed (e.g. PREFERRED_LEADER_NOT_AVAILABLE: ...)


@dataclass(frozen=True)
class AclBinding:
    """One ACL as DescribeAcls returns it, in Kafka's own names (CLUSTER, not librdkafka's BROKER)."""

    principal: str  # "User:kbot-observer", or "User:*" for every principal
    host: str  # "*" = from any host
    operation: str  # ALTER, ALTER_CONFIGS, DESCRIBE, ALL ...
    permission: str  # ALLOW | DENY
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
    resource_name: str  # "*" with pattern LITERAL = every resource of the type
    pattern: str  # LITERAL | PREFIXED


@dataclass(frozen=True)
class GroupListing:
    """One group from ListGroups, as the broker coordinating it reported it."""

    group_id: str
    state: str  # STABLE, EMPTY, PREPARING_REBALANCE ... ("UNKNOWN" before ListGroups v4)
    protocol_type: str  # "consumer" for consumer groups, "" for offsets-only groups, "connect" ...
    coordinator: int  # the broker that listed it: ListGroups answers with the groups it coordinates
    group_type: str | None = None  # "classic" or "consumer" (KIP-848), from ListGroups v5


@dataclass(frozen=True)
class GroupListings:
    """Every group of the cluster; ``failed_brokers`` (broker id -> why) did not answer
    ListGroups, so the groups they coordinate are missing from ``groups``."""

    groups: list[GroupListing]
    failed_brokers: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None  # static membership (KIP-345)
    assigned: list[tuple[str, int]] = field(default_factory=list)


@dataclass(frozen=True)
class GroupRead:
    """One read of a group: its lag (committed vs log end) and its members, at ``read_at``
    (epoch seconds), so two reads can be compared (lag growing, members churning)."""

    lag: GroupLag
    members: list[GroupMember]
    protocol_type: str
    protocol: str  # the assignor the group agreed on ("range", "cooperative-sticky" ...)
    read_at: float

    @property
    def member_ids(self) -> frozenset[str]:
        return frozenset(m.member_id for m in self.members)


@dataclass(frozen=True)
class PartitionOffsets:
    topic: str
    partition: int
    last_stable: int  # read_committed consumers read up to here
    high_watermark: int  # read_uncommitted consumers read up to here

    @property
    def lso_lag(self) -> int:
        """Records read_committed consumers cannot see yet (held back by an open transaction)."""
        return max(0, self.high_watermark - self.last_stable)


@dataclass(frozen=True)
class ClientQuota:
    """One client-quota entity (DescribeClientQuotas) and its limits."""

    entity: dict[str, str]  # entity type (user, client-id, ip) -> name, "<default>" for the default
    values: dict[str, float]  # producer_byte_rate, consumer_byte_rate, request_percentage ... -> limit

    @property
    def entity_label(self) -> str:
        return ", ".join(f"{t}={n}" for t, n in sorted(self.entity.items()))

    def describe(self) -> str:
        limits = ", ".join(f"{k}={v:g}" for k, v in self.values.items())
        return f"{self.entity_label}: {limits}"
