"""The metric lake: one long/narrow Parquet table of metric samples.

Layout
------
Every sample of every metric is one row.  The table is Hive-partitioned::

    <root>/cluster=<cluster>/date=<yyyy-MM-dd>/hour=<0..23>/part-*.parquet

so that a query for an incident window (a few hours on one cluster) only opens
the files of those hours (Parquet partition pruning, see
``spark_queries.window.incident_window``).  ``date`` and ``hour`` are derived
from ``ts`` in **UTC** (never the session or machine time zone), with
:func:`partition_values` (Python) or :func:`partition_columns` (Spark Column).

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

Reading
-------
Read with an explicit schema (:func:`read_lake`): otherwise Spark's partition
type inference turns ``date=2024-05-01`` into a DateType column.
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: Hive partition columns, in directory order.
PARTITION_COLUMNS: list[str] = ["cluster", "date", "hour"]

#: Columns stored inside the Parquet files (everything but the partition columns).
DATA_SCHEMA = StructType(
    [
        StructField("ts", TimestampType(), False),
        StructField("broker", IntegerType(), False),
        StructField("metric", StringType(), False),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("labels", MapType(StringType(), StringType(), True), True),
        StructField("value", DoubleType(), False),
    ]
)

#: The table as queries see it: the data columns, then the partition columns
#: (the order Spark gives when it reads the partitioned directory tree).
SAMPLE_SCHEMA = StructType(
    list(DATA_SCHEMA.fields)
    + [
        StructField("cluster", StringType(), False),
        StructField("date", StringType(), False),
        StructField("hour", IntegerType(), False),
    ]
)

COLUMNS: list[str] = SAMPLE_SCHEMA.fieldNames()

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


def epoch_micros(ts: _dt.datetime | str) -> int:
    """Microseconds since the epoch of a (UTC-normalised) datetime."""
    delta = to_utc(ts) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def partition_values(ts: _dt.datetime | str) -> tuple[str, int]:
    """``(date, hour)`` partition values of a timestamp, in UTC. Pure Python."""
    u = to_utc(ts)
    return u.strftime("%Y-%m-%d"), u.hour


def partition_columns(ts: Column | str = "ts") -> tuple[Column, Column]:
    """``(date, hour)`` as Spark Columns computed from ``ts`` in UTC.

    Works from epoch seconds so the result does not depend on
    ``spark.sql.session.timeZone`` (``date_format``/``hour`` would).
    """
    secs = F.unix_seconds(F.col(ts) if isinstance(ts, str) else ts)
    days = F.floor(secs / F.lit(86_400)).cast("int")
    date = F.date_format(F.date_add(F.lit(_dt.date(1970, 1, 1)), days), "yyyy-MM-dd")
    hour = F.pmod(F.floor(secs / F.lit(3_600)), F.lit(24)).cast("int")
    return date, hour


def with_partition_columns(df: DataFrame) -> DataFrame:
    """Add/overwrite ``date`` and ``hour`` from ``ts`` (UTC)."""
    date, hour = partition_columns("ts")
    return df.withColumn("date", date).withColumn("hour", hour)


# Characters Spark/Hive escape in partition directory names (as %XX),
# taken from ExternalCatalogUtils.escapePathName.
_PATH_ESCAPE = set(chr(c) for c in range(0x00, 0x20)) | set("\"#%'*/:=?[\\]^{\x7f")


def escape_path_name(value: str) -> str:
    """Escape a partition value the way Spark does when writing ``col=value`` dirs."""
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPE else c for c in value)


def partition_path(root: str, cluster: str, date: str, hour: int) -> str:
    """Directory of one lake partition (for writers that write an hour at a time)."""
    return f"{root.rstrip('/')}/cluster={escape_path_name(cluster)}/date={date}/hour={int(hour)}"


def read_lake(spark: SparkSession, path: str | Iterable[str]) -> DataFrame:
    """Read the lake with its declared schema (keeps ``date`` a string).

    ``basePath`` is set so partition columns are still discovered when a
    caller passes sub-directories.
    """
    paths = [path] if isinstance(path, str) else list(path)
    reader = spark.read.schema(SAMPLE_SCHEMA)
    if len(paths) == 1:
        reader = reader.option("basePath", paths[0])
    return reader.parquet(*paths).select(*COLUMNS)
