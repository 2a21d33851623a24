"""Rollups: raw samples -> one row per series and minute, minutes -> hours (``lake.schema``
ROLLUP_SCHEMA), and reading a metric's history back from a rollup table.

Pure DataFrame -> DataFrame.  ``lake.rollups`` runs them incrementally after each ingest batch,
on the minutes the batch touched (and the hours once they have closed).
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lake.schema import ROLLUP_COLUMNS, STALE_S
from spark_queries._common import bucket, dimension, labels_key
from spark_queries.schema import partition_columns

_SERIES = ["cluster", "broker", "metric", "topic", "partition"]
#: A series' columns in the order the lake's files are sorted in (the raw table's rows by metric,
#: topic, partition, broker, ts within a cluster's hour; the rollups' by ``lake.rollups``'
#: SERIES_ORDER): a window partitioned in this order sorts its rows by the same key, so the
#: rows it reads arrive as a few sorted runs (one per file), which the sort merges instead of
#: sorting from scratch.  Same rows out in any order; at the issue's scale it cut the CPU a
#: minute's rollup costs by about a third (a window keyed cluster, broker, metric, ... first).
_SORTED_SERIES = ["metric", "topic", "partition", "broker", "cluster", "lk"]


def minute_rollup(raw: DataFrame, width_s: int = 60, stale_s: int = STALE_S) -> DataFrame:
    """Per series and ``width_s`` bucket: min, max, sum, count, last, last_ts, inc, growth, resets
    and seconds (how long the bucket's counted steps span).

    A step belongs to the bucket of its later sample and counts only when the earlier sample is
    at most ``stale_s`` older (Prometheus's lookback; after a longer gap the series starts
    afresh).  So ``raw`` should reach ``stale_s`` back before the first bucket wanted, and
    callers then keep only the buckets they asked for (``lake.rollups``).
    """
    key = _SORTED_SERIES
    s = raw.select(*_SERIES, labels_key().alias("lk"), "ts", "value")
    by_time = Window.partitionBy(*key).orderBy("ts")
    gap_us = F.unix_micros("ts") - F.unix_micros(F.lag("ts").over(by_time))
    fresh = gap_us <= F.lit(stale_s * 1_000_000)
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
        F.when(fresh, gap_us / F.lit(1e6)).alias("step_s"),
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
        F.sum("step_s").alias("seconds"),
    )
    return _finish(out)


def newest_samples(rollup: DataFrame) -> DataFrame:
    """Rollup rows -> raw-sample rows: each row's newest sample (``last`` at ``last_ts``).  Put
    before the raw samples of the minutes that follow, they give :func:`minute_rollup` the
    previous sample of every series' first step, one row per series and minute instead of every
    raw sample of those minutes."""
    return rollup.select(*_SERIES, "labels", F.col("last_ts").alias("ts"), F.col("last").alias("value"))


def with_seconds(rollup: DataFrame) -> DataFrame:
    """Rollup rows as read from a table, with ``seconds`` null where the table was written before
    that column existed (a look at its columns: one round trip through Spark Connect)."""
    return rollup if "seconds" in rollup.columns else rollup.withColumn("seconds", F.lit(None).cast("double"))


def seen_seconds(width_s: int, has_seconds: bool = True) -> Column:
    """A rollup row's ``seconds``, or for a row of a table written before that column existed
    (every row, without ``has_seconds``), its whole ``width_s`` when it has an increase (null when
    it has none: no step, no time)."""
    whole = F.when(F.col("inc").isNotNull(), F.lit(float(width_s)))
    return F.coalesce(F.col("seconds"), whole) if has_seconds else whole


def coarser_rollup(
    rollup: DataFrame, width_s: int = 3600, from_width_s: int = 60, assume_seconds: bool = False
) -> DataFrame:
    """Re-aggregate a finer rollup of ``from_width_s`` rows into ``width_s`` buckets (minutes ->
    hours): every column of ROLLUP_SCHEMA composes (min of mins, sums of sums/counts/increments
    and seconds, the newest last).  A finer row without ``seconds`` (an older table) that has
    an increase counts as seen for its whole width, so the hour's rate stays inc / seconds.
    ``assume_seconds``: the table has the column, do not ask (see ``lake.queries``)."""
    key = [*_SERIES, "lk"]
    s = (rollup if assume_seconds else with_seconds(rollup)).select(
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
        seen_seconds(from_width_s).alias("seconds"),
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
        F.sum("seconds").alias("seconds"),
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
        F.col("seconds").cast("double").alias("seconds"),
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
    width_s: int = 60,
    has_seconds: bool | None = None,
    newest: bool = False,
) -> DataFrame:
    """``spark_queries.history.metric_history`` answered from a rollup table of ``width_s`` rows.

    Same output (cluster, bucket, ``by`` columns, value, samples).  ``bucket_s`` must be a
    multiple of ``width_s`` (callers pick the table, ``lake.queries``): a bucket is then a union
    of whole rollup buckets and max/min/mean/last come out exact.  A counter's value is, per
    series, its increase over the seconds its steps span in the bucket, summed over the series:
    a bucket seen in part (still filling, cut by the window's start, after a gap) reads at the
    rate it was seen at, not diluted over its whole width.  Rows without ``seconds`` (written
    before the column existed) count as seen for their whole width; ``has_seconds`` None looks
    at the table's columns to know (one more round trip through Spark Connect).  ``newest``:
    also ``newest``, the time of the newest sample each output row was made of (its data's age;
    ``window_queries.history`` gives the same).
    """
    if agg not in _AGGS:
        raise ValueError(f"agg must be one of {sorted(_AGGS)}, got {agg!r}")
    if bucket_s <= 0 or width_s <= 0 or bucket_s % width_s:
        raise ValueError(f"bucket width {bucket_s}s is not a multiple of the rollup's {width_s}s")
    dims = [dimension(b) for b in by]
    names = [name for name, _ in dims]
    if counter is None:
        counter = metric.endswith("PerSec")
    s = rollup.filter(F.col("metric") == F.lit(metric)).withColumn("bucket", bucket("bucket", bucket_s))
    if not counter:
        s = s.select(
            "cluster", "bucket", "min", "max", "sum", "count", "last", "last_ts", *[c.alias(n) for n, c in dims]
        )
        return s.groupBy("cluster", "bucket", *names).agg(
            _AGGS[agg]().cast("double").alias("value"),
            F.sum("count").cast("long").alias("samples"),
            *([F.max("last_ts").alias("newest")] if newest else []),
        )
    if has_seconds is None:
        has_seconds = "seconds" in rollup.columns
    seen = seen_seconds(width_s, has_seconds)
    keep = [f"_by{i}" for i in range(len(dims))]  # the dimensions, apart from the series columns
    per_series = s.groupBy(
        "cluster",
        "bucket",
        "broker",
        "topic",
        "partition",
        labels_key().alias("lk"),
        *[c.alias(k) for (_, c), k in zip(dims, keep)],
    ).agg(
        F.sum("inc").alias("inc"),
        F.sum(seen).alias("seen"),
        F.sum("count").alias("samples"),
        F.max("last_ts").alias("newest"),
    )
    rate = F.when(F.col("seen") > 0, F.col("inc") / F.col("seen"))
    out = per_series.groupBy("cluster", "bucket", *[F.col(k).alias(n) for k, n in zip(keep, names)]).agg(
        F.sum(rate).cast("double").alias("value"),
        F.sum("samples").cast("long").alias("samples"),
        *([F.max("newest").alias("newest")] if newest else []),
    )
    return out.filter(F.col("value").isNotNull())  # no step seen in the bucket: no rate to show
