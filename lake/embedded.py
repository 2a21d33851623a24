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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from lake.errors import LakeUnavailable
from lake.schema import partition_values, to_utc

#: Columns a window question may read (the partition columns come from the snapshot).
COLUMNS = ("ts", "broker", "metric", "topic", "partition", "labels", "value", "cluster")


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


@dataclass(frozen=True)
class Window:
    """What a window question gets: a DuckDB connection with the window's samples as the view
    ``w`` (``start <= ts < end``, one cluster or all, only the metrics asked for)."""

    con: Any  # duckdb.DuckDBPyConnection
    start: _dt.datetime
    end: _dt.datetime
    cluster: str | None

    @classmethod
    def over(cls, samples: Any, start: _dt.datetime, end: _dt.datetime, cluster: str | None = None) -> "Window":
        """A window over ``samples`` (an Arrow table with :data:`COLUMNS`), already cut to it."""
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET threads = 2")
        con.register("w_arrow", samples)
        con.execute("CREATE VIEW w AS SELECT * FROM w_arrow")
        return cls(con, start, end, cluster)

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """``sql`` over ``w`` as dicts; timestamps aware UTC."""
        cur = self.con.execute(sql, params or {})
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def data_end(self) -> float | None:
        """Epoch seconds of the window's newest sample (None without samples)."""
        [(end,)] = self.con.execute("SELECT epoch_us(max(ts)) FROM w").fetchall()
        return None if end is None else end / 1e6


#: What reading a window can raise besides our own errors: delta-rs, DuckDB, Arrow, the store.
READ_ERRORS: tuple[type[BaseException], ...] = (DeltaError, duckdb.Error, pa.ArrowException, OSError)


class TableNotFound(LakeUnavailable):
    """No Delta table at the lake's path yet (a young lake: nothing ingested)."""


class WindowReader:
    """One lake's samples table, read window by window (thread-safe; one per LakeService).

    The table's snapshot is loaded once and brought up to date before each question
    (``update_incremental``: only the log entries since), so a question pays for the commits
    since the last one, not for the table's history."""

    def __init__(self, path: str, storage_options: dict[str, str] | None = None):
        self.path = path
        self.location = delta_location(path)
        self.storage_options = storage_options
        self._table: Any = None  # deltalake.DeltaTable
        self._lock = threading.Lock()

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
                ) from None
            return self._table

    def open(
        self,
        start: _dt.datetime,
        end: _dt.datetime,
        cluster: str | None,
        metrics: Sequence[str],
    ) -> Window:
        """A DuckDB connection whose view ``w`` holds the window's samples of ``metrics``.

        The Arrow dataset is pruned to the window's hours and cluster by partition value
        (fragments of other hours are never opened) and its rows by ``ts`` and ``metric``
        (Parquet statistics skip row groups); DuckDB reads it without copying."""
        s, e = to_utc(start), to_utc(end)
        table = self._snapshot()
        dataset = table.to_pyarrow_dataset()
        hours = pc.field("date").isin([d for d, _ in _hours(s, e)]) & pc.field("hour").isin(
            sorted({h for _, h in _hours(s, e)})
        )
        keep = hours & (pc.field("ts") >= s) & (pc.field("ts") < e) & pc.field("metric").isin(list(metrics))
        if cluster is not None:
            keep = keep & (pc.field("cluster") == cluster)
        return Window.over(dataset.to_table(columns=list(COLUMNS), filter=keep), s, e, cluster)
