"""The metric lake as the bot uses it: one warm SparkSession and an async query API.

::

    lake = LakeService.from_settings(settings).start()   # at boot: Spark starts and warms up in a thread
    rows = await lake.query(fn, start, end)    # fn(view, start, end) runs in a worker thread

``start()`` returns at once; a background thread builds the session
(``lake.spark.build_session``: ``local[*]`` by default, ``sc://host:15002`` for
Spark Connect, ``spark://...`` or ``yarn`` for a cluster) and runs a small query
on the real code paths (reading the lake, a window query) so the JVM, the
Parquet reader and code generation are warm before the first user asks.

Session selection (``from_settings``): ``KBOT_SPARK_MASTER`` when set; else, when this lake's
Spark Connect server runs (``kbot run`` / ``kbot lake serve``, ``lake.connect``: its state file
under the lake dir names it and its port answers), ``sc://127.0.0.1:<port>``: a fresh process
then pays only its query (a few seconds on 2 cores) instead of starting its own JVM.  If that server cannot be
reached when the session is built, the service falls back to the in-process ``local[*]``
session.  A Connect session is not warmed up from the client: the server is warm already.

``query(fn, *args)`` calls ``fn(view, *args)`` in a worker thread
(``asyncio.to_thread``): Spark actions block, the event loop must not.  ``view``
is a :class:`LakeView`: the session plus readers that open only the hour
directories a window needs.  Each query runs under a Spark job tag; when it
exceeds its timeout the tag's jobs are cancelled (until the query thread
returns) and the caller gets :class:`lake.errors.LakeTimeout`; callers get
:class:`lake.errors.LakeUnavailable` when Spark could not start, is still starting after the
wait, or its JVM went away: the message says what happened (commands turn it into their own
``Unavailable`` and keep their live evidence).

The lake is Delta Lake (``lake.ingest``): the raw samples and the 1-minute / 1-hour rollups
(``lake.rollups``).  :class:`LakeView` reads each as a Delta snapshot (partition pruning from
the window's date/hour predicate) and tells a query the coarsest table that answers a bucket
width (:meth:`LakeView.resolution_for`), so a 7-day trend never reads raw samples.

Configuration (``from_settings``; fields of the one settings object the process loaded,
which validates them)::

    KBOT_LAKE_URI        the Delta table (default <KBOT_LAKE_DIR>/samples)
    KBOT_LAKE_DIR        the lake's state directory (default <KBOT_HOME>/lake, ~/.kbot/lake)
    KBOT_SPARK_MASTER    local[*] | sc://host:15002 | spark://host:7077 | yarn   (default: the lake's
                         running Connect server, else local[*])
    KBOT_LAKE_CLUSTER    the cluster name to read when a request names none (default: any)
    KBOT_LAKE_TIMEOUT_S  per-query timeout in seconds (default 30)
    KBOT_SPARK_CONF      extra Spark settings, "key=value;key=value" (';' because values such as
                         spark.jars.packages contain commas), e.g. for s3a://:
                         spark.jars.packages=org.apache.hadoop:hadoop-aws:3.4.1
    KBOT_LAKE            1 to enable the lake when none of the above is set (see lake_from_settings)
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import glob
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from kbot_settings import KbotSettings
from lake import delta
from lake.changes import Change, changes_table_of, read_changes
from lake.connect import ConnectServerError, query_url, start_server
from lake.embedded import READ_ERRORS, Question, TableNotFound, Window, WindowReader, collected
from lake.errors import LakeTimeout, LakeUnavailable, missing_table
from lake.layout import LakeLayout
from lake.queries import q_history
from lake.rollups import open_hours_start
from lake.schema import COLUMNS, RAW, ROLLUPS, escape_path_name, partition_values, table_path
from lake.schema import to_utc as _utc
from lake.spark import build_session
from lake.spark_conf import parse_conf
from spark_queries._common import ts_lit
from spark_queries.rollup import coarser_rollup, with_seconds
from spark_queries.schema import SAMPLE_SCHEMA, read_lake
from spark_queries.window import incident_window, partition_predicate

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0  # a service built directly; from_settings takes KBOT_LAKE_TIMEOUT_S (same default)

NEW, STARTING, READY, FAILED, STOPPED = "new", "starting", "ready", "failed", "stopped"


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


class LakeView:
    """What a query function gets: the session and window-aware readers of the lake."""

    def __init__(self, spark, path: str, cluster: str | None = None):
        self.spark = spark
        self.path = path.rstrip("/") if _is_uri(path) else str(path).removeprefix("file://").rstrip("/")
        self.cluster = cluster

    # ---- listing
    def _glob(self, pattern: str) -> list[str]:
        """Existing directories matching a glob under the lake root."""
        if not _is_uri(self.path):
            return sorted(p for p in glob.glob(f"{self.path}/{pattern}") if os.path.isdir(p))
        try:
            jvm, jsc = self.spark._jvm, self.spark._jsc
        except AttributeError:
            jvm = None
        if jvm is None:
            return []  # Spark Connect: the server lists; see window()
        Path = jvm.org.apache.hadoop.fs.Path
        fs = Path(self.path).getFileSystem(jsc.hadoopConfiguration())
        found = fs.globStatus(Path(f"{self.path}/{pattern}")) or []
        return sorted(str(s.getPath().toString()) for s in found if s.isDirectory())

    def hour_dirs(self, start: _dt.datetime, end: _dt.datetime, cluster: str | None = None) -> list[str]:
        """The existing ``cluster=/date=/hour=`` directories overlapping [start, end)."""

        cluster = cluster if cluster is not None else self.cluster
        c = escape_path_name(cluster) if cluster is not None else "*"
        s, e = _utc(start), _utc(end)
        hour = s.replace(minute=0, second=0, microsecond=0)
        out: list[str] = []
        while hour < e:
            date, h = partition_values(hour)
            out += self._glob(f"cluster={c}/date={date}/hour={h}")
            hour += _dt.timedelta(hours=1)
        return out

    # ---- tables
    def is_delta(self, resolution: str = "raw") -> bool:
        """Is there a Delta table for ``resolution`` (raw, 1m, 1h)?  Remembered per view."""

        cache = self.__dict__.setdefault("_tables", {})
        if resolution not in cache:
            path = table_path(self.path, resolution)
            if _is_uri(path) and getattr(self.spark, "_jvm", None) is None:
                # Spark Connect over a store only the server reaches: the server is asked (a round
                # trip), once per process for a table that exists; a young lake has no rollup
                # table yet, and a table assumed to exist failed the question (DELTA_TABLE_NOT_FOUND)
                if path not in _CONNECT_TABLES:
                    if delta.table_exists(self.spark, path):
                        _CONNECT_TABLES.add(path)
                cache[resolution] = path in _CONNECT_TABLES
            else:
                # a local path: looked at here, also under Spark Connect (the lake's own server
                # runs on this machine); a folder whose first commit has not landed is no table
                cache[resolution] = delta.table_exists(self.spark, path)
        return cache[resolution]

    def resolution_for(self, bucket_s: int) -> str:
        """The coarsest table whose buckets tile ``bucket_s`` exactly: ``1h``, ``1m`` or ``raw``."""

        for name, width in sorted(ROLLUPS.items(), key=lambda kv: -kv[1]):
            if bucket_s >= width and bucket_s % width == 0 and self.is_delta(name):
                return name
        return RAW

    def _pending(self) -> bool:
        """A local raw table whose first commit is being written (``lake.delta.local_table_pending``)."""

        return not _is_uri(self.path) and delta.local_table_pending(self.path)

    # ---- frames
    def empty(self):
        return self.spark.createDataFrame([], SAMPLE_SCHEMA)

    def _read(self, paths: list[str]):
        return self.spark.read.schema(SAMPLE_SCHEMA).option("basePath", self.path).parquet(*paths).select(*COLUMNS)

    def window(self, start: _dt.datetime, end: _dt.datetime, cluster: str | None = None):
        """Samples with start <= ts < end (of ``cluster``, else the view's, else all clusters).

        A Delta table is read as its current snapshot; the window's date/hour predicate prunes
        it to the files of those hours (Delta's file list, no directory listing).  A lake from
        before Delta (bare Parquet hour directories) is read by listing only the hour
        directories of the window.  Either way the cost does not grow with the lake's history.
        """

        cluster = cluster if cluster is not None else self.cluster
        if self.is_delta():
            df = self.spark.read.format("delta").load(self.path).select(*COLUMNS)
            return incident_window(df, start, end, cluster=cluster, columns=COLUMNS)
        if _is_uri(self.path) and getattr(self.spark, "_jvm", None) is None:
            # Spark Connect cannot list a remote store from here: let the server prune partitions
            return incident_window(self.all(cluster), start, end, cluster=cluster, columns=COLUMNS)
        if self._pending():
            return self.empty()  # the first commit is being written: its files are no rows yet
        dirs = self.hour_dirs(start, end, cluster)
        if not dirs:
            return self.empty()
        return incident_window(self._read(dirs), start, end, cluster=cluster, columns=COLUMNS)

    def rollup(
        self,
        resolution: str,
        start: _dt.datetime,
        end: _dt.datetime,
        cluster: str | None = None,
        now: float | None = None,
        assume_seconds: bool = False,
    ):
        """Rows of the ``1m`` or ``1h`` rollup whose bucket starts in [start, end); None without
        that table.  ``start`` is taken down to the bucket it falls in.  An hour read gives the
        rows a ``seconds`` column (null) where the table was written before it existed, unless
        ``assume_seconds`` (no look at the tables' columns: a round trip each through Connect).

        The hour rollup holds closed hours only (``lake.rollups``): the newest
        ``lake.rollups.OPEN_HOURS`` hours (by ``now``, default the clock) come from the minute
        rollup, re-aggregated into hour rows on the fly, so a trend still reaches the last
        minute rolled up."""
        # no hour table yet (no hour has closed): the minutes can still answer an hour read
        if not self.is_delta(resolution) and not (resolution == "1h" and self.is_delta("1m")):
            return None
        width = ROLLUPS[resolution]
        s = _utc(start)
        s = _dt.datetime.fromtimestamp(int(s.timestamp()) // width * width, _dt.timezone.utc)
        e = _utc(end)
        cluster = cluster if cluster is not None else self.cluster

        def rows_of(name: str, a: _dt.datetime, b: _dt.datetime):
            keep = partition_predicate(a, b) & (F.col("bucket") >= ts_lit(a)) & (F.col("bucket") < ts_lit(b))
            if cluster is not None:
                keep = (F.col("cluster") == F.lit(cluster)) & keep
            return self.spark.read.format("delta").load(table_path(self.path, name)).filter(keep)

        cut = _dt.datetime.fromtimestamp(open_hours_start(time.time() if now is None else now), _dt.timezone.utc)
        if resolution != "1h" or e <= cut or not self.is_delta("1m"):
            return rows_of(resolution, s, e)

        recent = coarser_rollup(rows_of("1m", max(s, cut), e), width, assume_seconds=assume_seconds)
        if s >= cut or not self.is_delta("1h"):
            return recent
        hours = rows_of(resolution, s, cut)
        return (hours if assume_seconds else with_seconds(hours)).unionByName(recent)

    def all(self, cluster: str | None = None):
        """The whole lake (of ``cluster`` when given): for history-wide scans."""
        if not _is_uri(self.path) and (not os.path.isdir(self.path) or self._pending()):
            return self.empty()
        try:
            df = read_lake(self.spark, self.path)
        except Exception as exc:  # noqa: BLE001 - an empty or missing table is "no data", not an error
            if missing_table(exc):
                return self.empty()
            raise
        cluster = cluster if cluster is not None else self.cluster
        return df if cluster is None else df.filter(F.col("cluster") == F.lit(cluster))


#: Tables under a URI that a Spark Connect server said exist (:meth:`LakeView.is_delta`): a table
#: does not go away, so a process asks once; one not found yet is asked again on the next question.
_CONNECT_TABLES: set[str] = set()


def _session_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """Settings for an interactive lake session.  Incident-window queries shuffle little data
    through several stages; on a local master one shuffle partition per core keeps the
    per-task overhead down (8, the build_session default, was ~10-20% slower on 2 cores)."""
    out = dict(conf)
    if master.startswith("local"):
        cores = master[len("local[") : -1] if master.startswith("local[") else "1"
        if cores.isdigit():
            n = int(cores)
        else:  # local[*], local[*, retries]
            n = os.cpu_count() or 2
        out.setdefault("spark.sql.shuffle.partitions", str(max(1, n)))
    return out


#: Settings of a query session on a Spark Connect server.  A lake question is a few small jobs
#: over one window, and each new plan (its literals are the window's times) pays adaptive
#: re-planning again: it is planned once.  Whole-stage code generation stays on: it was switched
#: off here for a small lake once, but side by side at 30,000 partitions it made the window's URP
#: trend 0.45 -> 0.22 s and hot partitions 1.98 -> 1.67 s in a warm session; at 1,000 partitions,
#: and in a fresh session at either size, the two were within noise (medians of 3-4, 2 cores).
#: Per session: the ingest's sessions on the same server keep adaptive execution for their scans.
CONNECT_QUERY_CONF = {"spark.sql.adaptive.enabled": "false"}


def _local_connect_url(settings: KbotSettings) -> str | None:
    """The URL of this lake's running Connect server (``lake.connect``): its shared query session
    (``ServerInfo.query_url``), None when none runs."""
    try:
        return query_url(settings)
    except Exception:  # noqa: BLE001 - an unreadable state file means "no server", never a failure
        log.debug("no local Spark Connect server", exc_info=True)
        return None


def _unreadable(exc: BaseException) -> LakeUnavailable:
    """What the in-process reader's failure (delta-rs, DuckDB, Arrow, the store) tells a caller."""
    return LakeUnavailable(
        f"The metric lake's table could not be read: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    )


def _unavailable_cause(exc: BaseException) -> bool:
    """Exceptions that mean Spark itself is gone (not a bug in a query)."""
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(
        names
        & {
            "Py4JNetworkError",
            "ConnectionRefusedError",
            "ConnectionResetError",
            "BrokenPipeError",
            "SparkConnectGrpcException",
            "RetriesExceeded",
        }
    )


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


class LakeService:
    """A warm SparkSession over one lake, with an async, time-limited query API."""

    def __init__(
        self,
        path: str,
        master: str = "local[*]",
        cluster: str | None = None,
        *,
        spark=None,
        conf: Mapping[str, str] | None = None,
        query_timeout_s: float = DEFAULT_TIMEOUT_S,
        app_name: str = "kbot-lake",
        warm: bool | None = None,
        fallback_master: str | None = None,
        spark_log: Path | None = None,
    ):
        self.path = path
        # where an in-process Spark's start-up output goes (the console's KBOT_SPARK_LOG); None: stderr
        self.spark_log = spark_log
        self.master = master
        # a master chosen because the Connect server looked up; when it cannot be reached after
        # all, the service starts this one instead (an in-process session) rather than failing
        self.fallback_master = fallback_master
        self.cluster = cluster
        self.conf = dict(conf or {})
        self.query_timeout_s = float(query_timeout_s)
        self.app_name = app_name
        self._warm_choice = warm  # see the ``warm`` property
        self._spark = spark
        self._owns_session = spark is None
        self._state = NEW
        self._error: str | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._started_at: float | None = None
        self._startup_s: float | None = None
        self._warm_s: float | None = None
        self._queries = 0
        self._failures = 0
        self._timeouts = 0
        self._last_query_s: float | None = None
        self._readers: dict[str, WindowReader] = {}
        self._window_queries = 0
        self._window_failures = 0
        self._last_window_s: float | None = None

    @classmethod
    def from_settings(cls, settings: KbotSettings, **overrides: Any) -> "LakeService":
        """The lake the settings configure (validated where they were loaded: a wrong
        KBOT_LAKE_TIMEOUT_S was a SettingsError naming it there)."""
        layout = LakeLayout.from_settings(settings)
        master = (settings.kbot_spark_master or "").strip()
        fallback = None
        if not master:
            master, fallback = _local_connect_url(settings) or "local[*]", "local[*]"
            if master == fallback:
                fallback = None
        kwargs: dict[str, Any] = {
            "path": layout.table,
            "master": master,
            "fallback_master": fallback,
            "cluster": settings.kbot_lake_cluster,
            "query_timeout_s": settings.kbot_lake_timeout_s,
            "conf": parse_conf(settings.kbot_spark_conf or ""),
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    # ---- lifecycle
    @property
    def warm(self) -> bool:
        """Whether the start runs the lake's query paths once before the service is ready: the
        caller's choice, else yes for an in-process Spark (also the fallback from a Connect
        server that did not answer).  Warming from a Connect client would cost a one-shot
        question a few queries and gain nothing: the server's JVM is what warms up, and
        `kbot lake serve` warms it once."""
        if self._warm_choice is not None:
            return self._warm_choice
        return not self.master.startswith("sc://")

    @property
    def state(self) -> str:
        return self._state

    def start(self) -> "LakeService":
        """Start Spark and warm it up in a background thread; returns at once."""
        with self._lock:
            if self._state in (STARTING, READY):
                return self
            self._state, self._error = STARTING, None
            self._ready.clear()
            self._started_at = time.time()
            self._thread = threading.Thread(target=self._boot, name="kbot-lake-start", daemon=True)
            self._thread.start()
        return self

    def _boot(self) -> None:
        t0 = time.monotonic()
        try:
            if self._spark is None:
                self._spark = self._build()
                try:
                    self._spark.sparkContext.setLogLevel("WARN")
                except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
                    pass
            self._startup_s = time.monotonic() - t0
            if self.warm:
                t1 = time.monotonic()
                self._warm_up(self._spark)
                self._warm_s = time.monotonic() - t1
            self._state = READY
        except BaseException as exc:  # noqa: BLE001 - reported through status() and Unavailable
            self._error = _describe_start_error(exc, self.master)
            self._state = FAILED
            log.error("metric lake: Spark did not start: %s", self._error)
        finally:
            self._ready.set()

    def _build(self):
        try:
            conf = _session_conf(self.master, self.conf)
            if self.master.startswith("sc://"):
                conf = {**CONNECT_QUERY_CONF, **conf}
            spark = build_session(self.master, app_name=self.app_name, conf=conf, log_path=self.spark_log)
            if self.fallback_master is not None:
                spark.version  # noqa: B018 - a Connect session is lazy: this round trip proves the server answers
            return spark
        except Exception as exc:  # noqa: BLE001 - a vanished Connect server: fall back, say so
            if self.fallback_master is None:
                raise
            log.warning(
                "metric lake: the Spark Connect server %s did not answer (%s: %s); starting an "
                "in-process Spark (%s) instead",
                self.master,
                type(exc).__name__,
                " ".join(str(exc).split())[:200],
                self.fallback_master,
            )
            self.master, self.fallback_master = self.fallback_master, None
            return build_session(
                self.master, app_name=self.app_name, conf=_session_conf(self.master, self.conf), log_path=self.spark_log
            )

    def _warm_up(self, spark) -> None:
        """Run the code paths a first Spark question takes: list and read a window, aggregate,
        and bucket a metric's history (`history`, the Spark question a one-shot `kbot ask` is most
        often: through the Connect server's shared session it then finds that code compiled).  The
        incident window's questions need no warming: DuckDB answers them in process."""

        view = LakeView(spark, self.path, self.cluster)
        end = _dt.datetime.now(_dt.timezone.utc)
        q_history(view, end - _dt.timedelta(minutes=15), end, "LogEndOffset", None, None, None, 60)

    def wait_ready_sync(self, timeout: float | None = None) -> bool:
        """Block until started (or failed); True when ready."""
        if self._state == NEW:
            self.start()
        self._ready.wait(timeout)
        return self._state == READY

    async def wait_ready(self, timeout: float | None = None) -> bool:
        if self._state == NEW:
            self.start()
        if not self._ready.is_set():
            await asyncio.to_thread(self._ready.wait, timeout)
        return self._state == READY

    def stop(self) -> None:
        with self._lock:
            spark, owns = self._spark, self._owns_session
            self._state = STOPPED
        if spark is not None and owns:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - stopping is best effort
                log.debug("stopping Spark failed", exc_info=True)
            self._spark = None

    # ---- queries
    async def _session(self, budget: float):
        if self._state in (NEW, STARTING):
            await self.wait_ready(budget)
        if self._state == READY:
            return self._spark
        if self._state == STARTING:
            serve = (
                ""
                if self.master.startswith("sc://")
                else " `kbot lake serve` keeps one Spark warm for every process, so that a one-shot"
                " `kbot ask` does not start its own."
            )
            raise LakeUnavailable(
                f"The metric lake is still starting (Spark warms up at boot); ask again in a few seconds.{serve}"
            )
        if self._state == STOPPED:
            raise LakeUnavailable("The metric lake is stopped.")
        raise LakeUnavailable(f"The metric lake is unavailable: Spark did not start ({self._error}).")

    @property
    def readers(self) -> dict[str, WindowReader]:
        """The in-process readers of the lake's tables (``lake.embedded``) by resolution (raw,
        1m, 1h), made on first use."""
        with self._lock:
            if not self._readers:
                self._readers = {r: WindowReader(table_path(self.path, r), r) for r in (RAW, *ROLLUPS)}
            return self._readers

    async def ask_window(
        self,
        question: Question,
        start: _dt.datetime,
        end: _dt.datetime,
        *args: Any,
        timeout: float | None = None,
        cluster: str | None = None,
    ) -> dict[str, Any]:
        """``question`` (``window_queries``) over [start, end) of ``cluster`` (default the
        service's), answered in this process by DuckDB within ``timeout`` seconds.

        Spark plays no part: the answer comes while Spark is still starting or after it failed.
        Raises :class:`lake.embedded.TableNotFound` on a lake with nothing ingested yet,
        :class:`LakeTimeout` past the time limit (the DuckDB query is interrupted), and
        :class:`LakeUnavailable` when the table cannot be read."""
        budget = self.query_timeout_s if timeout is None else float(timeout)
        cluster = cluster if cluster is not None else self.cluster
        opened: list[Window] = []

        def work() -> dict[str, Any]:
            readers = self.readers
            rollups = {r: readers[r] for r in ROLLUPS}
            window = readers[RAW].open(start, end, cluster, question.metrics, rollups)
            opened.append(window)
            try:
                return question.answer(window, *args)
            finally:
                window.con.close()

        t0 = time.monotonic()
        self._window_queries += 1
        try:
            return await asyncio.wait_for(asyncio.to_thread(work), budget)
        except asyncio.TimeoutError:
            self._window_failures += 1
            for window in opened:
                window.con.interrupt()
            raise LakeTimeout(f"The metric lake's window did not answer within {budget:.0f} s.") from None
        except LakeUnavailable:
            self._window_failures += 1
            raise
        except READ_ERRORS as exc:
            self._window_failures += 1
            log.warning("metric lake: reading the window failed", exc_info=True)
            raise _unreadable(exc) from exc
        finally:
            self._last_window_s = time.monotonic() - t0

    async def newest_sample(
        self, now: _dt.datetime, hours: int, cluster: str | None = None, timeout: float | None = None
    ) -> _dt.datetime | None:
        """The lake's newest sample (of ``cluster``, default the service's) in the ``hours``
        before ``now``, read in process like :meth:`ask_window`; None without one, or on a lake
        with nothing ingested yet."""
        budget = self.query_timeout_s if timeout is None else float(timeout)
        cluster = cluster if cluster is not None else self.cluster
        try:
            return await asyncio.wait_for(asyncio.to_thread(self.readers[RAW].newest, now, hours, cluster), budget)
        except TableNotFound:
            return None
        except asyncio.TimeoutError:
            raise LakeTimeout(f"The metric lake did not say how fresh it is within {budget:.0f} s.") from None
        except READ_ERRORS as exc:
            raise _unreadable(exc) from exc

    async def collected(
        self, start: _dt.datetime, end: _dt.datetime, cluster: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """How much of [start, end) the lake holds and whether it holds anything older
        (``lake.embedded.collected``: from the tables' Delta logs, in process, without Spark)."""
        budget = self.query_timeout_s if timeout is None else float(timeout)
        cluster = cluster if cluster is not None else self.cluster
        try:
            return await asyncio.wait_for(asyncio.to_thread(collected, self.readers, start, end, cluster), budget)
        except asyncio.TimeoutError:
            raise LakeTimeout(f"The metric lake did not say how much it holds within {budget:.0f} s.") from None
        except READ_ERRORS as exc:
            raise _unreadable(exc) from exc

    async def changes(
        self, since_ms: int, kinds: tuple[str, ...] = (), name: str | None = None, cluster: str | None = None
    ) -> list[Change]:
        """The cluster's change events since ``since_ms`` (lake/changes.py), newest first, read in
        this process from the change table's Delta snapshot: no Spark, so they are there while
        Spark starts or after it failed."""
        return await asyncio.to_thread(
            read_changes, changes_table_of(self.path), since_ms, cluster or self.cluster, kinds, name
        )

    def view(self, cluster: str | None = None) -> LakeView:
        if self._spark is None:
            raise LakeUnavailable("The metric lake is not started.")
        return LakeView(self._spark, self.path, cluster if cluster is not None else self.cluster)

    async def query(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,
        cluster: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """``fn(view, *args, **kwargs)`` in a worker thread, within ``timeout`` seconds.

        ``fn`` should return plain Python data (collect inside it).  Raises
        :class:`lake.errors.LakeUnavailable` when Spark is not available, or
        :class:`lake.errors.LakeTimeout` when the query ran past ``timeout`` (its jobs are cancelled).
        """
        budget = self.query_timeout_s if timeout is None else float(timeout)
        t0 = time.monotonic()
        spark = await self._session(budget)
        remaining = max(0.1, budget - (time.monotonic() - t0))
        view = LakeView(spark, self.path, cluster if cluster is not None else self.cluster)
        tag = f"kbot-{uuid.uuid4().hex[:12]}"
        tags = _Tags(spark)
        finished = threading.Event()

        def work():
            tagged = tags.add(tag)
            try:
                return fn(view, *args, **kwargs)
            finally:
                if tagged:
                    tags.remove(tag)
                finished.set()

        self._queries += 1
        try:
            result = await asyncio.wait_for(asyncio.to_thread(work), remaining)
        except asyncio.TimeoutError:
            self._timeouts += 1
            self._failures += 1
            tags.cancel_until(tag, finished)
            raise LakeTimeout(
                f"The metric lake did not answer within {budget:.0f} s; the query was cancelled."
            ) from None
        except LakeUnavailable:
            self._failures += 1
            raise
        except Exception as exc:
            self._failures += 1
            if _unavailable_cause(exc):
                self._state, self._error = FAILED, f"Spark went away: {type(exc).__name__}: {exc}"
                raise LakeUnavailable(f"The metric lake is unavailable: {self._error}") from exc
            raise
        finally:
            self._last_query_s = time.monotonic() - t0
        return result

    # ---- status
    def status(self) -> dict:
        spark = self._spark
        version = None
        if spark is not None and self._state == READY:
            try:
                version = spark.version
            except Exception:  # noqa: BLE001
                version = None
        return {
            "state": self._state,
            "master": self.master,
            "path": self.path,
            "cluster": self.cluster,
            "spark_version": version,
            "started_at": (
                _dt.datetime.fromtimestamp(self._started_at, _dt.timezone.utc).isoformat(timespec="seconds")
                if self._started_at
                else None
            ),
            "startup_seconds": None if self._startup_s is None else round(self._startup_s, 2),
            "warmup_seconds": None if self._warm_s is None else round(self._warm_s, 2),
            "queries": self._queries,
            "failures": self._failures,
            "timeouts": self._timeouts,
            "last_query_seconds": None if self._last_query_s is None else round(self._last_query_s, 3),
            "query_timeout_s": self.query_timeout_s,
            "error": self._error,
            # the incident window's questions, answered in this process (lake.embedded)
            "window_engine": "duckdb (in process, over the Delta snapshot)",
            "window_queries": self._window_queries,
            "window_failures": self._window_failures,
            "last_window_seconds": None if self._last_window_s is None else round(self._last_window_s, 3),
        }


class _Tags:
    """Job tags of the query thread, and cancelling the jobs that carry one.

    Classic sessions tag jobs through the SparkContext (thread-local job tags:
    ``addJobTag`` / ``cancelJobsWithTag``; the session-level ``interruptTag`` of
    classic PySpark 4 did not match running jobs in our tests); Spark Connect
    through the session (``addTag`` / ``interruptTag``).
    """

    def __init__(self, spark):
        try:
            sc = spark.sparkContext  # raises on Spark Connect
            self._add, self._remove, self._cancel = sc.addJobTag, sc.removeJobTag, sc.cancelJobsWithTag
        except Exception:  # noqa: BLE001
            self._add, self._remove, self._cancel = spark.addTag, spark.removeTag, spark.interruptTag

    def add(self, tag: str) -> bool:
        try:
            self._add(tag)
            return True
        except Exception:  # noqa: BLE001 - no tags: the timeout still frees the caller
            return False

    def remove(self, tag: str) -> None:
        try:
            self._remove(tag)
        except Exception:  # noqa: BLE001
            pass

    def cancel_until(self, tag: str, finished: threading.Event, limit_s: float = 120.0) -> None:
        """Cancel the tag's jobs now and keep doing so until the query thread returns:
        a job that was still being planned at the timeout starts later and must not run on."""

        def loop():
            deadline = time.monotonic() + limit_s
            while not finished.is_set() and time.monotonic() < deadline:
                try:
                    self._cancel(tag)
                except Exception:  # noqa: BLE001 - best effort
                    log.debug("could not cancel Spark jobs tagged %s", tag, exc_info=True)
                finished.wait(0.5)

        threading.Thread(target=loop, name=f"kbot-lake-cancel-{tag}", daemon=True).start()


def _describe_start_error(exc: BaseException, master: str) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    if master.startswith("sc://") and isinstance(exc, ImportError):
        return f"Spark Connect ({master}) needs pyspark's connect extras (grpcio, pandas, pyarrow); {text}"
    if master.startswith("sc://") and "StatusCode.UNAVAILABLE" in text:
        why = "connection refused" if "Connection refused" in text else "unavailable"
        return (
            f"the Spark Connect server at {master} does not answer ({why}); start it with `kbot lake serve` "
            "(`kbot run` does), or point KBOT_SPARK_MASTER elsewhere"
        )
    if "JAVA_HOME" in text or "Java gateway process exited" in text:
        return f"Java is missing or broken (Spark needs a JDK 17+): {text}"
    return text if len(text) < 500 else text[:500] + "..."


def lake_from_settings(
    settings: KbotSettings, *, start: bool = True, warm: bool | None = None, spark_log: Path | None = None
) -> LakeService | None:
    """The bot's lake when one is configured, started (warming up in the background); else None.

    Configured means: KBOT_LAKE_URI or KBOT_LAKE_DIR is set, KBOT_LAKE=1, or the default lake
    is in use: its table (~/.kbot/lake/samples) exists, a collector has begun landing samples for
    it, or its Spark Connect server runs (``kbot run`` in another terminal, in its first minute,
    before the first ingest: the lake is young, not missing).  KBOT_LAKE=0 turns it off.
    ``warm`` (see :class:`LakeService`): False for a process that asks one question, whose own
    query is the first one anyway. ``spark_log``: see :class:`LakeService` (the console's).
    """

    if settings.kbot_lake is False:
        return None
    configured = bool(settings.kbot_lake_uri or settings.kbot_lake_dir or settings.kbot_lake)
    layout = LakeLayout.from_settings(settings)
    if (
        not configured
        and not os.path.isdir(layout.table)
        and not layout.landing.is_dir()
        and _local_connect_url(settings) is None
    ):
        return None
    lake = LakeService.from_settings(settings, warm=warm, spark_log=spark_log)
    return lake.start() if start else lake


# --------------------------------------------------------------------------- the warm Connect server


def warm_up(url: str, table: str, timeout: float = 120.0) -> float:
    """Run the lake's first-question code paths once through the Connect server at ``url``
    (reading the table, a window query, the aggregation), so the first user's question finds its
    code generated and the table's snapshot cached.  Returns the seconds it took."""

    t0 = time.monotonic()
    svc = LakeService(table, master=url, warm=True, app_name="kbot-connect-warmup")
    try:
        if not svc.wait_ready_sync(timeout):
            raise ConnectServerError(f"warming the Spark Connect server up failed: {svc.status()['error']}")
    finally:
        svc.stop()
    return time.monotonic() - t0


def ensure_server(
    settings: KbotSettings,
    port: int | None = None,
    master: str | None = None,
    *,
    lake_dir: str | os.PathLike[str] | None = None,
    table: str | None = None,
    conf: Mapping[str, str] | None = None,
    warm: bool = True,
    timeout: float = 180.0,
):
    """What ``kbot run`` and ``kbot lake serve`` call: this lake's Connect server (lake/connect.py)
    running and warm, started when it is not (``started`` True then: the caller that started it
    stops it on exit with ``lake.connect.stop_server``).  ``warm`` runs the lake's query paths
    once through it. Here rather than in lake/connect.py: warming needs this module's LakeService,
    and this module asks lake/connect.py whether a server runs - one direction only."""

    info = start_server(settings, port, master, lake_dir=lake_dir, conf=conf, timeout=timeout)
    if warm:
        layout = LakeLayout.from_settings(settings, lake_dir=None if lake_dir is None else str(lake_dir), table=table)
        # in the session the bot's processes will query in: its generated code is what they reuse
        info.warm_s = round(warm_up(info.query_url, layout.table, timeout), 2)
    return info
