"""Restrict the lake to an incident window, pruning Hive partitions.

Filtering on ``ts`` alone makes Spark open every file of the lake (``ts`` is
inside the files; row-group statistics help only after a file is opened).  The
lake is partitioned by ``cluster``/``date``/``hour`` (UTC), so we add an
equivalent predicate on those columns; Spark turns it into
``PartitionFilters`` on the FileScan and lists only the matching directories.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lake.schema import partition_values, to_utc
from spark_queries._common import ts_lit


def partition_predicate(start: _dt.datetime | str, end: _dt.datetime | str) -> Column:
    """Predicate on ``date``/``hour`` covering every hour that overlaps [start, end).

    ``date`` strings are ``yyyy-MM-dd`` so they compare correctly as strings.
    """
    s, e = to_utc(start), to_utc(end)
    d0, h0 = partition_values(s)
    # end is exclusive: an end exactly on an hour boundary does not need that hour
    d1, h1 = partition_values(e - _dt.timedelta(microseconds=1))
    date, hour = F.col("date"), F.col("hour")
    return (
        date.between(F.lit(d0), F.lit(d1))
        & ((date > F.lit(d0)) | (hour >= F.lit(h0)))
        & ((date < F.lit(d1)) | (hour <= F.lit(h1)))
    )


def incident_window(
    df: DataFrame,
    start: _dt.datetime | str,
    end: _dt.datetime | str,
    cluster: str | None = None,
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """Samples with ``start <= ts < end`` (naive datetimes are UTC), optionally of one cluster.

    The ``date``/``hour`` partition predicate is added when the frame has
    those columns (it always does when read from the lake).  A caller that knows the frame's
    ``columns`` passes them: asking the frame costs a Spark Connect client a round trip in which
    the server analyses the whole read (a Delta snapshot) - on every question.
    """
    s, e = to_utc(start), to_utc(end)
    if e <= s:
        raise ValueError(f"empty incident window: {s.isoformat()} >= {e.isoformat()}")
    # one filter, not three: classic PySpark re-analyses the plan at every step
    keep = (F.col("ts") >= ts_lit(s)) & (F.col("ts") < ts_lit(e))
    known = df.columns if columns is None else columns
    if "date" in known and "hour" in known:
        keep = partition_predicate(s, e) & keep
    if cluster is not None:
        keep = (F.col("cluster") == F.lit(cluster)) & keep
    return df.filter(keep)
