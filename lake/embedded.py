"""The incident window read in the bot's own process: DuckDB over the Delta table's snapshot.

Why a second reader next to Spark (docs/lake-engines.md has the measurements): a Spark action
costs 0.4-1.2 s here before it touches any data, an answer ran four, and on a loaded machine
right after a fault the lake half of an answer timed out. The window an incident question
reads is small (the last minutes of one cluster), so it is read here: delta-rs gives the
table's current snapshot (the files of the window's date/hour partitions, Delta's log, no
directory listing, no JVM) as an Arrow dataset and DuckDB runs the question's SQL on it.
Spark stays the engine of the pipeline (ingest, rollups, compaction, retention) and of long
histories; a question is answered by one engine only (``window_queries`` holds the ones
answered here).

The reader needs neither Spark nor its Connect server: while Spark is still starting, or after
it failed, the window's questions are answered all the same.

User values reach DuckDB only as bound parameters (``$name``), never as SQL text.
"""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from lake.errors import LakeUnavailable
from lake.schema import RAW, partition_values, to_utc

#: Columns a window question may read of the samples (``w``) and of a rollup table (``lake.schema``:
#: the partition columns other than ``cluster`` stay out).
COLUMNS = ("ts", "broker", "metric", "topic", "partition", "labels", "value", "cluster")
ROLLUP_COLUMNS = (
    "bucket", "broker", "metric", "topic", "partition", "labels", "min", "max", "sum", "count", "last", "last_ts",
    "inc", "growth", "resets", "seconds", "cluster",
)  # fmt: skip


@dataclass(frozen=True)
class Question:
    """One window question (``window_queries``): its name, the metrics it reads (the only ones
    read from the table), and ``answer(window, *args) -> dict`` of plain Python values."""

    name: str
    metrics: tuple[str, ...]
    answer: Callable[..., dict[str, Any]]


def delta_location(path: str) -> str:
    """The table's location as delta-rs names it: Hadoop's ``s3a://`` is ``s3://`` there; a
    local path loses ``file://``."""
    if path.startswith("s3a://"):
        return "s3://" + path[len("s3a://") :]
    return path.removeprefix("file://")


def _hours(start: _dt.datetime, end: _dt.datetime) -> list[tuple[str, int]]:
    """(date, hour) of every UTC hour overlapping [start, end)."""
    s, e = to_utc(start), to_utc(end)
    hour = s.replace(minute=0, second=0, microsecond=0)
    out = []
    while hour < e:
        out.append(partition_values(hour))
        hour += _dt.timedelta(hours=1)
    return out


@dataclass
class Window:
    """What a window question gets: a DuckDB connection with the window's samples as the view
    ``w`` (``start <= ts < end``, one cluster or all, only the metrics asked for), and the
    lake's rollup tables to attach more views from (:meth:`rollup`)."""

    con: Any  # duckdb.DuckDBPyConnection
    start: _dt.datetime
    end: _dt.datetime
    cluster: str | None
    rollups: Mapping[str, "WindowReader"] = field(default_factory=dict)
    #: the raw table's reader, for a question that attaches samples of its own (:meth:`samples`)
    raw: "WindowReader | None" = None

    @classmethod
    def over(
        cls,
        samples: Any,
        start: _dt.datetime,
        end: _dt.datetime,
        cluster: str | None = None,
        rollups: Mapping[str, "WindowReader"] | None = None,
        raw: "WindowReader | None" = None,
    ) -> "Window":
        """A window over ``samples`` (an Arrow table with :data:`COLUMNS`), already cut to it."""
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET threads = 2")
        window = cls(con, start, end, cluster, dict(rollups or {}), raw)
        window.attach("w", samples)
        return window

    def attach(self, name: str, table: Any) -> None:
        """Make the Arrow ``table`` the view ``name`` (a fixed name of the question's, never a
        user's)."""
        self.con.register(f"{name}_arrow", table)
        self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_arrow")

    def rollup(
        self,
        resolution: str,
        start: _dt.datetime,
        end: _dt.datetime,
        metrics: Sequence[str] | None,
        name: str,
        where: Mapping[str, Any] | None = None,
    ) -> bool:
        """Attach the rows of the ``resolution`` rollup (``1m``, ``1h``) whose bucket starts in
        [start, end) as the view ``name``; False (and nothing attached) without that table.
        ``metrics`` None: every metric; ``where``: column = value filters (see
        :meth:`WindowReader.read`)."""
        reader = self.rollups.get(resolution)
        if reader is None:
            return False
        try:
            rows = reader.read(start, end, self.cluster, metrics, where)
        except TableNotFound:
            return False
        self.attach(name, rows)
        return True

    def samples(
        self,
        start: _dt.datetime,
        end: _dt.datetime,
        metrics: Sequence[str] | None,
        name: str,
        where: Mapping[str, Any] | None = None,
    ) -> bool:
        """Attach the raw samples of [start, end) as the view ``name`` (as :meth:`rollup` does a
        rollup's), for a question that reads no ``w`` of its own; False without the raw table."""
        if self.raw is None:
            return False
        try:
            rows = self.raw.read(start, end, self.cluster, metrics, where)
        except TableNotFound:
            return False
        self.attach(name, rows)
        return True

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """``sql`` over ``w`` as dicts; timestamps aware UTC."""
        cur = self.con.execute(sql, params or {})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def data_end(self) -> float | None:
        """Epoch seconds of the window's newest sample (None without samples)."""
        [(end,)] = self.con.execute("SELECT epoch_us(max(ts)) FROM w").fetchall()
        return None if end is None else end / 1e6


_LABELS = pa.map_(pa.string(), pa.string())
_SERIES_FIELDS = [
    ("broker", pa.int32()), ("metric", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("labels", _LABELS),
]  # fmt: skip
#: An empty read of each kind of table (by its time column), for a question that reads no metric.
_EMPTY = {
    "ts": pa.schema(
        [("ts", pa.timestamp("us", "UTC")), *_SERIES_FIELDS, ("value", pa.float64()), ("cluster", pa.string())]
    ).empty_table(),
    "bucket": pa.schema(
        [
            ("bucket", pa.timestamp("us", "UTC")),
            *_SERIES_FIELDS,
            *[(n, pa.float64()) for n in ("min", "max", "sum")],
            ("count", pa.int64()),
            ("last", pa.float64()),
            ("last_ts", pa.timestamp("us", "UTC")),
            *[(n, pa.float64()) for n in ("inc", "growth")],
            ("resets", pa.int64()),
            ("seconds", pa.float64()),
            ("cluster", pa.string()),
        ]
    ).empty_table(),
}

#: What reading a window can raise besides our own errors: delta-rs, DuckDB, Arrow, the store.
READ_ERRORS: tuple[type[BaseException], ...] = (DeltaError, duckdb.Error, pa.ArrowException, OSError)


class TableNotFound(LakeUnavailable):
    """No Delta table at the lake's path yet (a young lake: nothing ingested)."""


class PastCrossover(Exception):
    """A question too big to answer in this process within its budget (the files it would read,
    from Delta's log), on a lake on an object store, or over several clusters: Spark's to answer
    (``docs/lake-engines.md``: where the crossover lies and why).  Raised before any data file is
    opened; ``reason`` says which limit; ``budget``: only the size budget was passed (a local lake
    of one cluster, which this process can still read, slower, when Spark cannot)."""

    def __init__(self, reason: str, files: "FileSet | None" = None, budget: bool = False):
        self.reason, self.files, self.budget = reason, files, budget
        super().__init__(reason)


@dataclass(frozen=True)
class FileSet:
    """The data files a read of a table would open, from Delta's log (no file opened): how many,
    their bytes and rows, and the clusters they hold."""

    files: int = 0
    bytes: int = 0
    rows: int = 0
    clusters: frozenset[str] = frozenset()

    def __add__(self, other: "FileSet") -> "FileSet":
        return FileSet(
            self.files + other.files,
            self.bytes + other.bytes,
            self.rows + other.rows,
            self.clusters | other.clusters,
        )


class WindowReader:
    """One Delta table of the lake (the samples, or a rollup), read window by window
    (thread-safe; the LakeService keeps one per table).

    The table's snapshot is loaded once and brought up to date before each read
    (``update_incremental``: only the log entries since), so a question pays for the commits
    since the last one, not for the table's history."""

    def __init__(self, path: str, resolution: str = RAW, storage_options: dict[str, str] | None = None):
        self.path = path
        self.resolution = resolution
        self.location = delta_location(path)
        self.storage_options = storage_options
        self._time, self._columns = ("ts", COLUMNS) if resolution == RAW else ("bucket", ROLLUP_COLUMNS)
        self._table: Any = None  # deltalake.DeltaTable
        self._lock = threading.Lock()
        self._files_cache: tuple[int, Any] | None = None  # (table version, _file_list())

    @property
    def remote(self) -> bool:
        """Is the table on an object store (``s3://``, ``abfss://``, ...) rather than a local path?"""
        return "://" in self.location and not self.location.startswith("file://")

    def exists(self) -> bool:
        """Is there a Delta table at the path (its first commit landed)?"""
        try:
            self._snapshot()
        except TableNotFound:
            return False
        return True

    def _snapshot(self) -> Any:
        with self._lock:
            try:
                if self._table is None:
                    self._table = DeltaTable(self.location, storage_options=self.storage_options)
                else:
                    self._table.update_incremental()
            except TableNotFoundError:
                self._table = None
                raise TableNotFound(
                    "The metric lake has no samples yet (no table at its path): nothing has been ingested."
                    if self.resolution == RAW
                    else f"The metric lake has no {self.resolution} rollup table yet."
                ) from None
            return self._table

    def read(
        self,
        start: _dt.datetime,
        end: _dt.datetime,
        cluster: str | None,
        metrics: Sequence[str] | None,
        where: Mapping[str, Any] | None = None,
        columns: Sequence[str] | None = None,
    ) -> Any:
        """The rows of [start, end) (by ``ts``, or a rollup's ``bucket``) of ``metrics`` (None:
        every metric; empty: none, and no file is opened), as Arrow.  ``where``: more
        ``column = value`` filters (``topic``, ``broker``, ``partition``), values compared as
        values (never text put into an expression).

        The dataset is pruned to the window's hours and cluster by partition value (fragments
        of other hours are never opened) and its rows by time, metric and ``where`` (Parquet
        statistics skip row groups).  ``columns``: a part of the table's columns (default all the
        questions read)."""
        s, e = to_utc(start), to_utc(end)
        wanted = list(columns or self._columns)
        if metrics is not None and not metrics:  # not even the snapshot: the table need not exist
            return _EMPTY[self._time].select(wanted)
        dataset = self._snapshot().to_pyarrow_dataset()
        keep = self._partitions(s, e, cluster)
        t = pc.field(self._time)
        keep = keep & (t >= s) & (t < e)
        if metrics is not None:
            keep = keep & pc.field("metric").isin(list(metrics))
        for column, value in (where or {}).items():
            if column not in self._columns:
                raise ValueError(f"cannot filter the {self.resolution} table on {column!r}")
            keep = keep & (pc.field(column) == value)
        return dataset.to_table(columns=wanted, filter=keep)

    def _partitions(self, s: _dt.datetime, e: _dt.datetime, cluster: str | None) -> Any:
        """The partition filter of [s, e) (and ``cluster``): the date (and hour) values."""
        hours = _hours(s, e)
        keep = pc.field("date").isin(sorted({d for d, _ in hours}))
        if self.resolution != "1h":  # the hour table is partitioned by date only
            keep = keep & pc.field("hour").isin(sorted({h for _, h in hours}))
        if cluster is not None:
            keep = keep & (pc.field("cluster") == cluster)
        return keep

    def file_uris(self, start: _dt.datetime, end: _dt.datetime, cluster: str | None) -> list[str]:
        """The data files of [start, end)'s partitions (and ``cluster``), as the snapshot lists
        them (absolute paths for a local table): for DuckDB to read with its own Parquet reader,
        which pushes the question's filters and reads only its columns (``window_queries.history``).
        The live files only: the snapshot's, never a directory listing."""
        s, e = to_utc(start), to_utc(end)
        hours = _hours(s, e)
        keep: list[tuple[str, str, Any]] = [("date", "in", sorted({d for d, _ in hours}))]
        if self.resolution != "1h":
            keep.append(("hour", "in", sorted({str(h) for _, h in hours})))
        if cluster is not None:
            keep.append(("cluster", "=", cluster))
        uris: list[str] = self._snapshot().file_uris(file_pruning_predicate=keep)
        return uris

    def _file_list(self) -> tuple[Any, Any, Any, list[Any], list[Any]]:
        """The snapshot's files as (dates, hours, clusters, sizes, row counts), None for a partition
        column the table lacks; read from Delta's log once per table version."""
        table = self._snapshot()
        version = table.version()
        cached = self._files_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        actions = table.get_add_actions(flatten=True)
        names = set(actions.schema.names)
        col = {n: actions.column(n).to_pylist() for n in names if n.startswith("partition.")}
        sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
        counts = actions.column("num_records").to_pylist() if "num_records" in names else [None] * len(sizes)
        listed = (col.get("partition.date"), col.get("partition.hour"), col.get("partition.cluster"), sizes, counts)
        self._files_cache = (version, listed)
        return listed

    def files(self, start: _dt.datetime, end: _dt.datetime, cluster: str | None) -> FileSet:
        """The data files a :meth:`read` of [start, end) would open after partition pruning, from
        the snapshot's add actions in Delta's log (no data file opened): what a question costs
        before it is asked."""
        s, e = to_utc(start), to_utc(end)
        p_date, p_hour, p_cluster, sizes, counts = self._file_list()
        hours = _hours(s, e)
        dates = {d for d, _ in hours}
        hour_set = {h for _, h in hours}
        total = FileSet()
        for i in range(len(sizes)):
            if p_date is not None and str(p_date[i]) not in dates:
                continue
            if (
                self.resolution != "1h"
                and p_hour is not None
                and p_hour[i] is not None
                and int(p_hour[i]) not in hour_set
            ):
                continue
            owner = None if p_cluster is None else str(p_cluster[i])
            if cluster is not None and owner is not None and owner != cluster:
                continue
            total = total + FileSet(
                1, int(sizes[i] or 0), int(counts[i] or 0), frozenset() if owner is None else frozenset({owner})
            )
        return total

    def newest(self, now: _dt.datetime, hours: int = 2, cluster: str | None = None) -> _dt.datetime | None:
        """The newest sample time (of ``cluster``, else any) in the ``hours`` before ``now``
        (None without one): how fresh the lake is, read from those hours' files only."""
        dataset = self._snapshot().to_pyarrow_dataset()
        s = to_utc(now) - _dt.timedelta(hours=hours)
        window = _hours(s, to_utc(now) + _dt.timedelta(hours=1))
        t = pc.field(self._time)
        keep = pc.field("date").isin(sorted({d for d, _ in window})) & (t >= s) & (t < to_utc(now))
        if cluster is not None:
            keep = keep & (pc.field("cluster") == cluster)
        times = dataset.to_table(columns=[self._time], filter=keep).column(self._time)
        newest = pc.max(times).as_py() if len(times) else None
        return None if newest is None else to_utc(newest)

    def spans(self, cluster: str | None = None) -> list[tuple[_dt.datetime, _dt.datetime]]:
        """(first, last) sample time of each file of the table (of ``cluster``), from the file
        statistics in Delta's log: no data file is opened. A file without statistics spans its
        partition (its hour; the hour table's, its day)."""
        actions = self._snapshot().get_add_actions(flatten=True)
        names = set(actions.schema.names)
        if not actions.num_rows:
            return []
        col = {n: actions.column(n).to_pylist() for n in names if n.startswith(("min.", "max.", "partition."))}
        lows, highs = col.get(f"min.{self._time}"), col.get(f"max.{self._time}")
        dates, hours = col.get("partition.date"), col.get("partition.hour")
        clusters = col.get("partition.cluster")
        out = []
        for i in range(actions.num_rows):
            if cluster is not None and clusters is not None and clusters[i] != cluster:
                continue
            low, high = (lows[i] if lows else None), (highs[i] if highs else None)
            if low is None or high is None:
                if dates is None:
                    continue  # neither statistics nor partition: the file cannot be placed
                day = _dt.datetime.fromisoformat(str(dates[i])).replace(tzinfo=_dt.timezone.utc)
                hour = hours[i] if hours is not None and hours[i] is not None else None
                low = day if hour is None else day + _dt.timedelta(hours=int(hour))
                high = low + _dt.timedelta(days=1 if hour is None else 0, hours=0 if hour is None else 1)
            out.append((to_utc(low), to_utc(high)))
        return out

    def open(
        self,
        start: _dt.datetime,
        end: _dt.datetime,
        cluster: str | None,
        metrics: Sequence[str],
        rollups: Mapping[str, "WindowReader"] | None = None,
    ) -> Window:
        """A window whose view ``w`` holds the samples of ``metrics`` in [start, end); DuckDB
        reads the Arrow rows without copying.  A question of no metrics (``history``: it picks
        its tables itself) gets an empty ``w`` and opens no file for it."""
        s, e = to_utc(start), to_utc(end)
        return Window.over(self.read(s, e, cluster, metrics), s, e, cluster, rollups, raw=self)


def collected(
    readers: Mapping[str, WindowReader], start: _dt.datetime, end: _dt.datetime, cluster: str | None
) -> dict[str, Any]:
    """How much the lake holds, for telling a young lake (its collector started inside [start,
    end), or nothing is ingested yet) from a window that has no such samples (``diagnosis.lake_age``).

    ``minutes``: the minutes of the window that the raw table's files cover (each file spans its
    first to its last sample: a batch of consecutive scrape rounds, so a pause in collecting
    longer than a batch shows as missing minutes); ``first`` / ``last``: the window's first and
    newest sample time the files give (epoch seconds, None without); ``earlier``: the lake holds
    something from before ``start`` (raw files, or a rollup's, which outlive the raw samples).
    Read from Delta's log alone. A table that is not there yet counts as empty."""
    s, e = to_utc(start), to_utc(end)
    spans: dict[str, list[tuple[_dt.datetime, _dt.datetime]]] = {}
    for resolution, reader in readers.items():
        try:
            spans[resolution] = reader.spans(cluster)
        except TableNotFound:
            spans[resolution] = []
    earlier = any(low < s for table in spans.values() for low, _ in table)
    minute = _dt.timedelta(minutes=1)
    covered: set[_dt.datetime] = set()
    first: _dt.datetime | None = None
    last: _dt.datetime | None = None
    for low, high in spans.get(RAW, []):
        low, high = max(low, s), min(high, e - _dt.timedelta(microseconds=1))
        if low > high:
            continue
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
        m = low.replace(second=0, microsecond=0)
        while m <= high:
            covered.add(m)
            m += minute
    return {
        "minutes": len(covered),
        "first": None if first is None else first.timestamp(),
        "last": None if last is None else last.timestamp(),
        "earlier": earlier,
    }
