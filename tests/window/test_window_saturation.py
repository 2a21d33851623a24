"""The saturation questions answered in process (window_queries.saturation), on hand-made samples."""

import pytest

from tests.window.windowkit import at, sample, window_of
from window_queries.saturation import SATURATION_QUESTION, request_handler_idle, request_queue_time


def pick(rows, *names):
    return [tuple(r[n] for n in names) for r in rows]


IDLE = (
    "cluster",
    "broker",
    "samples",
    "min_idle",
    "avg_idle",
    "last_idle",
    "samples_below",
    "saturated",
    "ever_saturated",
)


def idle_rows():
    rows = []
    for broker, values in {1: [0.8, 0.7, 0.9], 2: [0.2, 0.25, 0.4], 3: [0.5, 0.1, 0.6]}.items():
        rows += [sample("RequestHandlerAvgIdlePercent", v, at(i), broker=broker) for i, v in enumerate(values)]
    return rows


def test_request_handler_idle():
    out = request_handler_idle(window_of(idle_rows()), 0.3)
    assert list(out[0]) == list(IDLE)
    assert pick(out, *IDLE) == [
        ("c1", 1, 3, 0.7, pytest.approx(0.8), 0.9, 0, False, False),
        ("c1", 2, 3, 0.2, pytest.approx(0.85 / 3), 0.4, 2, True, True),
        ("c1", 3, 3, 0.1, pytest.approx(0.4), 0.6, 1, False, True),
    ]


def queue_rows():
    def q(req, quant, broker, values):
        return [
            sample("RequestQueueTimeMs", v, at(i), broker=broker, labels={"request": req, "quantile": quant})
            for i, v in enumerate(values)
        ]

    return (
        q("Produce", "0.99", 1, [5, 7])
        + q("Produce", "0.99", 2, [40, 60])
        + q("Produce", "mean", 1, [1, 1])
        + q("FetchConsumer", "0.99", 1, [3])
        + q("FetchConsumer", "0.99", 2, [3])
    )


QUEUE = ("cluster", "request", "quantile", "samples", "avg_ms", "max_ms", "worst_broker")


def test_request_queue_time():
    out = request_queue_time(window_of(queue_rows()))
    assert list(out[0]) == list(QUEUE)
    assert pick(out, *QUEUE) == [
        ("c1", "FetchConsumer", "0.99", 2, 3.0, 3.0, 1),  # tie: lowest broker id
        ("c1", "Produce", "0.99", 4, 28.0, 60.0, 2),
        ("c1", "Produce", "mean", 2, 1.0, 1.0, 1),
    ]


def test_request_queue_time_quantile_is_a_bound_value():
    w = window_of(queue_rows())
    assert len(request_queue_time(w, quantile="0.99")) == 2
    assert request_queue_time(w, quantile="0.99' OR '1'='1") == []


def test_the_saturation_question_asks_with_the_callers_threshold_and_the_p99():
    w = window_of(idle_rows() + queue_rows())
    facts = SATURATION_QUESTION.answer(w, 0.3)
    assert pick(facts["idle"], "broker", "saturated") == [(1, False), (2, True), (3, False)]
    assert pick(facts["queue"], "request", "quantile", "max_ms") == [
        ("FetchConsumer", "0.99", 3.0),
        ("Produce", "0.99", 60.0),
    ]
    assert facts["data_end"] == at(2).timestamp()
    assert pick(SATURATION_QUESTION.answer(w, 0.5)["idle"], "broker", "saturated") == [(1, False), (2, True), (3, True)]
    assert SATURATION_QUESTION.answer(window_of([]), 0.3) == {"idle": [], "queue": [], "data_end": None}
