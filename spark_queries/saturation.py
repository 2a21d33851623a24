"""Request-path saturation: handler-thread idle and request queue time.

``RequestHandlerAvgIdlePercent`` is the fraction (0..1) of time the broker's
I/O (request handler) threads were idle.  Below the runbook's line (the handler-saturation entry's
``checks.thresholds.handler_idle_saturated_below``, passed in by the caller) requests wait in the request queue for a free handler thread, which shows up
as ``RequestQueueTimeMs`` growing for every request type on that broker.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lake.schema import LABEL_QUANTILE, LABEL_REQUEST
from spark_queries._common import label, only_metrics

IDLE = "RequestHandlerAvgIdlePercent"
QUEUE = "RequestQueueTimeMs"


def request_handler_idle(df: DataFrame, threshold: float) -> DataFrame:
    """Per broker: samples, min_idle, avg_idle, last_idle, samples_below
    (samples under ``threshold``), saturated (avg_idle < threshold) and
    ever_saturated (min_idle < threshold)."""
    t = F.lit(float(threshold))
    return (
        only_metrics(df, IDLE)
        .groupBy("cluster", "broker")
        .agg(
            F.count("*").alias("samples"),
            F.min("value").alias("min_idle"),
            F.avg("value").alias("avg_idle"),
            F.max_by("value", "ts").alias("last_idle"),
            F.count_if(F.col("value") < t).alias("samples_below"),
        )
        .withColumn("saturated", F.col("avg_idle") < t)
        .withColumn("ever_saturated", F.col("min_idle") < t)
    )


def request_queue_time(df: DataFrame, quantile: str | None = None) -> DataFrame:
    """Per request type (``labels.request``) and quantile (``labels.quantile``):
    samples, avg_ms, max_ms and worst_broker (the broker with the max sample).

    ``quantile`` keeps one quantile label value (e.g. ``"0.99"``), as a literal.
    """
    s = (
        only_metrics(df, QUEUE)
        .withColumn("request", label(LABEL_REQUEST))
        .withColumn("quantile", label(LABEL_QUANTILE))
    )
    if quantile is not None:
        s = s.filter(F.col("quantile") == F.lit(quantile))
    return s.groupBy("cluster", "request", "quantile").agg(
        F.count("*").alias("samples"),
        F.avg("value").alias("avg_ms"),
        F.max("value").alias("max_ms"),
        F.max_by("broker", F.struct("value", (-F.col("broker")).alias("nb"))).alias("worst_broker"),
    )
