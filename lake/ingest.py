"""Ingest: landing files (JSON lines from ``lake.collector``) -> the Delta Lake table, exactly once.

Layout
------
A local *state directory* (``KBOT_LAKE_DIR``, default ``~/.kbot/lake``) holds the
files in flight; the Delta table (``KBOT_LAKE_URI``, default ``<state dir>/samples``)
may be local or any Hadoop-compatible URI (``s3a://``, ``abfss://``, ``hdfs://``)::

    <state dir>/landing/<name>.jsonl            written by the collector (atomically)
    <state dir>/processing/<batch id>/txn.json  the batch's Delta transaction version
    <state dir>/processing/<batch id>/*.jsonl   claimed by one ingest batch
    <state dir>/processing/<batch id>/stage/    their rows as the check parsed them (Parquet)
    <state dir>/done/<name>.jsonl               ingested (pruned after ``keep_done_s``)
    <state dir>/quarantine/<name>.jsonl         malformed, next to <name>.jsonl.reason.txt
    <state dir>/ingest.id                       this state dir's Delta ``txnAppId``
    <table>/_delta_log/, cluster=/date=/hour=/  the samples (Delta Lake)
    <table>_1m, <table>_1h                      the rollups (``lake.rollups``)

Exactly once: one Delta commit per batch, found again after a crash
-------------------------------------------------------------------
Delta's commit is the one atomic step: a batch's rows become visible in one commit or not at
all, and readers keep reading their snapshot meanwhile (``OPTIMIZE`` and ``VACUUM`` do not
disturb them either).  Each commit names its batch in ``userMetadata``.  A batch claimed by
this run is appended as it is: nothing can have committed it yet.  A batch recovered from
``processing/`` (an earlier run claimed it and may have committed it) is first looked for in
the table's commits (:func:`batch_committed`: newest first, back to a day before its claim)
and skipped when found; otherwise it is appended with ``txnAppId`` (this state directory's id)
and ``txnVersion`` (the batch's version, fixed when it was claimed, increasing), so Delta
itself skips the write if a version that high is already committed.  So a batch retried after
a crash can never be counted twice, whatever the crash point.  A batch left in ``processing/``
longer than the Delta log keeps its commits (``delta.logRetentionDuration``, 30 days) cannot be
told apart and stops the run with what to check, rather than be written twice.  (Every commit used to carry
the txn; Delta 4.2 checks it by rebuilding the table's whole state, about 0.65 s of a core per
commit, so only the retries that need it pay it now.)

One batch, step by step
-----------------------
1. **claim**: create ``processing/<batch id>/``, write ``txn.json`` (the version: greater
   than every version this state dir handed out before), rename landing files into it.
2. **check**: files already in ``done/`` are re-deliveries (skipped); every other file is
   checked (each line a JSON object, field types, ranges: ``lake.landing_check``, pyarrow a
   block at a time, the exact reason from a line-by-line check); a bad one goes to
   ``quarantine/`` with a reason file.  The rows pyarrow parsed for the check are staged as
   Parquet in ``processing/<batch id>/stage/`` (anew on every attempt), so Spark does not parse
   the JSON a second time; a file only the line-by-line check accepted is read as JSON.
3. **commit**: Spark appends the good files' rows to the table, partitioned by
   cluster/date/hour, as one idempotent Delta write (``userMetadata`` names the batch, its
   files and rows: ``kbot lake status`` reads it).
4. **roll up**: the minutes the batch touched are recomputed in the 1-minute rollup; their
   hours' rows in the 1-hour rollup are written once those hours have closed (``lake.rollups``).
5. **finish**: move the batch's files to ``done/`` and remove its ``processing/`` directory
   (the staged Parquet with it).

A crash anywhere leaves the files in ``landing/`` or ``processing/<id>/`` (never lost); the
next run recovers every batch in ``processing/`` first, oldest first, with the same version:
before the commit the rows are written then; after it Delta skips the write, and the rollups
(recomputed, not added to) come out the same.

Freshness: ingest as files land
-------------------------------
A sample is queryable once its batch is committed (step 3).  Ingesting on a long timer made
a sample wait for the timer (``kbot run`` ingested every 60 s: about a minute from scrape to
lake).  :class:`ContinuousIngest` runs batches in a worker thread as soon as a landing file
appears (the collector calls :meth:`ContinuousIngest.notify` after each round; the landing
directory is also polled every second), so collection never waits for Spark and a sample
waits for at most the batch in progress plus its own.  With ``rollup_every_s`` the rollups
(step 4) run at most that often, for every minute touched since, in a
thread of their own beside the commits: the touched minutes are kept in
``<state dir>/rollups.pending`` before a batch finishes, so a crash cannot lose a pending
recomputation.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lake.changes import ingest_changes
from lake.errors import LakeError
from lake.landing import fsync_dir
from lake.landing_check import scan_fast
from lake.layout import LakeLayout, is_uri, write_atomic
from lake.schema import COLUMNS, PARTITION_COLUMNS, partition_values

log = logging.getLogger(__name__)

TXN_FILE = "txn.json"
STAGE_DIR = "stage"  # processing/<batch id>/stage/<name>.parquet: a good file's rows, parsed once
DEFAULT_MAX_FILES = 500
DEFAULT_KEEP_DONE_S = 2 * 86_400


class IngestBusy(LakeError):
    """Another ingest holds the lock of this state directory."""


def landing_schema():
    """What a landing line holds (``ts`` in epoch microseconds)."""
    from pyspark.sql.types import DoubleType, IntegerType, LongType, MapType, StringType, StructField, StructType

    return StructType(
        [
            StructField("ts", LongType()),
            StructField("cluster", StringType()),
            StructField("broker", IntegerType()),
            StructField("metric", StringType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("labels", MapType(StringType(), StringType(), True)),
            StructField("value", DoubleType()),
        ]
    )


# --------------------------------------------------------------------------- validation


def scan_landing_file(path: Path, stage: Path | None = None) -> tuple[int, str | None, set[tuple[str, int]]]:
    """(rows, None, minutes) for a good file, (0, reason, set()) for a malformed one.

    ``minutes`` are the ``(cluster, minute start in epoch seconds)`` the file's rows fall in:
    the rollups of exactly those minutes are recomputed after the batch.  Checked with pyarrow
    a block at a time; any doubt goes to the line-by-line check (``lake.landing_check``).
    ``stage``: where to write the rows pyarrow parsed, as Parquet, for the commit to read
    instead of the JSON (written only when the fast path accepted the file; see
    ``lake.landing_check.scan_fast``).
    """
    return scan_fast(path, stage=stage)


def _minute_key(epoch_s: int) -> str:
    return _dt.datetime.fromtimestamp(int(epoch_s), _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M")


def _hour_key(date: str, hour: int) -> str:
    return f"{date}T{int(hour):02d}"


def _hour_of_key(key: str) -> tuple[str, int] | None:
    try:
        t = _dt.datetime.strptime(key, "%Y-%m-%dT%H")
    except ValueError:
        return None
    return t.strftime("%Y-%m-%d"), t.hour


def _minute_epoch(key: str) -> int | None:
    try:
        t = _dt.datetime.strptime(key, "%Y-%m-%dT%H:%M").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return int(t.timestamp())


def minute_hours(minutes) -> list[tuple[str, str, int]]:
    """``(cluster, minute)`` pairs -> the sorted ``(cluster, date, hour)`` partitions they fall in."""

    return sorted(
        {(c, *partition_values(_dt.datetime.fromtimestamp(m // 3600 * 3600, _dt.timezone.utc))) for c, m in minutes}
    )


def validate_landing_file(path: Path) -> tuple[int, str | None]:
    """(rows, None) for a good file, (0, reason) for a malformed one.  Streams the file."""
    rows, reason, _ = scan_landing_file(path)
    return rows, reason


# --------------------------------------------------------------------------- reports


@dataclass
class BatchReport:
    batch_id: str
    version: int = 0  # the Delta txnVersion
    files: int = 0
    rows: int = 0
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    recovered: bool = False  # left in processing/ by an earlier run
    already_committed: bool = False  # Delta had this version already: the write was skipped
    hours: list[tuple[str, str, int]] = field(default_factory=list)  # (cluster, date, hour) partitions
    minutes: list[int] = field(default_factory=list)  # minute starts (epoch s) whose rollups are due
    seconds: float = 0.0
    rollup_seconds: float = 0.0


@dataclass
class IngestReport:
    batches: list[BatchReport] = field(default_factory=list)
    pruned: int = 0
    seconds: float = 0.0
    rollup_seconds: float = 0.0  # deferred rollups run at the end of this run
    change_events: int = 0  # "what changed?" events appended to their table (lake/changes.py)

    @property
    def files(self) -> int:
        return sum(b.files for b in self.batches)

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches if not b.already_committed)

    @property
    def quarantined(self) -> list[tuple[str, str]]:
        return [q for b in self.batches for q in b.quarantined]

    def summary(self) -> str:
        rec = sum(b.recovered for b in self.batches)
        text = f"{len(self.batches)} batch(es), {self.files:,} file(s), {self.rows:,} rows in {self.seconds:.1f}s"
        if rec:
            text += f"; {rec} recovered from an interrupted run"
        skipped = sum(b.already_committed for b in self.batches)
        if skipped:
            text += f" ({skipped} already committed: Delta skipped the repeated write)"
        if self.quarantined:
            text += f"; {len(self.quarantined)} quarantined: " + "; ".join(f"{n}: {r}" for n, r in self.quarantined)
        dups = sum(len(b.duplicates) for b in self.batches)
        if dups:
            text += f"; {dups} already ingested (skipped)"
        return text


# --------------------------------------------------------------------------- the job


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IngestBusy(f"another ingest is running on {path.parent}") from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _landing_files(layout: LakeLayout) -> list[Path]:
    if not layout.landing.is_dir():
        return []
    return sorted(
        p for p in layout.landing.iterdir() if p.is_file() and p.name.endswith(".jsonl") and not p.name.startswith(".")
    )


def new_batch_id(names: list[str], now: float | None = None) -> str:
    t = _dt.datetime.fromtimestamp(time.time() if now is None else now, _dt.timezone.utc)
    digest = hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()[:8]
    return f"b{t:%Y%m%dT%H%M%S%f}-{digest}"


#: How far before a batch's claim :func:`batch_committed` looks for its commit (commit times are
#: wall-clock times: room for a clock set back).
_COMMIT_LOOKBACK_S = 86_400


def _claimed_at(batch_id: str) -> float:
    """The claim time (epoch seconds) a batch id starts with (:func:`new_batch_id`); 0 when it
    has none."""
    try:
        t = _dt.datetime.strptime(batch_id[1:23], "%Y%m%dT%H%M%S%f").replace(tzinfo=_dt.timezone.utc)
    except ValueError:
        return 0.0
    return t.timestamp()


def batch_committed(spark, table: str, batch_id: str) -> bool:
    """Does a commit of ``table`` name ``batch_id`` (its ``userMetadata``)?  Reads the commits
    newest first, back to :data:`_COMMIT_LOOKBACK_S` before the batch was claimed: a local table
    from its JSON commit files (no Spark job), any other through Delta's history."""
    from lake import delta

    if not delta.table_exists(spark, table):
        return False
    since_ms = max(0.0, _claimed_at(batch_id) - _COMMIT_LOOKBACK_S) * 1000
    log_dir = os.path.join(table, "_delta_log")
    if not is_uri(table) and os.path.isdir(log_dir):
        versions = sorted(
            (int(n[:-5]) for n in os.listdir(log_dir) if n.endswith(".json") and n[:-5].isdigit()), reverse=True
        )
        for v in versions:
            info = _commit_info(os.path.join(log_dir, f"{v:020d}.json"))
            if info is None:
                continue
            if _meta_batch(info.get("userMetadata")) == batch_id:
                return True
            if (info.get("timestamp") or 0) < since_ms:
                return False
        if versions and versions[-1] > 0:
            raise _log_too_short(table, batch_id)
        return False
    if delta.is_connect(spark):
        history = spark.sql(f"DESCRIBE HISTORY {delta.table_ref(table)}")
    else:
        from delta.tables import DeltaTable

        history = DeltaTable.forPath(spark, table).history()
    from pyspark.sql import functions as F

    since = F.timestamp_millis(F.lit(int(since_ms)))
    rows = history.filter(F.col("timestamp") >= since).select("userMetadata").collect()
    if any(_meta_batch(r["userMetadata"]) == batch_id for r in rows):
        return True
    older = history.filter((F.col("timestamp") < since) | (F.col("version") == 0)).limit(1).collect()
    if not older:
        raise _log_too_short(table, batch_id)
    return False


def _log_too_short(table: str, batch_id: str) -> LakeError:
    """The log no longer reaches back to the batch's claim (Delta removes commit files older than
    its log retention, 30 days by default): whether the batch was committed cannot be told, and
    writing it again could count it twice."""
    return LakeError(
        f"cannot tell whether batch {batch_id} was committed: the Delta log of {table} no longer "
        "reaches back to when it was claimed; check the table for its rows (userMetadata names the "
        "batch), then move its files from processing/ to done/ or back to landing/"
    )


def _commit_info(path: str) -> dict | None:
    """The ``commitInfo`` of one JSON commit file; None when it cannot be read or has none."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                info = json.loads(line).get("commitInfo")
                if isinstance(info, dict):
                    return info
    except (OSError, ValueError, AttributeError):
        return None
    return None


def _meta_batch(text: object) -> str | None:
    """The ``batch`` our ``userMetadata`` names; None for another writer's commit."""
    if not isinstance(text, str) or not text:
        return None
    try:
        meta = json.loads(text)
    except ValueError:
        return None
    batch = meta.get("batch") if isinstance(meta, dict) else None
    return batch if isinstance(batch, str) else None


def _stage_of(landing_file: Path) -> Path:
    """Where a claimed landing file's parsed rows are staged (``processing/<id>/stage/``)."""
    return landing_file.parent / STAGE_DIR / f"{landing_file.name}.parquet"


def _read_txn(batch_dir: Path) -> int | None:
    try:
        v = json.loads((batch_dir / TXN_FILE).read_text())["version"]
        return int(v)
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Ingestor:
    """Runs ingest batches for one layout on one SparkSession.

    ``crash_hook(point)`` is called at each step boundary (``claimed``, ``validated``,
    ``committed``, ``rolled_up``, ``finished_file``); tests raise from it to stop a run there.
    """

    def __init__(
        self,
        spark,
        layout: LakeLayout,
        *,
        max_files: int = DEFAULT_MAX_FILES,
        keep_done_s: float | None = DEFAULT_KEEP_DONE_S,
        rollups: bool = True,
        rollup_every_s: float = 0.0,
        crash_hook: Callable[[str], None] | None = None,
    ):
        """``rollup_every_s``: 0 recomputes the rollups after every batch; more defers them
        (touched minutes kept in ``rollups.pending``) to at most once per that many seconds."""
        if max_files < 1:
            raise ValueError("max_files must be >= 1")
        if rollup_every_s < 0:
            raise ValueError("rollup_every_s must be >= 0")
        self.spark = spark
        self.layout = layout
        self.max_files = max_files
        self.keep_done_s = keep_done_s
        self.rollups = rollups
        self.rollup_every_s = float(rollup_every_s)
        self._last_rollup = time.monotonic()
        self._pending_lock = threading.Lock()
        self._hook = crash_hook or (lambda point: None)

    # ---- entry point
    def run(self, max_batches: int | None = None, *, rollups: bool = True) -> IngestReport:
        """Recover interrupted batches, then ingest landing files in batches.  ``rollups=False``
        leaves deferred rollups to :meth:`flush_rollups` / another thread (ContinuousIngest)."""
        t0 = time.monotonic()
        self.layout.make_dirs()
        report = IngestReport()
        with _locked(self.layout.lock):
            app_id = self.layout.app_id()
            for batch_dir in sorted(p for p in self.layout.processing.iterdir() if p.is_dir()):
                report.batches.append(self._process(batch_dir, app_id, recovered=True))
            while max_batches is None or len(report.batches) < max_batches:
                files = _landing_files(self.layout)[: self.max_files]
                if not files:
                    break
                batch_dir = self._claim(files)
                report.batches.append(self._process(batch_dir, app_id, recovered=False))
            self._ingest_changes(report)
            if self.rollups and rollups:
                # deferred minutes when due; without deferral, any an earlier deferring run left
                report.rollup_seconds = self._pending_rollups(force=self.rollup_every_s == 0)
            report.pruned = self._prune_done()
        report.seconds = time.monotonic() - t0
        return report

    def _ingest_changes(self, report: IngestReport) -> None:
        """The collector's change events (lake/changes.py) in the same pass: their own table and
        commit, so a failure there is logged and never holds the samples back."""
        try:
            report.change_events += ingest_changes(self.spark, self.layout)
        except Exception as exc:  # noqa: BLE001 - the samples' ingest goes on; the files stay landed
            log.warning("ingest of change events failed (they stay landed for the next run): %s", exc)

    # ---- steps
    def _next_version(self) -> int:
        """Greater than every version handed out before (and, normally, the claim time in µs)."""
        last = 0
        with contextlib.suppress(OSError, ValueError):
            last = int(self.layout.last_txn_file.read_text().strip() or 0)
        for d in self.layout.processing.iterdir():
            v = _read_txn(d) if d.is_dir() else None
            last = max(last, v or 0)
        version = max(time.time_ns() // 1000, last + 1)
        write_atomic(self.layout.last_txn_file, f"{version}\n")
        return version

    def _claim(self, files: list[Path]) -> Path:
        batch_dir = self.layout.processing / new_batch_id([f.name for f in files])
        batch_dir.mkdir(parents=True)
        write_atomic(batch_dir / TXN_FILE, json.dumps({"version": self._next_version()}) + "\n")
        for f in files:
            os.replace(f, batch_dir / f.name)
        fsync_dir(batch_dir)
        fsync_dir(self.layout.landing)
        self._hook("claimed")
        return batch_dir

    def _process(self, batch_dir: Path, app_id: str, recovered: bool) -> BatchReport:
        t0 = time.monotonic()
        batch_id = batch_dir.name
        version = _read_txn(batch_dir)
        if version is None:  # a crash between mkdir and txn.json: nothing was written with it
            version = self._next_version()
            write_atomic(batch_dir / TXN_FILE, json.dumps({"version": version}) + "\n")
        rep = BatchReport(batch_id, version=version, recovered=recovered)
        files = sorted(p for p in batch_dir.iterdir() if p.is_file() and p.name.endswith(".jsonl"))
        good: list[Path] = []
        minutes: set[tuple[str, int]] = set()
        stage_dir = batch_dir / STAGE_DIR
        stage_dir.mkdir(exist_ok=True)
        for f in files:
            if (self.layout.done / f.name).exists():
                rep.duplicates.append(f.name)
                f.unlink()  # the copy in done/ stays the record of it
                continue
            # staged anew on every attempt (a recovered batch's too): scan_fast writes it whole
            # or removes it, so a stage file is always this landing file's rows
            rows, reason, file_minutes = scan_landing_file(f, stage=_stage_of(f))
            if reason is not None:
                self._quarantine(f, reason)
                rep.quarantined.append((f.name, reason))
                continue
            good.append(f)
            rep.rows += rows
            minutes |= file_minutes
        rep.hours = minute_hours(minutes)
        rep.minutes = sorted({m for _, m in minutes})
        self._hook("validated")
        if good and rep.rows:
            rep.already_committed = not self._commit(good, app_id, rep)
        self._hook("committed")
        if self.rollups and rep.minutes:
            self._add_pending_minutes(rep.minutes)  # before the files leave: a crash keeps them due
            if self.rollup_every_s == 0:
                rep.rollup_seconds = self._pending_rollups(force=True)
        self._hook("rolled_up")
        rep.files = len(good)
        self._finish(batch_dir, good)
        rep.seconds = time.monotonic() - t0
        return rep

    def _commit(self, files: list[Path], app_id: str, rep: BatchReport) -> bool:
        """The batch's one Delta append; True when it wrote, False when the batch was committed
        already (found in the log, or skipped by Delta)."""
        from pyspark.sql import functions as F

        from lake import delta
        from spark_queries.schema import with_partition_columns

        spark = self.spark
        table = self.layout.table
        # the rows the check parsed (Parquet, staged), else Spark parses the JSON
        staged = [_stage_of(f) for f in files if _stage_of(f).is_file()]
        unstaged = [f for f in files if not _stage_of(f).is_file()]
        parts = []
        if staged:
            parts.append(spark.read.schema(landing_schema()).parquet(*[p.resolve().as_uri() for p in staged]))
        if unstaged:
            parts.append(
                spark.read.schema(landing_schema())
                .option("mode", "FAILFAST")
                .json([f.resolve().as_uri() for f in unstaged])
            )
        df = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        out = with_partition_columns(df.withColumn("ts", F.timestamp_micros(F.col("ts"))))
        # one file per hour and batch; sorted so a metric's rows sit together (row-group
        # statistics on metric/topic then skip most of a file)
        out = (
            out.repartition(*PARTITION_COLUMNS)
            .sortWithinPartitions("metric", "topic", "partition", "broker", "ts")
            .select(*COLUMNS)
        )
        meta = {
            "kbot": "ingest",
            "batch": rep.batch_id,
            "version": rep.version,
            "rows": rep.rows,
            "files": [f.name for f in files],
            "quarantined": [n for n, _ in rep.quarantined],
        }
        txn: dict = {}
        if rep.recovered:
            # an earlier run claimed it and may have committed it: look for its commit, and
            # write it (if not) under its Delta txn, so Delta itself refuses a second one
            if batch_committed(spark, table, rep.batch_id):
                return False
            txn = {"app_id": app_id, "version": rep.version}
        # else claimed by this run just now: no commit can hold it yet, and its commit names
        # it (userMetadata), which is how a later recovery finds it.  No txnAppId here: Delta
        # 4.2 answers "which version did this app commit" by rebuilding the table's whole state
        # (a Spark job over the checkpoint and the log), which cost about 0.65 s of a core per
        # commit, a third of a 120,000-row batch
        before = delta.last_commit(spark, table)
        key = "spark.sql.parquet.outputTimestampType"
        old = spark.conf.get(key)
        spark.conf.set(key, "TIMESTAMP_MICROS")
        try:
            delta.append(out, table, PARTITION_COLUMNS, metadata=meta, **txn)
        finally:
            spark.conf.set(key, old)
        after = delta.last_commit(spark, table)
        return after is not None and (after[1] or {}).get("batch") == rep.batch_id and after != before

    def _finish(self, batch_dir: Path, files: list[Path]) -> None:
        for f in files:
            if f.exists():
                self._move(f, self.layout.done / f.name)
                self._hook("finished_file")
        # anything else still in the batch dir was committed too (e.g. a finish cut short)
        for f in list(batch_dir.iterdir()):
            if f.is_file() and f.name.endswith(".jsonl"):
                self._move(f, self.layout.done / f.name)
        shutil.rmtree(batch_dir / STAGE_DIR, ignore_errors=True)
        with contextlib.suppress(OSError):
            (batch_dir / TXN_FILE).unlink()
        with contextlib.suppress(OSError):
            batch_dir.rmdir()

    # ---- deferred rollups
    # rollups.pending maps a minute ("2024-05-01T10:07", UTC) whose minute rollup is due, or an
    # hour ("2024-05-01T10") whose hour row is due once the hour is closed, to a counter bumped
    # by every batch that touches it: a recomputation removes a key only if no batch touched it
    # while it ran (that batch's rows may be missing from the snapshot it read), so it can run
    # beside the commits.  A file an older version wrote holds "cluster|date|hour" keys: read
    # as those hours and their 60 minutes.
    def _read_pending(self) -> dict[str, int]:
        try:
            data = json.loads(self.layout.rollups_pending_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.layout.rollups_pending_file, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        out: dict[str, int] = {}

        def bump(key: str, n: int) -> None:
            out[key] = out.get(key, 0) + n

        for key, n in data.items():
            if not isinstance(n, int):
                continue
            if str(key).count("|") == 2:  # an hour, from an older version
                from lake.rollups import hour_minutes

                c, d, h = str(key).split("|")
                with contextlib.suppress(ValueError):
                    for m in hour_minutes([(c, d, int(h))]):
                        bump(_minute_key(m), n)
                    bump(_hour_key(d, int(h)), n)
            elif _minute_epoch(str(key)) is not None or _hour_of_key(str(key)) is not None:
                bump(str(key), n)
        return out

    def _write_pending(self, pending: dict[str, int]) -> None:
        write_atomic(self.layout.rollups_pending_file, json.dumps(pending, sort_keys=True) + "\n")

    def pending_minutes(self) -> list[str]:
        """Minutes (``2024-05-01T10:07``, UTC) whose minute rollup is due."""
        return sorted(k for k in self._read_pending() if _minute_epoch(k) is not None)

    def pending_hours(self) -> list[str]:
        """Hours (``2024-05-01T10``, UTC) whose hour row is due once they are closed."""
        return sorted(k for k in self._read_pending() if _hour_of_key(k) is not None)

    def _add_pending_minutes(self, minutes: list[int]) -> None:
        with self._pending_lock:
            pending = self._read_pending()
            for m in minutes:
                for key in (_minute_key(m), _minute_key(m)[:13]):  # the minute and its hour
                    pending[key] = pending.get(key, 0) + 1
            self._write_pending(pending)

    def rollups_due(self) -> bool:
        """Deferred rollups are due: the interval has passed and a minute is pending, or an
        hour that has closed since."""
        if not (self.rollups and self.rollup_every_s > 0):
            return False
        if time.monotonic() - self._last_rollup < self.rollup_every_s:
            return False
        from lake.rollups import hour_closed

        now = time.time()
        for key in self._read_pending():
            if _minute_epoch(key) is not None:
                return True
            hour = _hour_of_key(key)
            if hour is not None and hour_closed(*hour, now):
                return True
        return False

    def _pending_rollups(self, force: bool, final: bool = False) -> float:
        """Recompute the pending minutes' rollups and write the closed pending hours' rows when
        due (or ``force``); ``final`` writes the open hours' rows too (nothing more will land
        from here for now).  Returns the seconds spent.  Safe to call from another thread while
        batches commit (see ``_read_pending``)."""
        if not force and time.monotonic() - self._last_rollup < self.rollup_every_s:
            return 0.0
        with self._pending_lock:
            taken = self._read_pending()
        self._last_rollup = time.monotonic()
        if not taken:
            return 0.0
        from lake.rollups import update_rollups

        minutes = [m for m in map(_minute_epoch, taken) if m is not None]
        hours = [h for h in map(_hour_of_key, taken) if h is not None]
        done = update_rollups(self.spark, self.layout.table, minutes, hours=hours, now=None if final else time.time())
        still_open = {_hour_key(d, h) for d, h in done["open"]}
        # only now, and only keys no batch touched meanwhile: a crash during the recomputation,
        # or a batch committed during it, leaves them due; an hour not closed yet stays due
        with self._pending_lock:
            pending = self._read_pending()
            for key, n in taken.items():
                if pending.get(key) == n and key not in still_open:
                    del pending[key]
            for key in still_open:  # e.g. the next hour, whose first minutes a late sample changed
                pending.setdefault(key, 1)
            self._write_pending(pending)
        return float(done["seconds"])

    def flush_rollups(self, final: bool = True) -> float:
        """Recompute every pending minute's rollup now, and (``final``, at shutdown) write the
        hour rows of the hours not closed yet as well; returns the seconds spent."""
        if not self.rollups:
            return 0.0
        return self._pending_rollups(force=True, final=final)

    def _move(self, src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)

    def _quarantine(self, f: Path, reason: str) -> None:
        q = self.layout.quarantine
        q.mkdir(parents=True, exist_ok=True)
        (q / f"{f.name}.reason.txt").write_text(reason + "\n", encoding="utf-8")
        self._move(f, q / f.name)
        log.warning("quarantined %s: %s", f.name, reason)

    def _prune_done(self) -> int:
        if self.keep_done_s is None or not self.layout.done.is_dir():
            return 0
        cutoff = time.time() - self.keep_done_s
        n = 0
        for p in self.layout.done.iterdir():
            with contextlib.suppress(OSError):
                if p.stat().st_mtime < cutoff:
                    p.unlink()
                    n += 1
        return n


class ContinuousIngest:
    """Ingest whenever landing files appear, so a sample does not wait for a timer and
    collection never waits for Spark.

    ::

        follower = ContinuousIngest(Ingestor(spark, layout, rollup_every_s=60)).start()
        ...collector.run(on_round=lambda report: follower.notify())...
        follower.stop()      # ingests what is left and flushes the pending rollups

    Two worker threads on the one SparkSession: one commits batches (``notify()`` wakes it at
    once; the landing directory is also polled every ``poll_s``), the other recomputes the
    deferred rollups when due, so a rollup (most of a batch's time) never holds a commit back.
    A failed run (Spark down, a busy lock) is logged in one line and retried on the next wake:
    the files stay in ``landing/`` or ``processing/``, the minutes in ``rollups.pending``.
    """

    def __init__(
        self, ingestor: "Ingestor", *, poll_s: float = 1.0, on_report: Callable[[IngestReport], None] | None = None
    ):
        if poll_s <= 0:
            raise ValueError("poll_s must be positive")
        self.ingestor = ingestor
        self.poll_s = float(poll_s)
        self.on_report = on_report
        self.runs = 0
        self.rollup_runs = 0
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def notify(self) -> None:
        self._wake.set()

    def start(self) -> "ContinuousIngest":
        if not self._threads:
            self._threads = [threading.Thread(target=self._loop, name="kbot-ingest", daemon=True)]
            if self.ingestor.rollups and self.ingestor.rollup_every_s > 0:
                self._threads.append(threading.Thread(target=self._rollup_loop, name="kbot-rollups", daemon=True))
            for t in self._threads:
                t.start()
        return self

    def _due(self) -> bool:
        layout = self.ingestor.layout
        if _landing_files(layout):
            return True
        return layout.processing.is_dir() and any(p.is_dir() for p in layout.processing.iterdir())

    def run_once(self) -> IngestReport | None:
        try:
            report = self.ingestor.run(rollups=not self._threads)
        except IngestBusy as exc:
            log.info("ingest skipped: %s", exc)
            return None
        except Exception as exc:  # noqa: BLE001 - one line, and the next wake tries again
            self.last_error = " ".join(str(exc).split())[:300] or type(exc).__name__
            log.warning("ingest failed (retried when the next file lands): %s", self.last_error)
            return None
        self.runs += 1
        self.last_error = None
        if self.on_report is not None:
            self.on_report(report)
        return report

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._due():
                self.run_once()

    def _rollup_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            if not self.ingestor.rollups_due():
                continue
            try:
                self.ingestor.flush_rollups(final=False)
                self.rollup_runs += 1
            except Exception as exc:  # noqa: BLE001 - the minutes stay pending; tried again when due
                log.warning("rollups failed (retried when due): %s", " ".join(str(exc).split())[:300])

    def stop(self, timeout: float | None = None) -> None:
        """Stop the threads (after the work in progress), ingest what is left, flush the rollups."""
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []
        self.run_once()
        try:
            self.ingestor.flush_rollups()
        except Exception as exc:  # noqa: BLE001 - the minutes stay in rollups.pending for the next run
            log.warning("rollups left pending: %s", " ".join(str(exc).split())[:300])


def layout_status(layout: LakeLayout) -> dict:
    """Counts of files in flight and what the Delta log says; cheap, no Spark."""
    from lake import delta

    def count(d: Path, pattern: str = "*.jsonl") -> int:
        return sum(1 for _ in d.glob(pattern)) if d.is_dir() else 0

    commits = delta.local_commits(layout.table)
    last = max((c.get("timestamp_ms") or 0 for c in commits), default=0)
    out = {
        "state_dir": str(layout.state_dir),
        "table": layout.table,
        "format": "delta",
        "landing_files": count(layout.landing),
        "processing_batches": sum(1 for p in layout.processing.iterdir() if p.is_dir())
        if layout.processing.is_dir()
        else 0,
        "done_files": count(layout.done),
        "quarantined_files": count(layout.quarantine),
        "committed_batches": len(commits),
        "ingested_rows": sum(int(c.get("rows", 0)) for c in commits),
        "last_commit": (
            _dt.datetime.fromtimestamp(last / 1000, _dt.timezone.utc).isoformat(timespec="seconds") if last else None
        ),
    }
    if not is_uri(layout.table) and os.path.isdir(layout.table):
        hours = [p for p in Path(layout.table).glob("cluster=*/date=*/hour=*") if p.is_dir()]
        out["clusters"] = sorted({p.parent.parent.name.removeprefix("cluster=") for p in hours})
        out["hour_partitions"] = len(hours)
        out["parquet_bytes"] = sum(f.stat().st_size for h in hours for f in h.glob("*.parquet"))
        out["newest_hour"] = max(
            (f"{p.parent.name.removeprefix('date=')} {p.name.removeprefix('hour=')}h" for p in hours),
            default=None,
            key=lambda s: (s.split()[0], int(s.split()[1][:-1])),
        )
        out["rollups"] = {res: os.path.isdir(os.path.join(layout.rollup(res), "_delta_log")) for res in ("1m", "1h")}
    return out
