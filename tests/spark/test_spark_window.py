import contextlib
import datetime as dt
import io

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lake.schema import PARTITION_COLUMNS, partition_values
from spark_queries.schema import SAMPLE_SCHEMA, partition_columns, read_lake
from spark_queries.window import incident_window

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def t(day, hour, minute=0, second=0):
    return dt.datetime(2024, 5, day, hour, minute, second, tzinfo=UTC)


def rows():
    def r(ts, v, cluster="c1"):
        date, hour = partition_values(ts)
        return (ts, 1, "UnderReplicatedPartitions", None, None, None, float(v), cluster, date, hour)

    return [
        r(t(1, 23, 30), 1),
        r(t(2, 0, 10), 2),
        r(t(2, 0, 59, 59), 3),
        r(t(2, 1, 0), 4),
        r(t(2, 2, 30), 5),
        r(t(2, 0, 20), 6, cluster="c2"),
    ]


def test_window_across_midnight_end_exclusive(lake_df):
    out = incident_window(lake_df(rows()), t(1, 23, 45), t(2, 1, 0), cluster="c1")
    assertDataFrameEqual(out.select("value", "date", "hour"), [Row(2.0, "2024-05-02", 0), Row(3.0, "2024-05-02", 0)])


def test_naive_bounds_are_utc_and_strings_work(lake_df):
    df = lake_df(rows())
    naive = incident_window(df, dt.datetime(2024, 5, 2, 1), dt.datetime(2024, 5, 2, 3))
    iso = incident_window(df, "2024-05-02T03:00:00+02:00", "2024-05-02T05:00:00+02:00")
    assertDataFrameEqual(naive.select("value"), [Row(4.0), Row(5.0)])
    assertDataFrameEqual(iso.select("value"), [Row(4.0), Row(5.0)])


def test_empty_window_rejected(lake_df):
    with pytest.raises(ValueError):
        incident_window(lake_df(rows()), t(2, 1), t(2, 1))


def test_partition_columns_ignore_session_time_zone(spark):
    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.createDataFrame([(t(1, 23, 30),), (t(2, 0, 0),), (t(2, 13, 5),)], "ts timestamp")
        date, hour = partition_columns("ts")
        got = df.select(date.alias("date"), hour.alias("hour"))
        assertDataFrameEqual(got, [Row("2024-05-01", 23), Row("2024-05-02", 0), Row("2024-05-02", 13)])
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


def test_partition_pruning_in_plan(spark, lake_df, tmp_path):
    path = str(tmp_path / "lake")
    lake_df(rows()).write.partitionBy(*PARTITION_COLUMNS).parquet(path)
    lake = read_lake(spark, path)
    # date stays a string (no partition type inference), columns in schema order
    assert lake.dtypes == [(f.name, f.dataType.simpleString()) for f in SAMPLE_SCHEMA.fields]

    out = incident_window(lake, t(1, 23, 45), t(2, 1, 0), cluster="c1")
    buf = io.StringIO()
    old = spark.conf.get("spark.sql.maxMetadataStringLength")
    spark.conf.set("spark.sql.maxMetadataStringLength", "10000")  # do not truncate the scan line
    try:
        with contextlib.redirect_stdout(buf):
            out.explain()
    finally:
        spark.conf.set("spark.sql.maxMetadataStringLength", old)
    plan = buf.getvalue()
    scan = [line for line in plan.splitlines() if "FileScan parquet" in line]
    assert scan, plan
    filters = scan[0].split("PartitionFilters: [", 1)[1].split("]", 1)[0]
    for col in ("cluster", "date", "hour"):
        assert col in filters, plan
    assert "PushedFilters: [" in scan[0] and "ts" in scan[0].split("PushedFilters: [", 1)[1]
    assertDataFrameEqual(out.select("value"), [Row(2.0), Row(3.0)])

    # only the one matching hour directory is listed
    files = out.select(F.input_file_name().alias("f")).distinct().collect()
    assert len(files) == 1 and "cluster=c1/date=2024-05-02/hour=0/" in files[0].f
