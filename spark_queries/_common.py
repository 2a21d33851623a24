"""Shared Column helpers for the lake queries.

Rules every query follows (see the package docstring): pure DataFrame -> DataFrame,
no I/O, no session creation, and untrusted values only ever enter a plan as
literals (``F.lit`` / ``isin`` / Column comparisons), never as SQL text.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lake.schema import epoch_micros

#: Columns that identify one series (labels handled separately: maps cannot
#: be grouped on, so they are turned into a sorted array of entries).
SERIES_COLUMNS = ("cluster", "broker", "metric", "topic", "partition")


def ts_lit(ts: _dt.datetime | str) -> Column:
    """A timestamp literal for ``ts`` (naive = UTC).

    Built from epoch microseconds so neither the Python process' local time
    zone nor the session time zone can shift it; it constant-folds, so it
    still reaches Parquet as a pushed filter.
    """
    return F.timestamp_micros(F.lit(epoch_micros(ts)))


def only_metrics(df: DataFrame, *metrics: str) -> DataFrame:
    """Rows of the given metric names (values passed as literals)."""
    return df.filter(F.col("metric").isin(list(metrics)))


def labels_key(col: str = "labels") -> Column:
    """A groupable, order-independent form of the labels map."""
    return F.array_sort(F.map_entries(F.col(col)))


def label(key: str) -> Column:
    """``labels[key]`` (null when absent).  A str key becomes a literal, never SQL text."""
    return F.col("labels").getItem(str(key))


def bucket(ts: Column | str, seconds: int) -> Column:
    """Start of the ``seconds``-wide bucket holding ``ts`` (epoch aligned, tz-free)."""
    seconds = int(seconds)
    if seconds <= 0:
        raise ValueError("bucket width must be a positive number of seconds")
    col = F.col(ts) if isinstance(ts, str) else ts
    secs = F.unix_seconds(col)
    return F.timestamp_seconds(secs - F.pmod(secs, F.lit(seconds)))


def with_increments(df: DataFrame, key: Sequence[str | Column]) -> DataFrame:
    """Add ``prev_value``, ``inc`` and ``reset`` to a cumulative-counter frame.

    ``key`` identifies one series.  The increment of a step is ``value - prev``;
    when the counter went down the process restarted and counted from 0, so the
    increment is ``value`` itself and ``reset`` is true (Prometheus ``increase()``).
    The first sample of a series has no increment (null).
    """
    w = Window.partitionBy(*key).orderBy("ts")
    prev = F.lag("value").over(w)
    return (
        df.withColumn("prev_value", prev)
        .withColumn("reset", F.col("prev_value").isNotNull() & (F.col("value") < F.col("prev_value")))
        .withColumn(
            "inc",
            F.when(F.col("prev_value").isNull(), F.lit(None).cast("double"))
            .when(F.col("reset"), F.col("value"))
            .otherwise(F.col("value") - F.col("prev_value")),
        )
    )


#: What a history can be grouped by besides ``label:<key>`` (spark_queries.history, .rollup).
HISTORY_COLUMNS = {"broker", "topic", "partition"}
LABEL_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def dimension(name: str) -> tuple[str, Column]:
    """``broker``/``topic``/``partition`` or ``label:<key>`` -> (output name, Column)."""
    if name in HISTORY_COLUMNS:
        return name, F.col(name)
    if name.startswith("label:"):
        key = name[len("label:") :]
        if not LABEL_KEY.match(key):
            raise ValueError(f"label key must be an identifier, got {key!r}")
        return f"label_{key}", label(key)
    raise ValueError(f"cannot group by {name!r}: use one of {sorted(HISTORY_COLUMNS)} or 'label:<key>'")
