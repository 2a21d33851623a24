"""The availability questions answered in process (window_queries.availability), on hand-made
samples: the timelines under min ISR, offline and of the active controller, and what `why` asks
of them."""

import pytest

from tests.window.windowkit import at, sample, window_of
from window_queries.availability import (
    CONTROLLER_QUESTION,
    OFFLINE_QUESTION,
    UNDER_MIN_ISR_QUESTION,
    controller_anomalies,
    controller_timeline,
    offline,
    offline_timeline,
    under_min_isr,
    under_min_isr_timeline,
)

UNDER, AT, OFFLINE = "UnderMinIsrPartitionCount", "AtMinIsrPartitionCount", "OfflinePartitionsCount"
CONTROLLER = "ActiveControllerCount"


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


ISR_ROWS = [
    sample(UNDER, 0, at(0, 0), broker=1),
    sample(UNDER, 2, at(0, 30), broker=1),
    sample(UNDER, 1, at(1, 0), broker=1),
    sample(UNDER, 0, at(1, 30), broker=1),
    sample(AT, 3, at(0, 0), broker=1),
    sample(UNDER, 0, at(0, 0), broker=2),
    sample(UNDER, 0, at(0, 30), broker=2),
    sample(UNDER, 0, at(1, 0), broker=2),
    sample(OFFLINE, 0, at(0, 0), broker=1),
    sample(OFFLINE, 4, at(0, 30), broker=1),
    sample(OFFLINE, 0, at(1, 0), broker=1),
    sample(OFFLINE, 0, at(0, 0), broker=2),
]

TIMELINE = ("cluster", "bucket", "broker", "under_min_isr", "at_min_isr")


def test_under_min_isr_timeline():
    out = under_min_isr_timeline(window_of(ISR_ROWS))
    assert list(out[0]) == list(TIMELINE)
    assert pick(out, *TIMELINE) == [
        ("c1", at(0), 1, 2.0, 3.0),
        ("c1", at(0), 2, 0.0, None),
        ("c1", at(1), 1, 1.0, None),
        ("c1", at(1), 2, 0.0, None),
    ]


def test_offline_timeline():
    out = offline_timeline(window_of(ISR_ROWS))
    names = ("cluster", "bucket", "offline_partitions", "under_min_isr_partitions")
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [("c1", at(0), 4.0, 2.0), ("c1", at(1), 0.0, 1.0)]


def test_under_min_isr_per_broker_is_what_why_asks():
    names = ("cluster", "broker", "max_under", "minutes_under", "max_at", "minutes")
    out = under_min_isr(window_of(ISR_ROWS))
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [("c1", 1, 2.0, 2, 3.0, 2), ("c1", 2, 0.0, 0, None, 2)]
    facts = UNDER_MIN_ISR_QUESTION.answer(window_of(ISR_ROWS))
    assert facts["rows"] == out
    assert facts["data_end"] == at(1, 30).timestamp()  # its own metrics' newest sample
    assert set(UNDER_MIN_ISR_QUESTION.metrics) == {UNDER, AT}


def test_offline_per_cluster_is_what_why_asks():
    names = ("cluster", "max_offline", "minutes_offline", "first_offline", "minutes")
    out = offline(window_of(ISR_ROWS))
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [("c1", 4.0, 1, int(at(0).timestamp()), 2)]
    quiet = offline(window_of([sample(OFFLINE, 0, at(0)), sample(UNDER, 0, at(1))]))
    assert pick(quiet, *names) == [("c1", 0.0, 0, None, 2)]
    assert OFFLINE_QUESTION.answer(window_of(ISR_ROWS))["rows"] == out
    assert set(OFFLINE_QUESTION.metrics) == {UNDER, OFFLINE}


def controller_rows():
    rows = []
    for minute, values in {
        0: {1: 1, 2: 0, 3: 0},  # fine
        1: {2: 0, 3: 0},  # broker 1 steps down, nobody takes over
        2: {1: 0, 2: 1, 3: 1},  # split brain
        3: {2: 1},  # fine again
        5: {2: 0, 3: 0},  # (minute 4 missing) none again
    }.items():
        rows += [sample(CONTROLLER, v, at(minute), broker=b) for b, v in values.items()]
    rows += [sample(CONTROLLER, 1, at(1, 0), broker=1), sample(CONTROLLER, 0, at(1, 30), broker=1)]
    return rows


def test_controller_timeline():
    names = ("cluster", "bucket", "active_controllers", "controllers", "reporting_nodes", "anomaly")
    out = controller_timeline(window_of(controller_rows()))
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [
        ("c1", at(0), 1.0, [1], 3, False),
        ("c1", at(1), 0.0, [], 3, True),
        ("c1", at(2), 2.0, [2, 3], 3, True),
        ("c1", at(3), 1.0, [2], 1, False),
        ("c1", at(5), 0.0, [], 2, True),
    ]


def test_controller_anomalies():
    names = ("cluster", "start", "end", "buckets", "min_active", "max_active")
    out = controller_anomalies(window_of(controller_rows()))
    assert list(out[0]) == list(names)
    assert pick(out, *names) == [
        ("c1", at(1), at(3), 2, 0.0, 2.0),
        ("c1", at(5), at(6), 1, 0.0, 0.0),
    ]
    facts = CONTROLLER_QUESTION.answer(window_of(controller_rows()))
    assert facts["rows"] == out and facts["data_end"] == at(5).timestamp()


def test_controller_anomalies_keep_clusters_apart_and_a_healthy_one_has_none():
    rows = [sample(CONTROLLER, 1, at(m), broker=1, cluster="a") for m in range(3)] + [
        sample(CONTROLLER, 0, at(m), broker=1, cluster="b") for m in range(3)
    ]
    assert pick(controller_anomalies(window_of(rows)), "cluster", "start", "end", "buckets") == [("b", at(0), at(3), 3)]


def test_buckets_are_epoch_aligned_and_their_width_is_a_parameter():
    rows = [sample(UNDER, v, at(0, s), broker=1) for v, s in ((1, 0), (2, 50), (3, 70), (4, 125))]
    out = under_min_isr_timeline(window_of(rows), bucket_s=120)
    assert pick(out, "bucket", "under_min_isr") == [(at(0), 3.0), (at(2), 4.0)]
    with pytest.raises(ValueError):
        under_min_isr_timeline(window_of(rows), bucket_s=0)


def test_an_empty_window_has_no_rows_and_no_data_end():
    w = window_of([])
    for question in (UNDER_MIN_ISR_QUESTION, OFFLINE_QUESTION, CONTROLLER_QUESTION):
        assert question.answer(w) == {"rows": [], "data_end": None}
