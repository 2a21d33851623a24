"""The runbook entries the rules conclude, by name: the one place the code spells a failure mode's
id (runbook_kb/data/failure_modes/<id>.yaml). tests/kb/test_entry_ids.py fails when one of these
names no entry, so a renamed entry breaks a test instead of silently never matching."""

from __future__ import annotations

from typing import Final

# replication
BROKER_LOSS: Final = "broker-loss"
SLOW_FOLLOWER: Final = "slow-follower"
NETWORK_PARTITION: Final = "network-partition"
UNDER_MIN_ISR: Final = "under-min-isr"
OFFLINE_PARTITIONS: Final = "offline-partitions"
UNCLEAN_ELECTION: Final = "unclean-election"
# storage
LOG_DIR_FAILURE: Final = "log-dir-failure"
FULL_DISK: Final = "full-disk"
# control plane
CONTROLLER_QUORUM_LOSS: Final = "controller-quorum-loss"
METADATA_LAG: Final = "metadata-lag"
# saturation
GC_PAUSES: Final = "gc-pauses"
PAGE_CACHE_COLD_READS: Final = "page-cache-cold-reads"
HOT_PARTITION: Final = "hot-partition"
HANDLER_SATURATION: Final = "handler-saturation"
FETCH_SESSION_EVICTION: Final = "fetch-session-eviction"
STARVED_BROKER: Final = "starved-broker"
# clients
REBALANCE_STORM: Final = "rebalance-storm"
PRODUCER_FENCING: Final = "producer-fencing"
HANGING_TRANSACTION: Final = "hanging-transaction"
# beyond the runbook's 18: sourced from the Kafka code directly
CLIENT_QUOTA_THROTTLING: Final = "client-quota-throttling"
LAG_BEYOND_RETENTION: Final = "lag-beyond-retention"
SLOW_CONSUMERS: Final = "consumers-slower-than-producers"
STALLED_REASSIGNMENT: Final = "stalled-reassignment"

#: every id above
ALL: Final = frozenset(
    {
        BROKER_LOSS,
        SLOW_FOLLOWER,
        NETWORK_PARTITION,
        UNDER_MIN_ISR,
        OFFLINE_PARTITIONS,
        UNCLEAN_ELECTION,
        LOG_DIR_FAILURE,
        FULL_DISK,
        CONTROLLER_QUORUM_LOSS,
        METADATA_LAG,
        GC_PAUSES,
        PAGE_CACHE_COLD_READS,
        HOT_PARTITION,
        HANDLER_SATURATION,
        FETCH_SESSION_EVICTION,
        STARVED_BROKER,
        REBALANCE_STORM,
        PRODUCER_FENCING,
        HANGING_TRANSACTION,
        CLIENT_QUOTA_THROTTLING,
        LAG_BEYOND_RETENTION,
        SLOW_CONSUMERS,
        STALLED_REASSIGNMENT,
    }
)
