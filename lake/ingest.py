"""Ingest: landing files (JSON lines from ``lake.collector``) -> the Parquet lake, exactly once.

Layout
------
A local *state directory* (``KBOT_LAKE_DIR``, default ``~/.kbot/lake``) holds the
files in flight; the Parquet table (``KBOT_LAKE_URI``, default ``<state dir>/samples``)
may be local or any Hadoop-compatible URI (``s3a://``, ``abfss://``, ``hdfs://``)::

    <state dir>/landing/<name>.jsonl           written by the collector (atomically)
    <state dir>/processing/<batch id>/*.jsonl  claimed by one ingest batch
    <state dir>/done/<name>.jsonl              ingested (pruned after ``keep_done_s``)
    <state dir>/quarantine/<name>.jsonl        malformed, next to <name>.jsonl.reason.txt
    <state dir>/manifest.jsonl                 one line per committed batch: id, file names, rows
    <table>/cluster=/date=/hour=/<batch id>-part-*.parquet
    <table>/_staging/<batch id>/...            a batch's Spark output before it is published
                                               (Spark and DuckDB-style readers skip ``_`` dirs)

One batch, step by step
-----------------------
1. **claim**: create ``processing/<batch id>/`` and rename landing files into it.
   The batch id (``b<UTC time>-<hash of the file names>``) is fixed from then on:
   it is the directory's name, so a retry after a crash uses the same id.
2. **check**: files already named in the manifest go straight to ``done/``
   (never ingested twice); every other file is validated line by line (JSON
   object, field types, ranges); a bad one is moved to ``quarantine/`` with a
   reason file.
3. **stage**: Spark reads the good files and writes them, partitioned by
   cluster/date/hour, to ``_staging/<batch id>``.  Spark's commit protocol makes
   that all or nothing: ``_SUCCESS`` marks a complete staging directory.
4. **publish**: each staged file is renamed to its final place under a name
   made of the batch id and its staged name, so the name is the same on every
   attempt.  A file whose target already exists was published by an earlier
   attempt and is dropped from staging instead.
5. **commit**: append the batch (id, file names, rows) to the manifest, fsynced.
6. **finish**: move the batch's files to ``done/``, delete its staging
   directory and its ``processing/`` directory.

Crash anywhere -> the next run finishes the job
-----------------------------------------------
A run first *recovers* every batch left in ``processing/``, oldest first:

* crash during/after claim (1-2): the files are in ``processing/<id>/``; the
  batch is re-checked and staged from scratch (an incomplete staging directory,
  without ``_SUCCESS``, is overwritten).
* crash after staging or mid-publish (3-4): staging is complete, so it is
  published (again): targets that exist are kept, the rest are moved.  No
  Parquet file can be written twice because every target name is fixed.
* crash after publish, before the manifest (4-5): publishing again finds every
  target in place and moves nothing; then the batch is committed.
* crash after the manifest (5-6): the manifest has the batch: only the
  bookkeeping of step 6 is redone.

So a landing file is never lost (it is always in exactly one of landing,
processing, done or quarantine) and its rows reach the lake exactly once.
A torn last manifest line (crash mid-append) is ignored: that batch is simply
committed again, which is harmless (step 4 publishes nothing new).

Only one ingest runs at a time per state directory (``flock`` on ``ingest.lock``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

DIR_ENV = "KBOT_LAKE_DIR"
URI_ENV = "KBOT_LAKE_URI"
DEFAULT_DIR = "~/.kbot/lake"
TABLE_NAME = "samples"
STAGING = "_staging"
SUCCESS = "_SUCCESS"
DEFAULT_MAX_FILES = 500
DEFAULT_KEEP_DONE_S = 2 * 86_400

_INT32 = 2**31 - 1
# sample times must be plausible epoch microseconds (catches seconds/millis mix-ups)
_TS_MIN = 946_684_800_000_000  # 2000-01-01
_TS_MAX = 4_102_444_800_000_000  # 2100-01-01
_FIELDS = ("ts", "cluster", "broker", "metric", "topic", "partition", "labels", "value")


class IngestBusy(RuntimeError):
    """Another ingest holds the lock of this state directory."""


# --------------------------------------------------------------------------- layout


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


@dataclass(frozen=True)
class LakeLayout:
    state_dir: Path
    table: str  # the Parquet table root: a local path or a Hadoop URI

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, lake_dir: str | None = None,
                 table: str | None = None) -> "LakeLayout":
        env = os.environ if env is None else env
        state = Path(lake_dir or env.get(DIR_ENV) or DEFAULT_DIR).expanduser().resolve()
        uri = table or env.get(URI_ENV) or str(state / TABLE_NAME)
        if not _is_uri(uri):
            uri = str(Path(uri.removeprefix("file://")).expanduser().resolve())
        return cls(state, uri)

    @property
    def landing(self) -> Path:
        return self.state_dir / "landing"

    @property
    def processing(self) -> Path:
        return self.state_dir / "processing"

    @property
    def done(self) -> Path:
        return self.state_dir / "done"

    @property
    def quarantine(self) -> Path:
        return self.state_dir / "quarantine"

    @property
    def manifest(self) -> Path:
        return self.state_dir / "manifest.jsonl"

    @property
    def lock(self) -> Path:
        return self.state_dir / "ingest.lock"

    def staging(self, batch_id: str) -> str:
        return f"{self.table.rstrip('/')}/{STAGING}/{batch_id}"

    def make_dirs(self) -> None:
        for d in (self.landing, self.processing, self.done, self.quarantine):
            d.mkdir(parents=True, exist_ok=True)


def landing_schema():
    """What a landing line holds (``ts`` in epoch microseconds)."""
    from pyspark.sql.types import (DoubleType, IntegerType, LongType, MapType, StringType, StructField,
                                   StructType)

    return StructType([
        StructField("ts", LongType()),
        StructField("cluster", StringType()),
        StructField("broker", IntegerType()),
        StructField("metric", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("labels", MapType(StringType(), StringType(), True)),
        StructField("value", DoubleType()),
    ])


# --------------------------------------------------------------------------- validation


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_row(obj) -> str | None:
    """Why a parsed landing line is not a lake row, or None when it is one."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    extra = set(obj) - set(_FIELDS)
    if extra:
        return f"unknown field(s) {sorted(extra)}"
    ts = obj.get("ts")
    if not _is_int(ts) or not _TS_MIN <= ts < _TS_MAX:
        return f"ts must be epoch microseconds (2000..2100), got {ts!r}"
    for key in ("cluster", "metric"):
        v = obj.get(key)
        if not isinstance(v, str) or not v:
            return f"{key} must be a non-empty string, got {v!r}"
    broker = obj.get("broker")
    if not _is_int(broker) or not -1 <= broker <= _INT32:
        return f"broker must be a node id (or -1), got {broker!r}"
    topic = obj.get("topic")
    if topic is not None and (not isinstance(topic, str) or not topic):
        return f"topic must be a string or null, got {topic!r}"
    part = obj.get("partition")
    if part is not None and (not _is_int(part) or not 0 <= part <= _INT32):
        return f"partition must be a non-negative int or null, got {part!r}"
    labels = obj.get("labels")
    if labels is not None and (not isinstance(labels, dict)
                               or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
        return "labels must be an object of strings or null"
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"value must be a finite number, got {value!r}"
    if abs(value) > 1.7e308:
        return "value out of range"
    return None


def validate_landing_file(path: Path) -> tuple[int, str | None]:
    """(rows, None) for a good file, (0, reason) for a malformed one.  Streams the file."""
    rows = 0
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
                except (UnicodeDecodeError, ValueError) as exc:
                    return 0, f"line {n}: not valid JSON: {exc}"
                why = check_row(obj)
                if why is not None:
                    return 0, f"line {n}: {why}"
                rows += 1
    except OSError as exc:
        return 0, f"cannot read: {exc}"
    return rows, None


# --------------------------------------------------------------------------- manifest


class Manifest:
    """Append-only record of committed batches (one JSON object a line, fsynced)."""

    def __init__(self, path: Path):
        self.path = path
        self.batches: dict[str, dict] = {}
        self.files: set[str] = set()
        if path.exists():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                        bid = entry["batch"]
                        names = entry.get("files", [])
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn line from a crash mid-append: that batch was not committed
                    self.batches[bid] = entry
                    self.files.update(names)

    def has_batch(self, batch_id: str) -> bool:
        return batch_id in self.batches

    def has_file(self, name: str) -> bool:
        return name in self.files

    def commit(self, batch_id: str, files: list[str], rows: int, quarantined: list[str]) -> None:
        entry = {"batch": batch_id, "files": files, "rows": rows, "quarantined": quarantined,
                 "committed_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        with open(self.path, "a+b") as f:
            # a torn line left by a crash must not swallow this one
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        self.batches[batch_id] = entry
        self.files.update(files)


# --------------------------------------------------------------------------- the table's file system


class LocalFS:
    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def files(self, root: str) -> list[str]:
        """Relative paths of the data files under root (hidden and ``_`` files skipped)."""
        out = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "_")) or "=" in d]
            for name in filenames:
                if not name.startswith((".", "_")):
                    out.append(os.path.relpath(os.path.join(dirpath, name), root))
        return sorted(out)

    def rename(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)

    def delete(self, path: str) -> None:
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.unlink(path)


class HadoopFS:
    """The same operations through Hadoop's FileSystem API (s3a://, abfss://, hdfs://),
    via the classic session's JVM."""

    def __init__(self, spark, uri: str):
        try:
            jvm, jsc = spark._jvm, spark._jsc
        except AttributeError:
            raise RuntimeError("a Hadoop URI lake needs a classic Spark session (not Spark Connect) to ingest") from None
        if jvm is None:
            raise RuntimeError("a Hadoop URI lake needs a classic Spark session (not Spark Connect) to ingest")
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._Path(uri).getFileSystem(jsc.hadoopConfiguration())

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._Path(path)))

    def files(self, root: str) -> list[str]:
        base = self._Path(root)
        if not self._fs.exists(base):
            return []
        prefix = str(self._fs.makeQualified(base).toString()).rstrip("/") + "/"
        it = self._fs.listFiles(base, True)
        out = []
        while it.hasNext():
            full = str(it.next().getPath().toString())
            rel = full[len(prefix):] if full.startswith(prefix) else full
            parts = rel.split("/")
            if any(p.startswith((".", "_")) and "=" not in p for p in parts):
                continue
            out.append(rel)
        return sorted(out)

    def rename(self, src: str, dst: str) -> None:
        d = self._Path(dst)
        self._fs.mkdirs(d.getParent())
        if not self._fs.rename(self._Path(src), d):
            raise OSError(f"rename {src} -> {dst} failed")

    def delete(self, path: str) -> None:
        self._fs.delete(self._Path(path), True)


def table_fs(spark, table: str):
    return HadoopFS(spark, table) if _is_uri(table) else LocalFS()


# --------------------------------------------------------------------------- reports


@dataclass
class BatchReport:
    batch_id: str
    files: int = 0
    rows: int = 0
    published: int = 0  # Parquet files moved into the table by this attempt
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    recovered: bool = False  # left in processing/ by an earlier run
    already_committed: bool = False  # only the bookkeeping was left to do
    seconds: float = 0.0


@dataclass
class IngestReport:
    batches: list[BatchReport] = field(default_factory=list)
    pruned: int = 0
    seconds: float = 0.0

    @property
    def files(self) -> int:
        return sum(b.files for b in self.batches)

    @property
    def rows(self) -> int:
        return sum(b.rows for b in self.batches)

    @property
    def quarantined(self) -> list[tuple[str, str]]:
        return [q for b in self.batches for q in b.quarantined]

    def summary(self) -> str:
        rec = sum(b.recovered for b in self.batches)
        text = (f"{len(self.batches)} batch(es), {self.files:,} file(s), {self.rows:,} rows"
                f" in {self.seconds:.1f}s")
        if rec:
            text += f"; {rec} recovered from an interrupted run"
        if self.quarantined:
            text += f"; {len(self.quarantined)} quarantined: " + "; ".join(f"{n}: {r}" for n, r in self.quarantined)
        dups = sum(len(b.duplicates) for b in self.batches)
        if dups:
            text += f"; {dups} already ingested (skipped)"
        return text


# --------------------------------------------------------------------------- the job


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
    return sorted(p for p in layout.landing.iterdir()
                  if p.is_file() and p.name.endswith(".jsonl") and not p.name.startswith("."))


def new_batch_id(names: list[str], now: float | None = None) -> str:
    t = _dt.datetime.fromtimestamp(time.time() if now is None else now, _dt.timezone.utc)
    digest = hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()[:8]
    return f"b{t:%Y%m%dT%H%M%S%f}-{digest}"


class Ingestor:
    """Runs ingest batches for one layout on one SparkSession.

    ``crash_hook(point)`` is called at each step boundary (``claimed``,
    ``validated``, ``staged``, ``published_file``, ``published``, ``committed``);
    tests raise from it to simulate a crash there.
    """

    def __init__(self, spark, layout: LakeLayout, *, max_files: int = DEFAULT_MAX_FILES,
                 keep_done_s: float | None = DEFAULT_KEEP_DONE_S,
                 crash_hook: Callable[[str], None] | None = None):
        if max_files < 1:
            raise ValueError("max_files must be >= 1")
        self.spark = spark
        self.layout = layout
        self.max_files = max_files
        self.keep_done_s = keep_done_s
        self._hook = crash_hook or (lambda point: None)
        self.fs = table_fs(spark, layout.table)

    # ---- entry point
    def run(self, max_batches: int | None = None) -> IngestReport:
        t0 = time.monotonic()
        self.layout.make_dirs()
        report = IngestReport()
        with _locked(self.layout.lock):
            manifest = Manifest(self.layout.manifest)
            for batch_dir in sorted(p for p in self.layout.processing.iterdir() if p.is_dir()):
                report.batches.append(self._process(batch_dir, manifest, recovered=True))
            while max_batches is None or len(report.batches) < max_batches:
                files = _landing_files(self.layout)[: self.max_files]
                if not files:
                    break
                batch_dir = self._claim(files)
                report.batches.append(self._process(batch_dir, manifest, recovered=False))
            report.pruned = self._prune_done()
        report.seconds = time.monotonic() - t0
        return report

    # ---- steps
    def _claim(self, files: list[Path]) -> Path:
        batch_dir = self.layout.processing / new_batch_id([f.name for f in files])
        batch_dir.mkdir(parents=True)
        for f in files:
            os.replace(f, batch_dir / f.name)
        _fsync_dir(batch_dir)
        _fsync_dir(self.layout.landing)
        self._hook("claimed")
        return batch_dir

    def _process(self, batch_dir: Path, manifest: Manifest, recovered: bool) -> BatchReport:
        t0 = time.monotonic()
        batch_id = batch_dir.name
        rep = BatchReport(batch_id, recovered=recovered)
        files = sorted(p for p in batch_dir.iterdir() if p.is_file() and p.name.endswith(".jsonl"))
        if manifest.has_batch(batch_id):
            rep.already_committed = True
            rep.files = len(files)
            self._finish(batch_id, batch_dir, files)
            rep.seconds = time.monotonic() - t0
            return rep
        good: list[Path] = []
        for f in files:
            if manifest.has_file(f.name):
                rep.duplicates.append(f.name)
                self._move(f, self.layout.done / f.name)
                continue
            rows, reason = validate_landing_file(f)
            if reason is not None:
                self._quarantine(f, reason)
                rep.quarantined.append((f.name, reason))
                continue
            good.append(f)
            rep.rows += rows
        self._hook("validated")
        staging = self.layout.staging(batch_id)
        if good and rep.rows:
            if not self.fs.exists(f"{staging}/{SUCCESS}"):
                self._stage(good, staging)
            self._hook("staged")
            rep.published = self._publish(batch_id, staging)
        self._hook("published")
        manifest.commit(batch_id, [f.name for f in good], rep.rows, [n for n, _ in rep.quarantined])
        self._hook("committed")
        rep.files = len(good)
        self._finish(batch_id, batch_dir, good)
        rep.seconds = time.monotonic() - t0
        return rep

    def _stage(self, files: list[Path], staging: str) -> None:
        from pyspark.sql import functions as F

        from lake.schema import COLUMNS, PARTITION_COLUMNS, with_partition_columns

        spark = self.spark
        df = (spark.read.schema(landing_schema()).option("mode", "FAILFAST")
              .json([f.resolve().as_uri() for f in files]))
        out = with_partition_columns(df.withColumn("ts", F.timestamp_micros(F.col("ts"))))
        # one file per hour directory and batch; sorted so a metric's rows sit together
        # (row-group statistics on metric/topic then skip most of a file)
        out = (out.repartition(*PARTITION_COLUMNS)
               .sortWithinPartitions("metric", "topic", "partition", "broker", "ts")
               .select(*COLUMNS))
        key = "spark.sql.parquet.outputTimestampType"
        old = spark.conf.get(key)
        spark.conf.set(key, "TIMESTAMP_MICROS")
        try:
            out.write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(staging)
        finally:
            spark.conf.set(key, old)

    def _publish(self, batch_id: str, staging: str) -> int:
        moved = 0
        table = self.layout.table.rstrip("/")
        for rel in self.fs.files(staging):
            head, _, name = rel.rpartition("/")
            target = f"{table}/{head}/{batch_id}-{name}" if head else f"{table}/{batch_id}-{name}"
            source = f"{staging}/{rel}"
            if self.fs.exists(target):
                # published by an earlier attempt (a copy-then-delete rename may leave the source)
                self.fs.delete(source)
            else:
                self.fs.rename(source, target)
                moved += 1
            self._hook("published_file")
        return moved

    def _finish(self, batch_id: str, batch_dir: Path, files: list[Path]) -> None:
        for f in files:
            if f.exists():
                self._move(f, self.layout.done / f.name)
        # anything else still in the batch dir was committed too (e.g. a finish cut short)
        for f in list(batch_dir.iterdir()):
            if f.is_file():
                self._move(f, self.layout.done / f.name)
        self.fs.delete(self.layout.staging(batch_id))
        with contextlib.suppress(OSError):
            batch_dir.rmdir()
        staging_root = f"{self.layout.table.rstrip('/')}/{STAGING}"
        if isinstance(self.fs, LocalFS):
            with contextlib.suppress(OSError):
                os.rmdir(staging_root)

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


def run_ingest(spark, layout: LakeLayout | None = None, **kwargs) -> IngestReport:
    """Ingest everything in landing (and recover interrupted batches) into the lake."""
    max_batches = kwargs.pop("max_batches", None)
    return Ingestor(spark, layout or LakeLayout.from_env(), **kwargs).run(max_batches=max_batches)


def layout_status(layout: LakeLayout) -> dict:
    """Counts of files in flight and what the manifest says; cheap, no Spark."""
    def count(d: Path, pattern: str = "*.jsonl") -> int:
        return sum(1 for _ in d.glob(pattern)) if d.is_dir() else 0

    manifest = Manifest(layout.manifest)
    last = max((b.get("committed_at", "") for b in manifest.batches.values()), default=None)
    out = {
        "state_dir": str(layout.state_dir),
        "table": layout.table,
        "landing_files": count(layout.landing),
        "processing_batches": sum(1 for p in layout.processing.iterdir() if p.is_dir()) if layout.processing.is_dir() else 0,
        "done_files": count(layout.done),
        "quarantined_files": count(layout.quarantine),
        "committed_batches": len(manifest.batches),
        "ingested_rows": sum(int(b.get("rows", 0)) for b in manifest.batches.values()),
        "last_commit": last,
    }
    if not _is_uri(layout.table) and os.path.isdir(layout.table):
        hours = [p for p in Path(layout.table).glob("cluster=*/date=*/hour=*") if p.is_dir()]
        out["clusters"] = sorted({p.parent.parent.name.removeprefix("cluster=") for p in hours})
        out["hour_partitions"] = len(hours)
        out["parquet_bytes"] = sum(f.stat().st_size for h in hours for f in h.glob("*.parquet"))
        out["newest_hour"] = max((f"{p.parent.name.removeprefix('date=')} {p.name.removeprefix('hour=')}h"
                                  for p in hours), default=None,
                                 key=lambda s: (s.split()[0], int(s.split()[1][:-1])))
    return out
