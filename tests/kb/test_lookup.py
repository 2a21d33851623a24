"""Lookup by id, alias, metric, error, config key and free text, with did-you-mean."""

import pytest

from runbook_kb import default_kb
from runbook_kb.lookup import Lookup, norm


@pytest.fixture(scope="module")
def lookup() -> Lookup:
    return Lookup(default_kb())


@pytest.mark.parametrize(
    "query,first",
    [
        ("broker-loss", "broker-loss"),
        ("Hanging transaction", "hanging-transaction"),
        ("URP", "broker-loss"),
        ("UnderReplicatedPartitions", "broker-loss"),
        ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", "broker-loss"),
        ("IsrShrinksPerSec", "slow-follower"),
        ("UnderMinIsrPartitionCount", "under-min-isr"),
        ("NotEnoughReplicasException", "under-min-isr"),
        ("NotEnoughReplicas", "under-min-isr"),
        ("NOT_ENOUGH_REPLICAS", "under-min-isr"),
        ("OfflinePartitionsCount", "offline-partitions"),
        ("UncleanLeaderElectionsPerSec", "unclean-election"),
        ("OfflineLogDirectoryCount", "log-dir-failure"),
        ("ActiveControllerCount", "controller-quorum-loss"),
        ("NOT_LEADER_OR_FOLLOWER", "metadata-lag"),
        ("RequestHandlerAvgIdlePercent", "handler-saturation"),
        ("max.incremental.fetch.session.cache.slots", "fetch-session-eviction"),
        ("PRODUCER_FENCED", "producer-fencing"),
        ("ProducerFencedException", "producer-fencing"),
        ("LastStableOffsetLag", "hanging-transaction"),
        ("PartitionsWithLateTransactionsCount", "hanging-transaction"),
        ("transaction.max.timeout.ms", "hanging-transaction"),
        ("hot key", "hot-partition"),
        ("consumer group keeps rebalancing", "rebalance-storm"),
        ("disk is full", "full-disk"),
        ("long garbage collection pause", "gc-pauses"),
    ],
)
def test_first_match(lookup, query, first):
    matches = lookup.search(query)
    assert matches, f"nothing for {query!r}"
    assert matches[0].entry.id == first, [m.entry.id for m in matches]


def test_urp_ranks_broker_loss_then_slow_follower(lookup):
    ids = [m.entry.id for m in lookup.search("URP")]
    assert ids[:2] == ["broker-loss", "slow-follower"]
    assert lookup.search("URP")[0].reason == "symptom UnderReplicatedPartitions"


def test_nonsense_finds_nothing_and_near_misses_get_suggestions(lookup):
    assert lookup.search("qwxz zzyzx") == []
    assert "UnderReplicatedPartitions" in lookup.did_you_mean("UnderReplicatedPartitons")
    assert "hanging-transaction" in lookup.did_you_mean("hangingtransaction")


def test_norm_folds_case_camel_and_separators():
    assert norm("NotEnoughReplicas") == norm("not-enough_replicas") == "not enough replicas"
    assert norm("min.insync.replicas") == "min.insync.replicas"
