"""Plain dataclasses returned by :class:`live.gateway.AdminGateway`.

They hold only builtins (str/int/bool/None, lists, dicts) so commands can
render them, compare them in tests and serialise them with
``dataclasses.asdict`` without importing a Kafka client library.
"""
from __future__ import annotations

from dataclasses import dataclass, field


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
    leader: int | None          # None when the partition has no leader (offline)
    replicas: list[int]
    isr: list[int]
    # KIP-966 eligible leader replicas; None when not fetched / not reported.
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    offline_replicas: list[int] | None = None
    error: str | None = None    # per-partition error from the metadata response

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
    value: str | None           # None for sensitive or unset values
    is_default: bool
    source: str                 # e.g. DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG
    read_only: bool = False
    sensitive: bool = False


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None       # None: the group has no committed offset here
    log_end: int | None         # None: the end offset could not be read
    lag: int | None             # log_end - committed, None when either is unknown
    error: str | None = None


@dataclass(frozen=True)
class GroupLag:
    group: str
    state: str                  # STABLE, EMPTY, ... as reported by the coordinator
    partitions: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str                  # Ongoing, PrepareCommit, CompleteAbort, ...
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int          # -1 when no transaction is in progress
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
    lag: int                    # leader's log end offset - this voter's
    last_fetch_timestamp: int | None = None
    last_caught_up_timestamp: int | None = None
    observer: bool = False      # brokers follow the metadata log as observers


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
    outcome: str                # "elected" | "already_preferred" | "failed"
    error: str | None = None    # why it failed (e.g. PREFERRED_LEADER_NOT_AVAILABLE: ...)
