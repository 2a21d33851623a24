"""History of one metric, bucketed in time and grouped by chosen dimensions.

Gauges are aggregated per bucket with ``agg`` (max by default: for counts like
URP the worst moment in the bucket is what matters).  Cumulative counters
(``*PerSec`` meters, see ``lake.schema``) are turned into a per-second rate:
the sum of the per-step increments that fell in the bucket (reset-aware),
divided by the bucket width.
"""

from __future__ import annotations

import re
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_queries._common import bucket, label, labels_key, only_metrics, with_increments

_AGGS = {
    "max": F.max,
    "min": F.min,
    "avg": F.avg,
    "sum": F.sum,
    "count": F.count,
    "last": lambda c: F.max_by(c, "ts"),
}
_COLUMNS = {"broker", "topic", "partition"}
_LABEL_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _dimension(name: str) -> tuple[str, Column]:
    """``broker``/``topic``/``partition`` or ``label:<key>`` -> (output name, Column)."""
    if name in _COLUMNS:
        return name, F.col(name)
    if name.startswith("label:"):
        key = name[len("label:") :]
        if not _LABEL_KEY.match(key):
            raise ValueError(f"label key must be an identifier, got {key!r}")
        return f"label_{key}", label(key)
    raise ValueError(f"cannot group by {name!r}: use one of {sorted(_COLUMNS)} or 'label:<key>'")


def metric_history(
    df: DataFrame,
    metric: str,
    by: Sequence[str] = ("broker",),
    bucket_s: int = 60,
    agg: str = "max",
    counter: bool | None = None,
) -> DataFrame:
    """Per cluster, bucket and ``by`` dimensions: ``value`` and ``samples``.

    ``metric`` is matched as a literal.  ``counter`` defaults to
    ``metric.endswith("PerSec")``; for counters ``value`` is events/s and
    ``agg`` is ignored.  ``by`` items: ``broker``, ``topic``, ``partition`` or
    ``label:<key>`` (output column ``label_<key>``).
    """
    if agg not in _AGGS:
        raise ValueError(f"agg must be one of {sorted(_AGGS)}, got {agg!r}")
    dims = [_dimension(b) for b in by]
    if counter is None:
        counter = metric.endswith("PerSec")
    s = only_metrics(df, metric)
    if counter:
        s = s.withColumn("lk", labels_key())
        s = with_increments(s, ["cluster", "broker", "topic", "partition", "lk"])
    s = s.withColumn("bucket", bucket("ts", bucket_s))
    s = s.select(
        "cluster", "bucket", "ts", "value", *(["inc"] if counter else []), *[col.alias(name) for name, col in dims]
    )
    names = [name for name, _ in dims]
    if counter:
        value = F.coalesce(F.sum("inc"), F.lit(0.0)) / F.lit(float(bucket_s))
    else:
        value = _AGGS[agg]("value")
    return s.groupBy("cluster", "bucket", *names).agg(
        value.cast("double").alias("value"), F.count("*").alias("samples")
    )
