"""Keep the 1-minute and 1-hour rollup tables (``lake.schema``: ROLLUP_SCHEMA) in step with the
raw samples, incrementally: after an ingest batch, only the hours it touched are recomputed.

For each touched hour the minute rollup is computed from the raw samples of that hour and the
one before it (a counter's first step in the hour needs the previous sample) and replaces that
hour's partition of ``<table>_1m``; then each touched day's hour rollup is recomputed from the
day's minute rows and replaces that day's partition of ``<table>_1h``.  Recomputing (not adding
to) a partition makes the update idempotent: a batch recovered after a crash, or late samples
for an old hour, give the same rollup as one clean run.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Iterable

from lake import delta
from lake.schema import ROLLUP_PARTITIONS, ROLLUPS, partition_values, table_path


def _previous_hour(date: str, hour: int) -> tuple[str, int]:
    t = _dt.datetime.fromisoformat(date).replace(hour=int(hour), tzinfo=_dt.timezone.utc) - _dt.timedelta(hours=1)
    return partition_values(t)


def update_rollups(spark, table: str, hours: Iterable[tuple[str, str, int]]) -> dict:
    """Recompute the rollups of the given ``(cluster, date, hour)`` partitions; returns timings."""
    from spark_queries.rollup import coarser_rollup, minute_rollup

    hours = sorted({(c, d, int(h)) for c, d, h in hours})
    if not hours or not delta.table_exists(spark, table):
        return {"hours": 0, "seconds": 0.0}
    t0 = time.monotonic()
    wanted = delta.hours_predicate(hours)
    with_prev = delta.hours_predicate(hours + [(c, *_previous_hour(d, h)) for c, d, h in hours])
    raw = spark.read.format("delta").load(table).filter(with_prev)
    minutes = minute_rollup(raw, ROLLUPS["1m"]).filter(wanted)
    path_1m = table_path(table, "1m")
    delta.replace_partitions(minutes.repartition(*ROLLUP_PARTITIONS["1m"]), path_1m, ROLLUP_PARTITIONS["1m"])
    days = sorted({(c, d) for c, d, _ in hours})
    day_minutes = spark.read.format("delta").load(path_1m).filter(delta.days_predicate(days))
    hourly = coarser_rollup(day_minutes, ROLLUPS["1h"])
    delta.replace_partitions(
        hourly.repartition(*ROLLUP_PARTITIONS["1h"]), table_path(table, "1h"), ROLLUP_PARTITIONS["1h"]
    )
    return {"hours": len(hours), "seconds": time.monotonic() - t0}


def all_hours(spark, table: str) -> list[tuple[str, str, int]]:
    """Every (cluster, date, hour) the raw table holds (to build rollups for a whole lake)."""
    if not delta.table_exists(spark, table):
        return []
    rows = spark.read.format("delta").load(table).select("cluster", "date", "hour").distinct().collect()
    return [(r["cluster"], r["date"], int(r["hour"])) for r in rows]


def rebuild(spark, table: str, hours_per_step: int = 24) -> dict:
    """Build the rollups of the whole raw table (e.g. after generating or converting a lake)."""
    hours = sorted(all_hours(spark, table), key=lambda t: (t[1], t[2], t[0]))
    t0 = time.monotonic()
    for i in range(0, len(hours), hours_per_step):
        update_rollups(spark, table, hours[i : i + hours_per_step])
    return {"hours": len(hours), "seconds": time.monotonic() - t0}
