"""History of one metric, bucketed in time and grouped by chosen dimensions.

Gauges are aggregated per bucket with ``agg`` (max by default: for counts like
URP the worst moment in the bucket is what matters).  Cumulative counters
(``*PerSec`` meters, see ``lake.schema``) are turned into a per-second rate the
way the rollups do it (``spark_queries.rollup``): per series, the increments of
the steps that fell in the bucket (reset-aware; a step over a gap longer than
``STALE_S`` is no step) over the seconds those steps span, summed over the
series.  A bucket seen in part - the one still filling, the one the window's
start cuts, the one after a collector outage - reads at the rate seen in it,
not diluted over its whole width, and a gap's growth is not put in one bucket.
"""

from __future__ import annotations

from typing import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_queries._common import bucket, dimension, only_metrics
from spark_queries.rollup import minute_rollup, rollup_history

_AGGS: dict[str, Callable[[str], Column]] = {
    "max": F.max,
    "min": F.min,
    "avg": F.avg,
    "sum": F.sum,
    "count": F.count,
    "last": lambda c: F.max_by(c, "ts"),
}


def metric_history(
    df: DataFrame,
    metric: str,
    by: Sequence[str] = ("broker",),
    bucket_s: int = 60,
    agg: str = "max",
    counter: bool | None = None,
    newest: bool = False,
) -> DataFrame:
    """Per cluster, bucket and ``by`` dimensions: ``value`` and ``samples``.

    ``metric`` is matched as a literal.  ``counter`` defaults to
    ``metric.endswith("PerSec")``; for counters ``value`` is events/s and
    ``agg`` is ignored.  ``by`` items: ``broker``, ``topic``, ``partition`` or
    ``label:<key>`` (output column ``label_<key>``).  ``newest``: also ``newest``, the time
    of the bucket's newest sample (the data's age).
    """
    if agg not in _AGGS:
        raise ValueError(f"agg must be one of {sorted(_AGGS)}, got {agg!r}")
    dims = [dimension(b) for b in by]
    if counter is None:
        counter = metric.endswith("PerSec")
    if int(bucket_s) <= 0:
        raise ValueError("bucket width must be a positive number of seconds")
    s = only_metrics(df, metric)
    if counter:  # per series and bucket: the increase and the seconds seen, then the rates
        per_bucket = minute_rollup(s, width_s=int(bucket_s))
        return rollup_history(
            per_bucket,
            metric,
            by,
            bucket_s=int(bucket_s),
            counter=True,
            width_s=int(bucket_s),
            has_seconds=True,
            newest=newest,
        )
    s = s.withColumn("bucket", bucket("ts", bucket_s))
    s = s.select("cluster", "bucket", "ts", "value", *[col.alias(name) for name, col in dims])
    names = [name for name, _ in dims]
    return s.groupBy("cluster", "bucket", *names).agg(
        _AGGS[agg]("value").cast("double").alias("value"),
        F.count("*").alias("samples"),
        *([F.max("ts").alias("newest")] if newest else []),
    )
