import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from spark_queries.saturation import request_handler_idle, request_queue_time
from tests.spark.conftest import at, sample

pytestmark = pytest.mark.spark


def test_request_handler_idle(lake_df):
    m = "RequestHandlerAvgIdlePercent"
    rows = []
    for broker, values in {1: [0.8, 0.7, 0.9], 2: [0.2, 0.25, 0.4], 3: [0.5, 0.1, 0.6]}.items():
        rows += [sample(m, v, at(i), broker=broker) for i, v in enumerate(values)]
    expected = [
        Row("c1", 1, 3, 0.7, 0.8, 0.9, 0, False, False),
        Row("c1", 2, 3, 0.2, 0.85 / 3, 0.4, 2, True, True),
        Row("c1", 3, 3, 0.1, 0.4, 0.6, 1, False, True),
    ]
    assertDataFrameEqual(request_handler_idle(lake_df(rows), 0.3), expected)


@pytest.fixture(scope="module")
def queue(lake_df):
    m = "RequestQueueTimeMs"

    def q(req, quant, broker, values):
        return [
            sample(m, v, at(i), broker=broker, labels={"request": req, "quantile": quant}) for i, v in enumerate(values)
        ]

    return lake_df(
        q("Produce", "0.99", 1, [5, 7])
        + q("Produce", "0.99", 2, [40, 60])
        + q("Produce", "mean", 1, [1, 1])
        + q("FetchConsumer", "0.99", 1, [3])
        + q("FetchConsumer", "0.99", 2, [3])
    )


def test_request_queue_time(queue):
    expected = [
        Row("c1", "Produce", "0.99", 4, 28.0, 60.0, 2),
        Row("c1", "Produce", "mean", 2, 1.0, 1.0, 1),
        Row("c1", "FetchConsumer", "0.99", 2, 3.0, 3.0, 1),  # tie: lowest broker id
    ]
    assertDataFrameEqual(request_queue_time(queue), expected)


def test_request_queue_time_quantile_is_a_literal(queue):
    assert request_queue_time(queue, quantile="0.99").count() == 2
    assert request_queue_time(queue, quantile="0.99' OR '1'='1").count() == 0
