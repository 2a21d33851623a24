"""The transaction questions answered in process (window_queries.txn), on hand-made samples."""

from tests.window.windowkit import at, sample, window_of
from window_queries.txn import HANGING_QUESTION, growing_lso_lag, last_stable_offset_lag, late_transactions

LATE = "PartitionsWithLateTransactionsCount"


def lso(topic, partition, broker, values):
    return [
        sample("LastStableOffsetLag", v, at(i), broker=broker, topic=topic, partition=partition)
        for i, v in enumerate(values)
    ]


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


LSO = (
    "cluster",
    "topic",
    "partition",
    "samples",
    "first_lag",
    "last_lag",
    "max_lag",
    "increases_since_last_decrease",
    "growth_per_sec",
    "growing",
    "leader_broker",
)

PAY = (
    lso("pay", 0, 1, [2, 1, 3, 10, 20, 30, 40, 50, 60])  # hanging: climbs and never comes down
    + lso("pay", 1, 1, [5, 8, 3, 9, 4, 7, 2, 6, 5])  # normal transactional jitter
    + lso("pay", 2, 2, [0, 10, 20, 30, 40, 50, 60, 70, 65])  # came down at the end
)


def test_last_stable_offset_lag():
    out = last_stable_offset_lag(window_of(PAY))
    assert list(out[0]) == list(LSO)
    assert pick(out, *LSO) == [
        ("c1", "pay", 0, 9, 2.0, 60.0, 60.0, 7, 58 / 480, True, 1),
        ("c1", "pay", 1, 9, 5.0, 5.0, 9.0, 0, 0.0, False, 1),
        ("c1", "pay", 2, 9, 0.0, 65.0, 70.0, 0, 65 / 480, False, 2),
    ]


def test_lso_lag_takes_one_value_per_instant_from_whoever_reported_it_and_needs_a_topic():
    rows = (
        lso("pay", 0, 1, [0, 10, 20])
        + lso("pay", 0, 2, [0, 5, 30])  # leadership moved to broker 2 at minute 2
        + [sample("LastStableOffsetLag", 99, at(0), broker=3)]  # no topic-partition: left out
    )
    out = last_stable_offset_lag(window_of(rows), min_increases=2)
    assert pick(out, "partition", "samples", "first_lag", "last_lag", "growing", "leader_broker") == [
        (0, 3, 0.0, 30.0, True, 2)
    ]
    assert last_stable_offset_lag(window_of(rows), min_increases=3)[0]["growing"] is False


def test_growing_keeps_the_growing_partitions_largest_first_at_most_five():
    rows = [r for p in range(7) for r in lso("t", p, 1, [10 * p + 10 * i for i in range(7)])] + PAY
    out = growing_lso_lag(window_of(rows))
    assert pick(out, "topic", "partition", "last_lag") == [
        ("t", 6, 120.0),
        ("t", 5, 110.0),
        ("t", 4, 100.0),
        ("t", 3, 90.0),
        ("t", 2, 80.0),
    ]


def test_late_transactions():
    rows = [sample(LATE, v, at(i), broker=1) for i, v in enumerate([0, 0, 1, 1])] + [
        sample(LATE, 0, at(i), broker=2) for i in range(4)
    ]
    names = ("cluster", "broker", "max", "last", "nonzero_samples", "first_late_ts", "late")
    out = late_transactions(window_of(rows))
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [
        ("c1", 1, 1.0, 1.0, 2, at(2), True),
        ("c1", 2, 0.0, 0.0, 0, None, False),
    ]


def test_the_hanging_question_is_the_growing_partitions_and_the_late_brokers():
    rows = PAY + [sample(LATE, v, at(i), broker=1) for i, v in enumerate([0, 0, 1, 1])]
    rows += [sample(LATE, 0, at(i), broker=2) for i in range(4)]
    facts = HANGING_QUESTION.answer(window_of(rows))
    assert pick(facts["growing"], "topic", "partition", "first_lag", "last_lag", "leader_broker") == [
        ("pay", 0, 2.0, 60.0, 1)
    ]
    assert pick(facts["late"], "broker", "max", "first_late_ts") == [(1, 1.0, at(2))]
    assert facts["data_end"] == at(8).timestamp()
    assert HANGING_QUESTION.answer(window_of([])) == {"growing": [], "late": [], "data_end": None}
