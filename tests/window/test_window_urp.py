"""The URP questions answered in process (window_queries.urp), on hand-made samples."""

from tests.window.windowkit import at, sample, window_of
from window_queries.urp import isr_churn, urp_concentration, urp_trend

URP = "UnderReplicatedPartitions"


def series(broker, values):
    return [sample(URP, v, at(i), broker=broker) for i, v in enumerate(values)]


def counter(metric, broker, values):
    return [sample(metric, v, at(i), broker=broker) for i, v in enumerate(values)]


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


TREND = (
    "cluster",
    "broker",
    "samples",
    "min",
    "max",
    "mean",
    "last",
    "distinct_values",
    "changes",
    "nonzero_samples",
    "modal_value",
    "modal_share",
    "shape",
    "episode_start",
    "began_before_window",
)


def test_urp_trend_shapes():
    rows = (
        series(1, [0, 0, 5, 5, 5, 5, 5, 5, 5, 5])  # broker loss: one step up, level
        + series(2, [0, 3, 1, 4, 0, 2, 5, 1, 3, 2])  # slow follower: wobbles
        + series(3, [0] * 10)
        + series(4, [0, 4, 0, 4, 0, 4, 0, 4, 0, 4])  # one value but toggling: not flat
        + series(5, [0, 0, 6, 6, 6, 6, 6, 6, 0, 0])  # lost and back: step up, step down
        + [sample("IsrShrinksPerSec", 99, at(0), broker=1)]  # other metrics ignored
    )
    out = urp_trend(window_of(rows))
    assert list(out[0]) == list(TREND)
    assert pick(out, *TREND) == [
        ("c1", 1, 10, 0.0, 5.0, 4.0, 5.0, 2, 1, 8, 5.0, 1.0, "flat", at(2), False),
        ("c1", 2, 10, 0.0, 5.0, 2.1, 2.0, 6, 9, 8, 3.0, 0.25, "fluctuating", at(5), False),
        ("c1", 3, 10, 0.0, 0.0, 0.0, 0.0, 1, 0, 0, None, None, "zero", None, False),
        ("c1", 4, 10, 0.0, 4.0, 2.0, 4.0, 2, 9, 5, 4.0, 1.0, "fluctuating", at(9), False),
        ("c1", 5, 10, 0.0, 6.0, 3.6, 0.0, 2, 2, 6, 6.0, 1.0, "flat", None, False),
    ]


def test_urp_duplicate_scrapes_collapse_to_max():
    rows = series(1, [0, 2, 2, 2]) + [sample(URP, 1, at(1), broker=1)]
    assert pick(urp_trend(window_of(rows)), "broker", "samples", "max", "mean", "shape") == [(1, 4, 2.0, 1.5, "flat")]


def test_urp_modal_value_tie_goes_to_the_larger_value_and_last_is_the_newest():
    # 2 and 3 are equally common; the newest sample is 1
    out = urp_trend(window_of(series(1, [0, 2, 3, 2, 3, 1])))
    names = ("samples", "last", "distinct_values", "changes", "nonzero_samples", "modal_value", "modal_share")
    assert pick(out, *names) == [(6, 1.0, 4, 5, 5, 3.0, 0.4)]


def test_urp_concentration():
    rows = (
        series(1, [0, 10, 10])
        + [sample(URP, 7, at(1), broker=1)]
        + series(2, [0, 5, 5])
        + series(3, [0, 0, 0])
        + series(4, [5, 5, 0])
    )
    out = urp_concentration(window_of(rows))
    assert sorted(pick(out, "cluster", "broker", "mean_urp", "max_urp", "share", "rank"), key=lambda r: r[5]) == [
        ("c1", 1, 20 / 3, 10.0, 0.5, 1),
        ("c1", 2, 10 / 3, 5.0, 0.25, 2),
        ("c1", 4, 10 / 3, 5.0, 0.25, 2),
        ("c1", 3, 0.0, 0.0, 0.0, 3),
    ]


def test_urp_in_too_few_samples_has_no_shape_yet():
    """ "fluctuating: between 11 and 11, 0 changes in 1 samples" was a shape read into one sample."""
    rows = series(1, [11]) + series(2, [0, 0, 0, 7, 7]) + series(3, [0, 3, 0, 4, 0])
    out = urp_trend(window_of(rows))
    assert pick(out, "broker", "samples", "changes", "shape", "episode_start", "began_before_window") == [
        (1, 1, 0, "brief", at(0), True),  # one sample of 11: it began before the window
        (2, 5, 1, "brief", at(3), False),  # a step up two samples ago
        (3, 5, 4, "fluctuating", None, False),  # few non-zero samples, but in and out of the ISR: moving
    ]


def test_urp_share_does_not_move_with_missed_scrapes():
    """Brokers 1 and 3 report a steady 5 each, but half of broker 3's scrapes never reached the
    lake (an exporter slow under load): a share of the samples' sum gave broker 1 67%; the share
    of the means says what the levels say, half each, whichever scrapes were missed."""
    full = series(1, [5] * 10)
    half = [sample(URP, 5, at(i), broker=3) for i in range(0, 10, 2)]
    out = urp_concentration(window_of(full + half))
    assert pick(out, "broker", "share", "rank") == [(1, 0.5, 1), (3, 0.5, 1)]
    shifted = [sample(URP, 5, at(i), broker=3) for i in range(1, 10, 3)]
    assert pick(urp_concentration(window_of(full + shifted)), "share") == [(0.5,), (0.5,)]


def test_urp_concentration_no_urp_has_null_share():
    out = urp_concentration(window_of(series(1, [0, 0])))
    assert pick(out, "cluster", "broker", "mean_urp", "max_urp", "share", "rank") == [("c1", 1, 0.0, 0.0, None, 1)]


CHURN = ("cluster", "broker", "shrinks", "expands", "net_shrinks", "resets", "shrinks_without_expands")


def test_isr_churn():
    rows = (
        # broker 1: shrinking, never expanding
        counter("IsrShrinksPerSec", 1, [100, 103, 107, 110])
        + counter("IsrExpandsPerSec", 1, [50, 50, 50, 50])
        # broker 2 restarted between minute 1 and 2: both counters start again from 0
        + counter("IsrShrinksPerSec", 2, [10, 15, 3, 5])
        + counter("IsrExpandsPerSec", 2, [10, 14, 2, 4])
        # broker 3: quiet
        + counter("IsrShrinksPerSec", 3, [0, 0, 0, 0])
        + counter("IsrExpandsPerSec", 3, [0, 0, 0, 0])
        # broker 4: a single sample is no increase
        + counter("IsrShrinksPerSec", 4, [7])
    )
    out = isr_churn(window_of(rows))
    assert list(out[0]) == list(CHURN)
    assert pick(out, *CHURN) == [
        ("c1", 1, 10.0, 0.0, 10.0, 0, True),
        ("c1", 2, 10.0, 8.0, 2.0, 2, False),
        ("c1", 3, 0.0, 0.0, 0.0, 0, False),
        ("c1", 4, 0.0, 0.0, 0.0, 0, False),
    ]


def test_isr_churn_keeps_clusters_and_labelled_series_apart():
    rows = [
        sample("IsrShrinksPerSec", 1, at(0), cluster="a"),
        sample("IsrShrinksPerSec", 4, at(1), cluster="a"),
        sample("IsrShrinksPerSec", 100, at(0), cluster="b"),
        sample("IsrShrinksPerSec", 100, at(1), cluster="b"),
        sample("IsrExpandsPerSec", 0, at(0), cluster="b"),
        sample("IsrExpandsPerSec", 1, at(1), cluster="b"),
        # a second series of the same meter (another label set) is counted on its own
        sample("IsrShrinksPerSec", 50, at(0), cluster="a", labels={"k": "x"}),
        sample("IsrShrinksPerSec", 52, at(1), cluster="a", labels={"k": "x"}),
    ]
    assert pick(isr_churn(window_of(rows)), *CHURN) == [
        ("a", 1, 5.0, 0.0, 5.0, 0, True),
        ("b", 1, 0.0, 1.0, -1.0, 0, False),
    ]


def test_an_empty_window_has_no_rows_and_no_data_end():
    w = window_of([])
    assert urp_trend(w) == [] and urp_concentration(w) == [] and isr_churn(w) == []
    assert w.data_end() is None


def test_a_gauges_trend_is_its_largest_sample_per_broker_and_bucket():
    from window_queries.trend import gauge_trend

    rows = series(1, [0, 2, 5, 1]) + series(2, [3, 3, 3, 3]) + [sample("Other", 9, at(0), broker=1)]
    out = gauge_trend(URP).answer(window_of(rows), 120)  # two samples a bucket (a sample a minute)
    t0 = int(at(0).timestamp())
    assert pick(out["rows"], "bucket", "broker", "value", "samples") == [
        (t0, 1, 2.0, 2),
        (t0, 2, 3.0, 2),
        (t0 + 120, 1, 5.0, 2),
        (t0 + 120, 2, 3.0, 2),
    ]
    assert out["data_end"] == at(3).timestamp()


def test_a_trend_chart_ends_on_the_newest_sample_not_the_minutes_worst():
    """After a recovery the minute's worst (11) stood as the chart's "now" while the newest
    sample was 0: the line ends on the newest sample."""
    from diagnosis.trends import trend_series
    from window_queries.trend import gauge_trend

    rows = series(1, [0, 11, 11, 0]) + series(2, [3, 3, 3, 3])
    out = gauge_trend(URP).answer(window_of(rows), 120)
    assert pick(out["rows"], "broker", "value", "last_value", "last_ts")[-2:] == [
        (1, 11.0, 0.0, at(3)),
        (2, 3.0, 3.0, at(3)),
    ]
    charts = {s.label: s.points for s in trend_series(URP, out["rows"], "partitions")}
    assert [v for _t, v in charts["broker 1"]] == [11.0, 11.0, 0.0]  # the worst of each bucket, then now
    assert charts["broker 1"][-1][0] == at(3).isoformat()
    assert [v for _t, v in charts["broker 2"]] == [3.0, 3.0]  # its newest sample is its bucket's value
