"""Lake maintenance on a schedule: compact closed hours, expire old data, vacuum.

* **OPTIMIZE ... ZORDER BY (topic, partition)** of every *closed* hour (its end more than
  ``grace_s`` ago) that has more than one file: the ingest commits one small file per hour
  and batch; a closed hour is rewritten once into few files clustered by topic/partition, so
  a per-partition question skips most of them.  Delta's OPTIMIZE commits like any write:
  readers keep their snapshot while it runs.
* **Retention** (``KBOT_LAKE_RETENTION``, default ``raw=7d,rollups=90d``): rows of days older
  than the retention are deleted, whole days at a time (a partition-aligned delete only
  rewrites the log), raw samples and rollups each with their own limit.
* **VACUUM**: files no snapshot within Delta's deleted-file retention (7 days by default)
  references are removed from storage, so a reader that started before a compaction or a
  delete still finds its files.

``kbot lake maintain`` runs it once; ``kbot lake collect --ingest-every S`` runs it every
``--maintain-every`` seconds (default hourly).
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbot_settings import KbotSettings
from lake import delta
from lake.errors import BadRetention
from lake.schema import PARTITION_COLUMNS, RAW, ROLLUP_PARTITIONS, ROLLUPS, partition_values, table_path

RETENTION_ENV = "KBOT_LAKE_RETENTION"
DEFAULT_RETENTION = {"raw": _dt.timedelta(days=7), "rollups": _dt.timedelta(days=90)}
_DURATION = re.compile(r"^(\d+)\s*(h|d|w)$")
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Z-order columns: the per-partition questions (hot partitions, history --topic/--partition).
ZORDER = ("topic", "partition")


def parse_retention(text: str | None) -> dict[str, _dt.timedelta]:
    """``"raw=7d,rollups=90d"`` (either part optional; h, d or w) -> {"raw": ..., "rollups": ...}."""
    out = dict(DEFAULT_RETENTION)
    for item in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        m = _DURATION.match(value.strip().lower())
        if not sep or key not in out or not m:
            raise BadRetention(f"{RETENTION_ENV}: expected e.g. raw=7d,rollups=90d (h, d or w), not {item[:40]!r}")
        out[key] = _dt.timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2)])
        if out[key] < _dt.timedelta(days=1):
            raise BadRetention(f"{RETENTION_ENV}: {key} must keep at least 1 day (retention deletes whole days)")
    return out


def retention_from_settings(settings: KbotSettings) -> dict[str, _dt.timedelta]:
    """``KBOT_LAKE_RETENTION`` from the settings: a plain string there, parsed here into durations."""

    return parse_retention(settings.kbot_lake_retention)


@dataclass
class MaintenanceReport:
    optimized: dict[str, int] = field(default_factory=dict)  # table -> partitions compacted
    files_before: dict[str, int] = field(default_factory=dict)  # table -> files in those partitions
    files_after: dict[str, int] = field(default_factory=dict)
    expired_before: dict[str, str] = field(default_factory=dict)  # table -> first date kept
    vacuumed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [
            f"{name}: {n} partition(s) compacted ({self.files_before.get(name, 0)} -> "
            f"{self.files_after.get(name, 0)} files)"
            for name, n in self.optimized.items()
            if n
        ]
        if not parts:
            parts.append("nothing to compact")
        if self.expired_before:
            parts.append("kept from " + ", ".join(f"{k} {v}" for k, v in self.expired_before.items()))
        if self.vacuumed:
            parts.append("vacuumed " + ", ".join(self.vacuumed))
        return "; ".join(parts) + f" in {self.seconds:.1f}s"


def _utc_now(now: _dt.datetime | float | None) -> _dt.datetime:
    if now is None:
        return _dt.datetime.now(_dt.timezone.utc)
    if isinstance(now, (int, float)):
        return _dt.datetime.fromtimestamp(now, _dt.timezone.utc)
    return now.astimezone(_dt.timezone.utc)


def _files_per_partition(spark, path: str, parts: list[str], since: _dt.datetime, until: _dt.datetime) -> dict:
    """{partition values: data files} of the snapshot, for partitions in [since, until)."""
    from pyspark.sql import functions as F

    d0, _ = partition_values(since)
    d1, _ = partition_values(until)
    df = spark.read.format("delta").load(path).filter(F.col("date").between(F.lit(d0), F.lit(d1)))
    rows = (
        df.select(*parts, F.col("_metadata.file_path").alias("f"))
        .groupBy(*parts)
        .agg(F.countDistinct("f").alias("files"))
        .collect()
    )
    return {tuple(r[c] for c in parts): int(r["files"]) for r in rows}


def _closed(values: tuple, parts: list[str], now: _dt.datetime, grace_s: float) -> bool:
    date = values[parts.index("date")]
    hour = values[parts.index("hour")] if "hour" in parts else 23
    end = _dt.datetime.fromisoformat(date).replace(hour=int(hour), tzinfo=_dt.timezone.utc) + _dt.timedelta(hours=1)
    return (now - end).total_seconds() >= grace_s


def optimize_closed(
    spark, path: str, parts: list[str], now: _dt.datetime, *, lookback: _dt.timedelta, grace_s: float = 300.0
) -> tuple[int, int, int]:
    """OPTIMIZE ZORDER BY (topic, partition) every closed partition of the last ``lookback`` with
    more than one file.  Returns (partitions, files before, files after)."""
    from delta.tables import DeltaTable

    if not delta.table_exists(spark, path):
        return 0, 0, 0
    counts = _files_per_partition(spark, path, parts, now - lookback, now)
    todo = sorted(v for v, n in counts.items() if n > 1 and _closed(v, parts, now, grace_s))
    if not todo:
        return 0, 0, 0
    table = None if delta.is_connect(spark) else DeltaTable.forPath(spark, path)
    # OPTIMIZE's partition filter is SQL text: built only from the date and hour of the
    # snapshot's own partitions, checked here, never from user input; one statement per
    # (date, hour) covers every cluster of that hour
    slots = sorted({(v[parts.index("date")], v[parts.index("hour")] if "hour" in parts else None) for v in todo})
    for date, hour in slots:
        if not _DATE.match(str(date)) or (hour is not None and not 0 <= int(hour) <= 23):
            continue
        where = f"date = '{date}'" + (f" AND hour = {int(hour)}" if hour is not None else "")
        if table is None:  # Spark Connect: Delta's SQL, same statement
            spark.sql(f"OPTIMIZE {delta.table_ref(path)} WHERE {where} ZORDER BY ({', '.join(ZORDER)})").collect()
        else:
            table.optimize().where(where).executeZOrderBy(*ZORDER)
    after = _files_per_partition(spark, path, parts, now - lookback, now)
    return len(todo), sum(counts[v] for v in todo), sum(after.get(v, 0) for v in todo)


def expire(spark, path: str, keep: _dt.timedelta, now: _dt.datetime) -> str | None:
    """Delete the rows of whole days older than ``keep``; returns the first date kept."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not delta.table_exists(spark, path):
        return None
    first_kept, _ = partition_values(now - keep)
    old = F.col("date") < F.lit(first_kept)
    # only the partition column is read (no data file is opened): most runs find nothing to
    # delete and then make no commit at all
    if spark.read.format("delta").load(path).filter(old).select("date").limit(1).count():
        if delta.is_connect(spark):
            # Delta's DELETE takes no SQL parameters; the date is ours (partition_values), checked
            if not _DATE.match(first_kept):
                raise ValueError(f"unexpected partition date {first_kept!r}")
            spark.sql(f"DELETE FROM {delta.table_ref(path)} WHERE date < '{first_kept}'").collect()
        else:
            DeltaTable.forPath(spark, path).delete(old)
    return first_kept


#: VACUUM lists the table with this many Spark tasks.  Spark's default (10,000, meant for
#: clusters listing millions of files) made one VACUUM of a small table take 40 s on 2 cores
#: instead of 3 s.
VACUUM_LISTING_PARALLELISM = "8"


def _vacuum(spark, path: str, hours: float | None) -> None:
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    old = spark.conf.get(key, None)
    spark.conf.set(key, VACUUM_LISTING_PARALLELISM)
    try:
        if delta.is_connect(spark):
            retain = "" if hours is None else f" RETAIN {float(hours)!r} HOURS"
            spark.sql(f"VACUUM {delta.table_ref(path)}{retain}").collect()
            return
        from delta.tables import DeltaTable

        table = DeltaTable.forPath(spark, path)
        if hours is None:
            table.vacuum()  # Delta's deleted-file retention (7 days): readers' snapshots stay whole
        else:
            table.vacuum(float(hours))
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def maintain(
    spark,
    table: str,
    *,
    now: _dt.datetime | float | None = None,
    retention: Mapping[str, _dt.timedelta] | None = None,
    lookback: _dt.timedelta = _dt.timedelta(days=2),
    grace_s: float = 300.0,
    vacuum: bool = True,
    vacuum_hours: float | None = None,
) -> MaintenanceReport:
    """Compact closed hours, apply the retention, vacuum: the raw table and both rollups."""
    t0 = time.monotonic()
    now_ = _utc_now(now)
    keep = dict(retention or DEFAULT_RETENTION)
    rep = MaintenanceReport()
    tables = {RAW: (table, PARTITION_COLUMNS)}
    tables.update({res: (table_path(table, res), ROLLUP_PARTITIONS[res]) for res in ROLLUPS})
    for name, (path, parts) in tables.items():
        n, before, after = optimize_closed(spark, path, parts, now_, lookback=lookback, grace_s=grace_s)
        rep.optimized[name], rep.files_before[name], rep.files_after[name] = n, before, after
        first = expire(spark, path, keep["raw" if name == RAW else "rollups"], now_)
        if first is not None:
            rep.expired_before[name] = first
        if vacuum and delta.table_exists(spark, path):
            _vacuum(spark, path, vacuum_hours)
            rep.vacuumed.append(name)
    rep.seconds = time.monotonic() - t0
    return rep
