"""The lake's tables as Spark sees them: the declared Spark schemas of the samples and of the
rollups, the UTC partition columns as Spark Columns, and the reader. The names, the partitioning
and the time rules are ``lake.schema`` (pure Python, so the embedded reader and the commands never
load Spark); the columns here are those names, checked at import."""

from __future__ import annotations

import datetime as _dt
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lake.schema import COLUMNS, DATA_COLUMNS, ROLLUP_COLUMNS, is_delta_dir

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

#: The rollup tables' columns (both resolutions): bucket, the series, the aggregates, partitions.
ROLLUP_SCHEMA = StructType(
    [
        StructField("bucket", TimestampType(), False),
        StructField("broker", IntegerType(), False),
        StructField("metric", StringType(), False),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("labels", MapType(StringType(), StringType(), True), True),
        StructField("min", DoubleType(), True),
        StructField("max", DoubleType(), True),
        StructField("sum", DoubleType(), True),
        StructField("count", LongType(), False),
        StructField("last", DoubleType(), True),
        StructField("last_ts", TimestampType(), True),
        StructField("inc", DoubleType(), True),
        StructField("growth", DoubleType(), True),
        StructField("resets", LongType(), True),
        StructField("seconds", DoubleType(), True),
        StructField("cluster", StringType(), False),
        StructField("date", StringType(), False),
        StructField("hour", IntegerType(), False),
    ]
)

if DATA_SCHEMA.fieldNames() != DATA_COLUMNS or SAMPLE_SCHEMA.fieldNames() != COLUMNS:
    raise AssertionError("spark_queries.schema: the sample schema's columns differ from lake.schema's")
if ROLLUP_SCHEMA.fieldNames() != ROLLUP_COLUMNS:
    raise AssertionError("spark_queries.schema: the rollup schema's columns differ from lake.schema's")


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


def read_lake(spark: SparkSession, path: str | Iterable[str]) -> DataFrame:
    """Read the lake: a Delta table as Delta, else (a lake written before Delta, or a set of
    hour directories) as Parquet with the declared schema (keeps ``date`` a string).

    ``basePath`` is set so partition columns are still discovered when a
    caller passes sub-directories.
    """
    paths = [path] if isinstance(path, str) else list(path)
    if len(paths) == 1 and is_delta_dir(paths[0]):
        return spark.read.format("delta").load(paths[0]).select(*COLUMNS)
    reader = spark.read.schema(SAMPLE_SCHEMA)
    if len(paths) == 1:
        reader = reader.option("basePath", paths[0])
    return reader.parquet(*paths).select(*COLUMNS)
