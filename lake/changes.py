"""The lake's change events: what the collector's metadata snapshots found different, kept as a
Delta table beside the samples (``<samples>_changes``), written by Spark like the metrics.

The path of an event: the collector's :class:`ChangeSampler` (lake/change_sampler.py) diffs each
snapshot against the last one and lands the events as a JSON-lines file in
``<lake dir>/landing-changes/`` (atomically, as the samples are landed); :func:`ingest_changes`
appends every landed file to the table in one Delta commit and moves the files to
``done-changes/``. The commit is idempotent (Delta's ``txnAppId`` / ``txnVersion``, the version
written to ``changes.txn`` before the commit): a run that died between the commit and the move
writes the same version again, which Delta skips, so an event is never lost nor stored twice.

:func:`read_changes` reads the table in the asking process (delta-rs, no Spark), newest first.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lake.landing import landing_name, write_landing_file
from lake.layout import LakeLayout, write_atomic
from live.change_events import RecordedChange

COLUMNS = ("ts", "cluster", "kind", "resource", "change", "before", "after", "count", "date")


def changes_table_of(samples_table: str) -> str:
    """The change table beside a lake's samples table."""
    return f"{samples_table.rstrip('/')}_changes"


def changes_table(layout: LakeLayout) -> str:
    return changes_table_of(layout.table)


def landing_dir(layout: LakeLayout) -> Path:
    return layout.state_dir / "landing-changes"


def done_dir(layout: LakeLayout) -> Path:
    return layout.state_dir / "done-changes"


def _txn_file(layout: LakeLayout) -> Path:
    return layout.state_dir / "changes.txn"


def land_events(layout: LakeLayout, cluster: str, rows: Iterable[dict[str, Any]]) -> Path | None:
    """One landing file of ``rows`` (ChangeEvent.to_row()), or None when there are none."""
    out = [{**r, "cluster": cluster} for r in rows]
    if not out:
        return None
    d = landing_dir(layout)
    d.mkdir(parents=True, exist_ok=True)
    return write_landing_file(d, out, landing_name(time.time_ns() // 1000))


def _schema():  # type: ignore[no-untyped-def]
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("at_ms", LongType()),
            StructField("cluster", StringType()),
            StructField("kind", StringType()),
            StructField("resource", StringType()),
            StructField("change", StringType()),
            StructField("before", StringType()),
            StructField("after", StringType()),
            StructField("count", LongType()),
        ]
    )


def ingest_changes(spark: Any, layout: LakeLayout) -> int:
    """Append every landed change file to the table; returns the events written (0: none landed)."""
    from pyspark.sql import functions as F

    from lake import delta

    files = sorted(landing_dir(layout).glob("*.jsonl"))
    pending = _pending(layout)
    if pending is not None:  # a run died after claiming these: same version, Delta skips a duplicate
        version, names = pending
        files = [landing_dir(layout) / n for n in names if (landing_dir(layout) / n).exists()]
    elif not files:
        return 0
    else:
        version = _last_version(layout) + 1
        layout.state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(_txn_file(layout), json.dumps({"version": version, "files": [f.name for f in files]}))
    if not files:
        _txn_file(layout).unlink(missing_ok=True)
        return 0
    df = spark.read.schema(_schema()).option("mode", "FAILFAST").json([f.resolve().as_uri() for f in files])
    out = (
        df.withColumn("ts", F.timestamp_millis(F.col("at_ms")))
        .withColumn("date", F.date_format(F.col("ts"), "yyyy-MM-dd"))
        .drop("at_ms")
        .select(*COLUMNS)
    )
    rows = out.count()
    key = "spark.sql.parquet.outputTimestampType"  # micros, as the samples: what delta-rs reads back
    old = spark.conf.get(key)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        delta.append(
            out, changes_table(layout), ["cluster", "date"], app_id=f"{layout.app_id()}-changes", version=version
        )
    finally:
        spark.conf.set(key, old)
    done = done_dir(layout)
    done.mkdir(parents=True, exist_ok=True)
    for f in files:
        f.replace(done / f.name)
    write_atomic(_txn_file(layout), json.dumps({"version": version, "files": [], "committed": True}))
    return int(rows)


def _read_txn(layout: LakeLayout) -> dict[str, Any]:
    try:
        data = json.loads(_txn_file(layout).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _pending(layout: LakeLayout) -> tuple[int, list[str]] | None:
    data = _read_txn(layout)
    if data.get("files") and not data.get("committed"):
        return int(data["version"]), [str(n) for n in data["files"]]
    return None


def _last_version(layout: LakeLayout) -> int:
    return int(_read_txn(layout).get("version", 0))


# read back as the event's fields with its time and cluster (shared with the bot's actions)
Change = RecordedChange


def read_changes(
    table: str, since_ms: int, cluster: str | None = None, kinds: Iterable[str] | None = None, name: str | None = None
) -> list[Change]:
    """The events at or after ``since_ms`` (of ``cluster``, of ``kinds``, whose resource or change
    names ``name``), newest first. An absent table is no events (nothing has changed yet, or the
    collector has not written any)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from lake.embedded import delta_location

    try:
        dt = DeltaTable(delta_location(table))
    except TableNotFoundError:
        return []
    since_date = time.strftime("%Y-%m-%d", time.gmtime(since_ms / 1000))
    filters: list[tuple[str, str, Any]] = [("date", ">=", since_date)]
    if cluster:
        filters.append(("cluster", "=", cluster))
    t = dt.to_pyarrow_table(filters=filters)
    wanted = set(kinds or ())
    out = []
    for r in t.to_pylist():
        when = r["ts"] if r["ts"].tzinfo else r["ts"].replace(tzinfo=_dt.timezone.utc)
        ts = int(when.timestamp() * 1000)
        if ts < since_ms or (wanted and r["kind"] not in wanted):
            continue
        if name and name not in r["resource"] and name not in r["change"]:
            continue
        out.append(
            Change(
                ts, r["cluster"], r["kind"], r["resource"], r["change"], r["before"], r["after"], int(r["count"] or 1)
            )
        )
    return sorted(out, key=lambda c: (-c.ts_ms, c.kind, c.resource))
