"""The metric lake: one long/narrow Parquet table of metric samples.

Layout
------
Every sample of every metric is one row.  The table is Hive-partitioned::

    <root>/cluster=<cluster>/date=<yyyy-MM-dd>/hour=<0..23>/part-*.parquet

so that a query for an incident window (a few hours on one cluster) only opens
the files of those hours (Parquet partition pruning, see
``spark_queries.window.incident_window``).  ``date`` and ``hour`` are derived
from ``ts`` in **UTC** (never the session or machine time zone), with
:func:`partition_values` (Python) or ``spark_queries.schema.partition_columns`` (Spark Column).

Columns
-------
``ts``         timestamp   sample time, UTC.  Stored as Parquet INT64
                           TIMESTAMP_MICROS (set ``spark.sql.parquet.outputTimestampType``).
``broker``     int         Kafka node id that reported the sample; ``-1`` for
                           cluster-wide or client-side series (consumer lag,
                           committed offsets).
``metric``     string      the Kafka metric name as the runbook names it (the
                           MBean ``name=`` part), e.g. ``UnderReplicatedPartitions``,
                           ``IsrShrinksPerSec``, ``LogEndOffset``.  See :data:`METRICS`.
``topic``      string?     topic of per-partition series, else null.
``partition``  int?        partition of per-partition series, else null.
``labels``     map<string,string>?  anything else that identifies the series;
                           null when there is nothing.  Keys in use:
                           ``request`` (RequestQueueTimeMs: ``Produce``,
                           ``FetchConsumer``, ``FetchFollower``, ...),
                           ``quantile`` (``0.50``, ``0.99``, ``mean``, ...),
                           ``group`` (consumer group of CommittedOffset / ConsumerLag).
``value``      double      the sample value (see "Counters" and "Units").
``cluster``    string      cluster name (partition column).
``date``       string      ``yyyy-MM-dd`` of ``ts`` in UTC (partition column).
``hour``       int         hour of day of ``ts`` in UTC, 0..23 (partition column).

A series is identified by (cluster, broker, metric, topic, partition, labels).

Counters
--------
The Prometheus JMX exporter exports Kafka's ``*PerSec`` meters (``IsrShrinksPerSec``,
``IsrExpandsPerSec``, ``BytesInPerSec``, ...) as their cumulative ``Count``.  The
lake stores that **raw cumulative value** rather than a pre-computed rate, because

* a rate fixed at ingest time bakes in one averaging interval, while the
  queries want the increase over exactly the incident window;
* the raw counter keeps counter resets visible (the value drops when a broker
  restarts), which is itself evidence (a broker bounced), and a pre-computed
  rate would either hide it or show a huge negative spike.

Queries derive increments with a window ``lag`` over each series ordered by
``ts``; a decrease means the counter restarted from 0, so the increment for that
step is the new value itself (Prometheus ``increase()`` semantics).  See
``spark_queries._common.with_increments``.  ``LogEndOffset`` and ``Size`` are
cumulative too (offsets and bytes), treated the same way.  Everything else is a
gauge sampled as is.

Units
-----
* ``RequestHandlerAvgIdlePercent``: a fraction 0..1 (the meter's one-minute
  rate, which Kafka reports as a fraction despite the name); < 0.3 = saturated.
* ``RequestQueueTimeMs``: milliseconds, one series per ``request`` and ``quantile``.
* ``LogEndOffset`` / ``CommittedOffset`` / ``ConsumerLag`` / ``LastStableOffsetLag``:
  records (offsets).  ``Size``: bytes.
* ``CommittedOffset`` and ``ConsumerLag`` are written per observed commit
  (``ts`` = commit time, ``broker`` = -1, ``labels.group`` = the group), the
  way Burrow consumes ``__consumer_offsets``; ``ConsumerLag`` at that ``ts`` is
  the partition's log end offset minus the committed offset.

Tables (Delta Lake)
-------------------
The samples are a Delta Lake table at the lake's URI (``<table>``), Hive-style partitioned as
above.  Two rollup tables sit next to it, maintained by the ingest (``lake.rollups``):

``<table>_1m``   one row per series and minute (partitioned cluster/date/hour)
``<table>_1h``   one row per series and closed hour (partitioned cluster/date)

with :data:`ROLLUP_COLUMNS` (Spark types: ``spark_queries.schema.ROLLUP_SCHEMA``): ``bucket`` (start of the minute/hour), the series columns, then
``min``, ``max``, ``sum``, ``count`` (of the samples in the bucket; mean = sum / count),
``last`` and ``last_ts`` (the bucket's newest sample), ``inc`` (the counter increase over the
bucket, reset-aware as above: the step from the previous sample, even one in the previous
bucket, belongs to the bucket of the later sample), ``growth`` (the sum of the positive steps:
LogEndOffset/Size growth, where a drop is a truncation or deleted segments, not a restart),
``resets`` and ``seconds`` (how long those steps span: the time the bucket was seen).  A rate
over a bucket is ``inc / seconds``: a bucket seen in part (the one still filling, a series'
first, one after a gap of more than ``STALE_S``) is not diluted over its whole width.  Tables
written before ``seconds`` existed gain it on their next rollup write (Delta ``mergeSchema``);
their older rows hold null there, and readers take such a row as seen for its whole width.

Reading
-------
Read with an explicit schema (``spark_queries.schema.read_lake``): otherwise Spark's partition
type inference turns ``date=2024-05-01`` into a DateType column.

Time
----
One rule for naive datetimes everywhere in the lake: **a naive datetime is UTC**
(:func:`to_utc`).  PySpark is the one exception it cannot change: ``collect()`` hands a
TimestampType value back as a naive datetime in the *process'* local time; such values are
converted once, where rows leave Spark, with :func:`from_spark` (see ``lake.queries``).

Spark
-----
This module is pure Python: the embedded reader, the window's questions and the commands import it
without loading Spark.  The Spark side (the declared schemas, the partition columns as Spark
Columns, the reader) is ``spark_queries.schema``.
"""

from __future__ import annotations

import datetime as _dt
import os

#: Hive partition columns, in directory order.
PARTITION_COLUMNS: list[str] = ["cluster", "date", "hour"]

#: Columns stored inside the Parquet files (everything but the partition columns), in file order.
DATA_COLUMNS: list[str] = ["ts", "broker", "metric", "topic", "partition", "labels", "value"]
#: The table as queries see it: the data columns, then the partition columns (the order Spark
#: gives when it reads the partitioned directory tree). The Spark types: ``spark_queries.schema``.
COLUMNS: list[str] = DATA_COLUMNS + PARTITION_COLUMNS

#: Metric names the queries and the synthetic generator use.
METRICS: dict[str, str] = {
    "UnderReplicatedPartitions": "gauge, per broker (reported by partition leaders)",
    "IsrShrinksPerSec": "cumulative counter, per broker",
    "IsrExpandsPerSec": "cumulative counter, per broker",
    "LogEndOffset": "cumulative offset, per broker/topic/partition (each replica reports its own)",
    "Size": "bytes on disk, per broker/topic/partition replica",
    "LastStableOffsetLag": "gauge, per topic/partition (leader)",
    "PartitionsWithLateTransactionsCount": "gauge, per broker",
    "RequestHandlerAvgIdlePercent": "gauge 0..1, per broker",
    "RequestQueueTimeMs": "gauge ms, per broker, labels request + quantile",
    "UnderMinIsrPartitionCount": "gauge, per broker",
    "AtMinIsrPartitionCount": "gauge, per broker",
    "OfflinePartitionsCount": "gauge, active controller",
    "OfflineReplicaCount": "gauge, active controller",
    "ActiveControllerCount": "gauge 0/1, per controller node",
    "CommittedOffset": "offset per commit, broker -1, labels group, per topic/partition",
    "ConsumerLag": "records per commit, broker -1, labels group, per topic/partition",
}

#: Label keys in use.
LABEL_REQUEST = "request"
LABEL_QUANTILE = "quantile"
LABEL_GROUP = "group"

CLUSTER_WIDE_BROKER = -1

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def to_utc(ts: _dt.datetime | str) -> _dt.datetime:
    """Normalise a datetime (or ISO-8601 string) to an aware UTC datetime.

    Naive datetimes are taken as UTC (the lake never uses local time).
    """
    if isinstance(ts, str):
        ts = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if not isinstance(ts, _dt.datetime):
        raise TypeError(f"expected datetime or ISO string, got {type(ts).__name__}")
    if ts.tzinfo is None:
        return ts.replace(tzinfo=_dt.timezone.utc)
    return ts.astimezone(_dt.timezone.utc)


def from_spark(value: _dt.datetime | None) -> _dt.datetime | None:
    """A timestamp as PySpark's ``collect()`` returns it (naive, the process' local time) -> aware UTC.

    Not :func:`to_utc`: that one reads a naive datetime as UTC, the lake's own rule; this one
    undoes PySpark's conversion to local time, and is used only on values coming out of Spark.
    """
    if value is None:
        return None
    return value.astimezone(_dt.timezone.utc)  # naive -> local time for astimezone(), as PySpark made it


def epoch_micros(ts: _dt.datetime | str) -> int:
    """Microseconds since the epoch of a (UTC-normalised) datetime."""
    delta = to_utc(ts) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def partition_values(ts: _dt.datetime | str) -> tuple[str, int]:
    """``(date, hour)`` partition values of a timestamp, in UTC. Pure Python."""
    u = to_utc(ts)
    return u.strftime("%Y-%m-%d"), u.hour


# Characters Spark/Hive escape in partition directory names (as %XX),
# taken from ExternalCatalogUtils.escapePathName.
_PATH_ESCAPE = set(chr(c) for c in range(0x00, 0x20)) | set("\"#%'*/:=?[\\]^{\x7f")


def escape_path_name(value: str) -> str:
    """Escape a partition value the way Spark does when writing ``col=value`` dirs."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPE else c for c in value)


def partition_path(root: str, cluster: str, date: str, hour: int) -> str:
    """Directory of one lake partition (for writers that write an hour at a time)."""
    return f"{root.rstrip('/')}/cluster={escape_path_name(cluster)}/date={date}/hour={int(hour)}"


#: A counter's step counts only from a sample at most this many seconds older: Prometheus's
#: lookback.  Older, and the series starts afresh (a gap, not growth): in the minute rollup
#: (``spark_queries.rollup.minute_rollup``), in the ranking of hot partitions, and in how far back
#: and forward an incremental rollup run reads (``lake.rollups``).
STALE_S = 300
#: Rollup resolutions: name -> bucket width in seconds (coarsest last).
ROLLUPS: dict[str, int] = {"1m": 60, "1h": 3600}
RAW = "raw"
#: How an answer names the table it read (both history engines).
RESOLUTION_NAMES: dict[str, str] = {RAW: "raw samples", "1m": "1-minute rollups", "1h": "1-hour rollups"}
#: Readers take this many newest hours (by the wall clock) from the minute rollup: an hour is
#: closed STALE_S after it ends and written at the next rollup run (``lake.rollups``), well
#: within the next hour.  Here, in the leaf, because both history engines read it (Spark's
#: ``lake.service.LakeView.rollup`` and the in-process ``window_queries.history``).
OPEN_HOURS = 2


def open_hours_start(now: float) -> int:
    """Epoch seconds of the first hour readers take from the minute rollup."""
    return int(now) // 3600 * 3600 - (OPEN_HOURS - 1) * 3600


#: The rollup tables' columns (both resolutions): bucket, the series, the aggregates, partitions.
ROLLUP_COLUMNS: list[str] = [
    "bucket",
    "broker",
    "metric",
    "topic",
    "partition",
    "labels",
    "min",
    "max",
    "sum",
    "count",
    "last",
    "last_ts",
    "inc",
    "growth",
    "resets",
    "seconds",
    *PARTITION_COLUMNS,
]

#: Partition columns of each rollup table (an hour table has 24 rows per series and day: one
#: directory per day keeps its files from being tiny).
ROLLUP_PARTITIONS: dict[str, list[str]] = {"1m": ["cluster", "date", "hour"], "1h": ["cluster", "date"]}


def table_path(table: str, resolution: str = RAW) -> str:
    """Location of the raw table (``raw``) or of a rollup table (``1m``, ``1h``) next to it."""
    if resolution == RAW:
        return table
    if resolution not in ROLLUPS:
        raise ValueError(f"unknown resolution {resolution!r}; one of {[RAW, *ROLLUPS]}")
    return f"{table.rstrip('/')}_{resolution}"


def is_delta_dir(path: str) -> bool:
    """True for a local Delta table (has ``_delta_log``).  URIs are taken to be Delta tables."""
    if "://" in path and not path.startswith("file://"):
        return True
    return os.path.isdir(os.path.join(path.removeprefix("file://"), "_delta_log"))
