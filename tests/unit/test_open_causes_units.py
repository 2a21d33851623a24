"""The pure parts of issue 35's open causes: the lag ranking with records deleted unread, the quota
and reassignment answers, the topic names a question carries, what an epoch says about inits."""

from __future__ import annotations

from diagnosis.groups import GroupFacts, rank
from diagnosis.named_topics import topic_candidates
from diagnosis.quota_checks import QuotaRead, quota_findings
from diagnosis.reassignment_findings import ReassignmentRead, reassignment_findings
from diagnosis.txn_checks import initialisations
from live.model import ClientQuota, PartitionLag, Reassignment


def test_deleted_unread_is_the_part_of_the_lag_below_the_log_start():
    p = PartitionLag("t", 0, committed=10, log_end=100, lag=90, log_start=60)
    assert p.deleted_unread == 50
    assert PartitionLag("t", 1, 70, 100, 30, None, 60).deleted_unread == 0
    assert PartitionLag("t", 2, None, 100, None, None, 60).deleted_unread == 0


def test_records_deleted_unread_lead_a_stopped_group_and_say_data_lost():
    f = GroupFacts(
        "g",
        ("EMPTY",) * 3,
        (frozenset(),) * 3,
        (300, 310, 320),
        False,
        1.0,
        partitions=3,
        lagging_partitions=3,
        deleted_unread=200,
        deleted_partitions=("t-0", "t-1"),
    )
    r = rank(f)
    assert r.causes[0].entry_id == "lag-beyond-retention" and r.severity == "critical"
    assert r.verdict.startswith("Group g: 200 of its 320 records of lag were deleted by retention")
    assert "120 are still on the log" in r.verdict and "STOP" in r.verdict


def _stable_growing(**kw) -> GroupFacts:
    """One member in every read of a STABLE group whose lag over 3 partitions grows 50 a read."""
    return GroupFacts(
        "g", ("STABLE",) * 5, (frozenset({"a"}),) * 5, (100, 150, 200, 250, 300), True, 2.0, partitions=3, **kw
    )


def test_even_growing_lag_is_slow_consumers_with_the_hot_partition_only_considered():
    r = rank(_stable_growing(lagging_partitions=3, worst_partition="t-0", worst_share=0.34))
    ranked = [c.entry_id for c in r.causes if not c.considered]
    assert ranked[0] == "consumers-slower-than-producers" and "hot-partition" not in ranked


def test_lag_on_one_partition_is_a_hot_partition_only_when_the_writes_go_there_too():
    """Chaos trial 2911:0: a consumer reading 4 records/s of 40 written evenly over 3 partitions,
    asked in its first seconds, had most of its lag on one partition and was called a hot partition."""
    from diagnosis.groups import LagSignals, _write_share
    from live.model import GroupLag

    sig = LagSignals(lag_entries=("hot-partition", "consumers-slower-than-producers"))

    def facts(write_share):
        return _stable_growing(
            lagging_partitions=3, worst_partition="t-2", worst_share=0.8, worst_write_share=write_share
        )

    even = rank(facts(0.34), sig)
    ranked = [c.entry_id for c in even.causes if not c.considered]
    assert ranked[0] == "consumers-slower-than-producers" and "hot-partition" not in ranked, even.causes
    hot = next(c for c in even.causes if c.entry_id == "hot-partition")
    assert hot.reason.startswith("ranks lower: the writes are spread over the partitions (t-2 took 34%"), hot.reason
    skewed = rank(facts(0.9), sig)
    assert skewed.causes[0].entry_id == "hot-partition"
    assert rank(facts(None), sig).causes[0].entry_id == "hot-partition"  # too few written to tell

    def lag(ends):
        return GroupLag("g", "STABLE", [PartitionLag("t", i, 0, e, e) for i, e in enumerate(ends)])

    first, last = lag([100, 100, 100]), lag([130, 131, 129])
    assert _write_share(first, last, last.partitions[2]) == 29 / 90
    assert _write_share(first, lag([101, 101, 101]), last.partitions[2]) is None  # 3 written: too few


def test_partitions_with_records_and_no_commit_are_not_caught_up_and_point_at_a_slow_consumer():
    """Chaos trial 2911:47: a consumer reading 4 records/s, its producer held still by a paused
    broker: "132 records behind on 1 partition(s), not growing", no cause, while 2 of its 3
    partitions held records it had never committed on (left out of the 132)."""

    def facts(lags, unreached):
        return GroupFacts(
            "g",
            ("STABLE",) * 5,
            (frozenset({"a"}),) * 5,
            lags,
            True,
            2.0,
            partitions=3,
            lagging_partitions=1 if lags[-1] else 0,
            worst_partition="t-0" if lags[-1] else None,
            worst_share=1.0 if lags[-1] else 0.0,
            unreached=unreached,
        )

    r = rank(facts((132,) * 5, 2))
    assert [c.entry_id for c in r.causes if not c.considered][0] == "consumers-slower-than-producers", r.causes
    assert "no committed offset on 2 partition(s) that hold records" in r.verdict, r.verdict
    assert "What decides it: ask again in a minute" in r.verdict
    assert rank(facts((0,) * 5, 2)).status == "BEHIND"  # not "caught up"
    assert rank(facts((0,) * 5, 0)).status == "OK"
    plain = rank(facts((132,) * 5, 0))
    assert "no committed offset" not in plain.verdict and not [c for c in plain.causes if not c.considered]


def test_a_quota_is_named_with_its_entity_and_value():
    read = QuotaRead([ClientQuota({"client-id": "slowapp"}, {"producer_byte_rate": 1024.0})])
    found = quota_findings(read)
    assert found.verdict.startswith(
        "Client quota in force: client-id=slowapp (producer_byte_rate=1,024 B/s per broker)"
    )
    assert found.lead[0][0] == "client-quota-throttling"
    none = quota_findings(QuotaRead([]))
    assert none.lead == [] and "No client quota is set" in none.verdict
    unread = quota_findings(QuotaRead(error="Timeout"))
    assert unread.severity == "warning" and "unknown" in unread.verdict


def test_a_reassignment_whose_target_is_gone_is_stalled_and_names_topic_target_and_throttle():
    read = ReassignmentRead(
        [Reassignment("orders", 0, [103, 101], [103], [101])],
        frozenset({101, 102}),
        {101: {"leader.replication.throttled.rate": 1024}},
    )
    found = reassignment_findings(read)
    assert found.severity == "critical" and found.lead[0][0] == "stalled-reassignment"
    assert "topic orders" in found.verdict and "moving to broker 103" in found.verdict
    assert "broker 103 is gone" in found.verdict
    assert "leader.replication.throttled.rate=1,024 B/s on broker 101" in found.verdict
    running = reassignment_findings(ReassignmentRead(read.moves, frozenset({101, 102, 103})))
    assert running.severity == "info" and running.verdict.startswith("A reassignment is running")


def test_topic_candidates_are_the_words_where_a_topic_name_stands():
    assert topic_candidates("consumers on orders stuck") == ["orders"]
    assert topic_candidates("URP on broker 103") == []
    assert topic_candidates("lag for topic payments-v2") == ["payments-v2"]
    assert topic_candidates("why IsrShrinksPerSec") == []


def test_the_epoch_gives_a_lower_bound_on_the_initialisations():
    # one re-init that found a transaction open bumps twice: two init_transactions leave epoch 2
    assert initialisations(2) == "initialised at least 2 times"
    assert initialisations(1) == "initialised at least 2 times"
    assert initialisations(4) == "initialised at least 3 times"
