"""Rollups: raw samples -> one row per series and minute, minutes -> hours (``lake.schema``
ROLLUP_SCHEMA), and reading a metric's history back from a rollup table.

Pure DataFrame -> DataFrame.  ``lake.rollups`` runs them incrementally after each ingest batch,
on the minutes the batch touched (and the hours once they have closed).
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lake.schema import ROLLUP_COLUMNS, STALE_S, partition_columns
from spark_queries._common import bucket, labels_key

_SERIES = ["cluster", "broker", "metric", "topic", "partition"]


def minute_rollup(raw: DataFrame, width_s: int = 60, stale_s: int = STALE_S) -> DataFrame:
    """Per series and ``width_s`` bucket: min, max, sum, count, last, last_ts, inc, growth, resets.

    A step belongs to the bucket of its later sample and counts only when the earlier sample is
    at most ``stale_s`` older (Prometheus's lookback; after a longer gap the series starts
    afresh).  So ``raw`` should reach ``stale_s`` back before the first bucket wanted, and
    callers then keep only the buckets they asked for (``lake.rollups``).
    """
    key = [*_SERIES, "lk"]
    s = raw.select(*_SERIES, labels_key().alias("lk"), "ts", "value")
    by_time = Window.partitionBy(*key).orderBy("ts")
    fresh = F.unix_micros("ts") - F.unix_micros(F.lag("ts").over(by_time)) <= F.lit(stale_s * 1_000_000)
    prev = F.when(fresh, F.lag("value").over(by_time))
    step = F.col("value") - F.col("prev")
    reset = F.col("prev").isNotNull() & (F.col("value") < F.col("prev"))
    s = s.withColumn("prev", prev).select(
        *key,
        "ts",
        "value",
        bucket("ts", width_s).alias("bucket"),
        F.when(F.col("prev").isNull(), F.lit(None).cast("double"))
        .when(reset, F.col("value"))
        .otherwise(step)
        .alias("inc"),
        F.when(F.col("prev").isNotNull(), F.greatest(step, F.lit(0.0))).alias("growth"),
        reset.cast("long").alias("reset"),
    )
    out = s.groupBy(*key, "bucket").agg(
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        F.sum("value").alias("sum"),
        F.count("*").alias("count"),
        F.max_by("value", "ts").alias("last"),
        F.max("ts").alias("last_ts"),
        F.sum("inc").alias("inc"),
        F.sum("growth").alias("growth"),
        F.sum("reset").alias("resets"),
    )
    return _finish(out)


def newest_samples(rollup: DataFrame) -> DataFrame:
    """Rollup rows -> raw-sample rows: each row's newest sample (``last`` at ``last_ts``).  Put
    before the raw samples of the minutes that follow, they give :func:`minute_rollup` the
    previous sample of every series' first step, one row per series and minute instead of every
    raw sample of those minutes."""
    return rollup.select(*_SERIES, "labels", F.col("last_ts").alias("ts"), F.col("last").alias("value"))


def coarser_rollup(rollup: DataFrame, width_s: int = 3600) -> DataFrame:
    """Re-aggregate a finer rollup into ``width_s`` buckets (minutes -> hours): every column
    of ROLLUP_SCHEMA composes (min of mins, sums of sums/counts/increments, the newest last)."""
    key = [*_SERIES, "lk"]
    s = rollup.select(
        *_SERIES,
        labels_key().alias("lk"),
        bucket("bucket", width_s).alias("bucket"),
        "min",
        "max",
        "sum",
        "count",
        "last",
        "last_ts",
        "inc",
        "growth",
        "resets",
    )
    out = s.groupBy(*key, "bucket").agg(
        F.min("min").alias("min"),
        F.max("max").alias("max"),
        F.sum("sum").alias("sum"),
        F.sum("count").alias("count"),
        F.max_by("last", "last_ts").alias("last"),
        F.max("last_ts").alias("last_ts"),
        F.sum("inc").alias("inc"),
        F.sum("growth").alias("growth"),
        F.sum("resets").alias("resets"),
    )
    return _finish(out)


def _finish(out: DataFrame) -> DataFrame:
    date, hour = partition_columns("bucket")
    labels = F.when(F.size("lk") > 0, F.map_from_entries("lk"))
    return out.select(
        "bucket",
        "broker",
        "metric",
        "topic",
        "partition",
        labels.alias("labels"),
        "min",
        "max",
        "sum",
        F.col("count").cast("long").alias("count"),
        "last",
        "last_ts",
        "inc",
        "growth",
        F.col("resets").cast("long").alias("resets"),
        "cluster",
        date.alias("date"),
        hour.alias("hour"),
    ).select(*ROLLUP_COLUMNS)


_AGGS = {
    "max": lambda: F.max("max"),
    "min": lambda: F.min("min"),
    "avg": lambda: F.sum("sum") / F.sum("count"),
    "sum": lambda: F.sum("sum"),
    "count": lambda: F.sum("count"),
    "last": lambda: F.max_by("last", "last_ts"),
}


def rollup_history(
    rollup: DataFrame,
    metric: str,
    by: Sequence[str] = ("broker",),
    bucket_s: int = 3600,
    agg: str = "max",
    counter: bool | None = None,
) -> DataFrame:
    """``spark_queries.history.metric_history`` answered from a rollup table.

    Same output (cluster, bucket, ``by`` columns, value, samples).  ``bucket_s`` must be a
    multiple of the rollup's width (callers pick the table, ``lake.queries``): a bucket is then
    a union of whole rollup buckets and max/min/mean/last/counter rates come out exact.
    """
    from spark_queries.history import _dimension

    if agg not in _AGGS:
        raise ValueError(f"agg must be one of {sorted(_AGGS)}, got {agg!r}")
    dims = [_dimension(b) for b in by]
    if counter is None:
        counter = metric.endswith("PerSec")
    s = rollup.filter(F.col("metric") == F.lit(metric))
    s = s.select(
        "cluster",
        bucket("bucket", bucket_s).alias("bucket"),
        "min",
        "max",
        "sum",
        "count",
        "last",
        "last_ts",
        "inc",
        *[col.alias(name) for name, col in dims],
    )
    names = [name for name, _ in dims]
    value: Column = (F.coalesce(F.sum("inc"), F.lit(0.0)) / F.lit(float(bucket_s))) if counter else _AGGS[agg]()
    return s.groupBy("cluster", "bucket", *names).agg(
        value.cast("double").alias("value"), F.sum("count").cast("long").alias("samples")
    )


def minute_rates(rollup_1m: DataFrame, metric: str = "LogEndOffset") -> DataFrame:
    """Per partition and minute: records/s of its fastest replica (``growth / 60``).

    From the 1-minute rollup of ``metric``; the peak of these over a window is what
    ``hot_partitions`` ranks a burst by.
    """
    per_replica = rollup_1m.filter((F.col("metric") == F.lit(metric)) & F.col("topic").isNotNull()).select(
        "cluster", "topic", "partition", "bucket", (F.col("growth") / F.lit(60.0)).alias("rate")
    )
    return per_replica.groupBy("cluster", "topic", "partition", "bucket").agg(F.max("rate").alias("rate"))
