"""Keep the 1-minute and 1-hour rollup tables (``lake.schema``: ROLLUP_SCHEMA) in step with the
raw samples, incrementally: after an ingest batch, only the minutes it touched are recomputed.

Recomputing whole hours (as this module first did) read every raw sample of the hour, and of
the hour before, on every run, and the hour rollup re-read the whole day's minutes: the cost
grew through the hour and the day (for the ~4,700 series of a 3-broker ``kbot run``, by
arithmetic: up to 2 M raw rows a run at the end of each hour, and up to 7 M minute rows by the
end of the day).  Now a run costs the minutes it recomputes:

* **1-minute rollup.**  The touched minutes are merged into ranges.  A new sample also changes
  the step of its series' next sample, at most :data:`STALE_S` later, so each range is
  stretched by that much.  A range's raw samples are rolled up together with the newest
  sample of each series in the :data:`STALE_S` before it, taken from the minute rollup's
  ``last``/``last_ts`` (the previous sample of each first step).  A minute in that span that
  is itself due is recomputed in the same run (the two ranges merge) or in a later one, whose
  stretch then covers this range again.  The result replaces exactly those minutes of
  ``<table>_1m`` (Delta ``replaceWhere`` on the partition and ``bucket``).
* **1-hour rollup.**  An hour's row is written once the hour is closed (:func:`hour_closed`:
  ended :data:`STALE_S` ago, so no new sample can still change its minutes), from its minute
  rows, and again only if late samples change those minutes.  Recomputing the open hour from
  its minutes on every run cost a run more as the hour filled (at the issue's scale, up to
  60 M minute rows a minute); readers take the hours not closed yet from the minute rollup
  instead (``lake.service.LakeView.rollup``: :data:`OPEN_HOURS`).

A step counts only when the previous sample is at most :data:`STALE_S` older
(``spark_queries.rollup.minute_rollup``), in a full rebuild too.  So an incremental run gives
the same rows as a rebuild from scratch, and recomputing (not adding to) keeps a run
idempotent: a batch recovered after a crash, or late samples for an old minute, give the
same rollup as one clean run.

Ranges cover every cluster: a minute is recomputed for all clusters that have samples in it.
The ``replaceWhere`` text is then built only from integers and dates computed here, never from
a cluster name or any other value that came from outside.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterable

from lake import delta
from lake.schema import (  # noqa: F401 - OPEN_HOURS and open_hours_start are read through here too
    OPEN_HOURS,
    ROLLUP_PARTITIONS,
    ROLLUPS,
    STALE_S,
    open_hours_start,
    partition_values,
    table_path,
)
from spark_queries.rollup import coarser_rollup, minute_rollup, newest_samples

_MINUTE = 60


def hour_closed(date: str, hour: int, now: float) -> bool:
    """Has the hour ended at least :data:`STALE_S` before ``now`` (epoch seconds)?"""
    return _hour_start(date, hour) + 3600 + STALE_S <= now


def _hour_start(date: str, hour: int) -> int:
    return int(_dt.datetime.fromisoformat(date).replace(hour=int(hour), tzinfo=_dt.timezone.utc).timestamp())


def hour_minutes(hours: Iterable[tuple[str, str, int]]) -> set[int]:
    """The minutes (epoch seconds) of ``(cluster, date, hour)`` partitions."""
    out: set[int] = set()
    for _, date, hour in hours:
        first = _hour_start(date, hour)
        out.update(range(first, first + 3600, _MINUTE))
    return out


def minute_ranges(minutes: Iterable[int], stretch_s: int = 0) -> list[tuple[int, int]]:
    """Minutes (epoch seconds) -> sorted, disjoint ``[start, end)`` ranges, each stretched
    ``stretch_s`` forward (then merged again)."""
    starts = sorted({int(m) - int(m) % _MINUTE for m in minutes})
    out: list[tuple[int, int]] = []
    for m in starts:
        end = m + _MINUTE + stretch_s
        if out and m <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((m, end))
    return out


def _hours_of(ranges: list[tuple[int, int]], back_s: int = 0) -> list[tuple[str, int]]:
    """The (date, hour) partitions ``[start - back_s, end)`` of the ranges cover."""
    hours: set[tuple[str, int]] = set()
    for start, end in ranges:
        h = (start - back_s) // 3600 * 3600
        while h < end:
            hours.add(partition_values(_dt.datetime.fromtimestamp(h, _dt.timezone.utc)))
            h += 3600
    return sorted(hours)


def _partition_sql(hours: list[tuple[str, int]], with_hour: bool) -> str:
    """``date``/``hour`` partitions as SQL text, for ``replaceWhere`` (values are ours: checked)."""
    terms = []
    for date, hour in hours:
        _dt.date.fromisoformat(date)  # raises on anything but a date we formatted
        terms.append(f"(date = '{date}' AND hour = {int(hour)})" if with_hour else f"date = '{date}'")
    return "(" + " OR ".join(sorted(set(terms))) + ")"


def _range_sql(ranges: list[tuple[int, int]]) -> str:
    return (
        "("
        + " OR ".join(
            f"(bucket >= timestamp_seconds({int(a)}) AND bucket < timestamp_seconds({int(b)}))" for a, b in ranges
        )
        + ")"
    )


#: The order of the rows inside each rollup file: a series' rows lie together, so the Parquet
#: reader's page statistics let a one-partition question (a 7-day trend of topic T partition P)
#: read a few pages of each day instead of every row of it.  At 30,000 partitions x 7 days it
#: took that trend through Spark Connect from 0.99 s to 0.33 s (scripts/bench_lake.py).
SERIES_ORDER = ("metric", "topic", "partition", "broker", "bucket")


def update_rollups(
    spark, table: str, minutes: Iterable[int], *, hours: Iterable[tuple[str, int]] = (), now: float | None = None
) -> dict:
    """Recompute the minute rollup of ``minutes`` (epoch seconds, any second of the minute will
    do) and of the samples a new sample there affects; then write the hour rows of every closed
    hour among ``hours`` (``(date, hour)``) and the hours those minutes fall in.  ``now`` (epoch
    seconds) tells which hours are closed; None treats them all as closed (a rebuild).

    Returns ``{"minutes", "hours" (written), "open" (the (date, hour)s left for a later run),
    "seconds"}``.
    """
    from pyspark.sql import functions as F

    ranges = minute_ranges(minutes, stretch_s=STALE_S)
    candidates = {(d, int(h)) for d, h in hours} | set(_hours_of(ranges))
    closed = sorted(h for h in candidates if now is None or hour_closed(*h, now))
    result = {"minutes": 0, "hours": 0, "open": sorted(candidates - set(closed)), "seconds": 0.0}
    if not candidates or not delta.table_exists(spark, table):
        return result
    t0 = time.monotonic()

    def ts_between(col: str, a: int, b: int):
        return (F.col(col) >= F.timestamp_seconds(F.lit(a))) & (F.col(col) < F.timestamp_seconds(F.lit(b)))

    def any_of(terms):
        cond = F.lit(False)
        for t in terms:
            cond = cond | t
        return cond

    def in_hours(hours: list[tuple[str, int]]):
        return any_of((F.col("date") == F.lit(d)) & (F.col("hour") == F.lit(h)) for d, h in hours)

    path_1m = table_path(table, "1m")
    if ranges:
        # minutes: the raw samples of each range (the hour predicate prunes partitions, the ts
        # one lets Delta skip other batches' files by their statistics), and before each range
        # the newest sample of each of its minutes up to STALE_S back, from the minute rollup's
        # `last`: the previous sample of every series' first step, at most one row per series
        # and minute instead of every raw sample of those minutes
        cols = ["cluster", "broker", "metric", "topic", "partition", "labels", "ts", "value"]
        samples = (
            spark.read.format("delta")
            .load(table)
            .filter(in_hours(_hours_of(ranges)))
            .filter(any_of(ts_between("ts", a, b) for a, b in ranges))
            .select(*cols)
        )
        before = [(a - STALE_S, a) for a, _ in ranges]
        if delta.table_exists(spark, path_1m):
            previous = newest_samples(
                spark.read.format("delta")
                .load(path_1m)
                .filter(in_hours(_hours_of(before)))
                .filter(any_of(ts_between("bucket", a, b) for a, b in before))
            ).select(*cols)
            samples = samples.unionByName(previous)
        rolled = minute_rollup(samples, stale_s=STALE_S).filter(any_of(ts_between("bucket", a, b) for a, b in ranges))
        delta.replace_where(
            rolled.repartition(*ROLLUP_PARTITIONS["1m"]).sortWithinPartitions(*SERIES_ORDER),
            path_1m,
            ROLLUP_PARTITIONS["1m"],
            f"{_partition_sql(_hours_of(ranges), with_hour=True)} AND {_range_sql(ranges)}",
        )
        result["minutes"] = sum((b - a) // _MINUTE for a, b in ranges)
    if closed and delta.table_exists(spark, path_1m):
        # hours: each closed hour from its own minute rows
        hour_ranges = [(_hour_start(d, h), _hour_start(d, h) + 3600) for d, h in closed]
        minute_rows = spark.read.format("delta").load(path_1m).filter(in_hours(closed))
        delta.replace_where(
            coarser_rollup(minute_rows, ROLLUPS["1h"])
            .repartition(*ROLLUP_PARTITIONS["1h"])
            .sortWithinPartitions(*SERIES_ORDER),
            table_path(table, "1h"),
            ROLLUP_PARTITIONS["1h"],
            f"{_partition_sql(closed, with_hour=False)} AND {_range_sql(hour_ranges)}",
        )
        result["hours"] = len(closed)
    result["seconds"] = time.monotonic() - t0
    return result


def all_hours(spark, table: str) -> list[tuple[str, str, int]]:
    """Every (cluster, date, hour) the raw table holds (to build rollups for a whole lake)."""
    if not delta.table_exists(spark, table):
        return []
    rows = spark.read.format("delta").load(table).select("cluster", "date", "hour").distinct().collect()
    return [(r["cluster"], r["date"], int(r["hour"])) for r in rows]


def rebuild(spark, table: str, hours_per_step: int = 24) -> dict:
    """Build the rollups of the whole raw table (e.g. after generating or converting a lake)."""
    hours = sorted({(d, h) for _, d, h in all_hours(spark, table)})
    t0 = time.monotonic()
    for i in range(0, len(hours), hours_per_step):
        step = hours[i : i + hours_per_step]
        update_rollups(spark, table, hour_minutes(("", d, h) for d, h in step), hours=step)
    return {"hours": len(hours), "seconds": time.monotonic() - t0}
