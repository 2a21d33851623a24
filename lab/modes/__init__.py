"""The explicit list of the lab's failure modes, one module each (no import-time registration)."""

from __future__ import annotations

from lab.mode import Mode
from lab.modes import (
    broker_loss,
    client_quota,
    consumer_stop,
    controller_minority_loss,
    controller_quorum_loss,
    fetch_session_eviction,
    flapping_broker,
    full_disk,
    handler_saturation,
    hanging_transaction,
    hot_partition,
    log_dir_failure,
    metadata_lag,
    min_isr_equals_rf,
    min_isr_raised,
    network_partition,
    offline_partitions,
    one_dir_halt,
    page_cache_cold_reads,
    paused_broker,
    producer_fencing,
    reassignment_throttled,
    rebalance_storm,
    retention_lowered,
    slow_follower,
    unclean_election,
    under_min_isr,
)

MODES: list[Mode] = [
    broker_loss.MODE,
    paused_broker.MODE,
    slow_follower.MODE,
    under_min_isr.MODE,
    min_isr_equals_rf.MODE,
    reassignment_throttled.MODE,
    offline_partitions.MODE,
    controller_minority_loss.MODE,
    controller_quorum_loss.MODE,
    hanging_transaction.MODE,
    producer_fencing.MODE,
    hot_partition.MODE,
    rebalance_storm.MODE,
    consumer_stop.MODE,
    handler_saturation.MODE,
    fetch_session_eviction.MODE,
    unclean_election.MODE,
    full_disk.MODE,
    log_dir_failure.MODE,
    one_dir_halt.MODE,
    flapping_broker.MODE,
    network_partition.MODE,
    page_cache_cold_reads.MODE,
    metadata_lag.MODE,
    client_quota.MODE,
    min_isr_raised.MODE,
    retention_lowered.MODE,
]


def by_name() -> dict[str, Mode]:
    return {m.name: m for m in MODES}
