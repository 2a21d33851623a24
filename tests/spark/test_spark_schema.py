import datetime as dt

import pytest
from pyspark.sql import Row
from pyspark.testing import assertDataFrameEqual

from lake.schema import (
    COLUMNS,
    PARTITION_COLUMNS,
    epoch_micros,
    escape_path_name,
    from_spark,
    partition_path,
    partition_values,
    to_utc,
)
from spark_queries.schema import SAMPLE_SCHEMA, read_lake
from tools import synthetic as S

UTC = dt.timezone.utc


def test_partition_values_are_utc():
    assert partition_values(dt.datetime(2024, 5, 1, 23, 30, tzinfo=UTC)) == ("2024-05-01", 23)
    # 01:30 at +02:00 is 23:30 UTC the day before
    assert partition_values("2024-05-02T01:30:00+02:00") == ("2024-05-01", 23)
    assert partition_values(dt.datetime(2024, 5, 2, 0, 0)) == ("2024-05-02", 0)  # naive = UTC
    assert epoch_micros("1970-01-01T00:00:01Z") == 1_000_000
    assert to_utc("2024-05-01T12:00:00+02:00") == dt.datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_one_rule_for_naive_times_and_one_for_what_pyspark_returns(spark):
    """A naive datetime is UTC to the lake; a naive datetime *from PySpark* is the process' local
    time, undone once by from_spark: both land on the same instant."""
    t = dt.datetime(2024, 5, 1, 10, 0, 30, tzinfo=UTC)
    assert to_utc(t.replace(tzinfo=None)) == t
    got = spark.createDataFrame([(t,)], "ts timestamp").first()["ts"]
    assert got.tzinfo is None and from_spark(got) == t
    assert from_spark(None) is None


def test_schema_shape():
    assert COLUMNS == ["ts", "broker", "metric", "topic", "partition", "labels", "value", "cluster", "date", "hour"]
    assert PARTITION_COLUMNS == ["cluster", "date", "hour"]
    assert SAMPLE_SCHEMA["labels"].dataType.simpleString() == "map<string,string>"


def test_escape_path_name():
    assert escape_path_name("prod-eu_1.x") == "prod-eu_1.x"
    assert escape_path_name("a/b:c=d%") == "a%2Fb%3Ac%3Dd%25"
    assert partition_path("/l/", "a/b", "2024-05-01", 3) == "/l/cluster=a%2Fb/date=2024-05-01/hour=3"


@pytest.mark.spark
def test_hand_written_partition_dirs_read_back_like_spark_writes_them(spark, tmp_path):
    odd = "prod/eu:1=x'y"
    path = str(tmp_path / "lake")
    S.generate(
        path,
        cluster=odd,
        start="2024-05-01T10:00:00Z",
        hours=1,
        brokers=1,
        topics=1,
        partitions_per_topic=1,
        resolution_s=600,
        metrics=["ActiveControllerCount"],
        spark=spark,
    )
    df = read_lake(spark, path)
    assertDataFrameEqual(
        df.groupBy("cluster", "date", "hour", "metric").count(),
        [Row(odd, "2024-05-01", 10, "ActiveControllerCount", 6)],
    )
    # Spark's own partitioned writer picks the same directory name
    spark_path = str(tmp_path / "spark")
    df.write.partitionBy(*PARTITION_COLUMNS).parquet(spark_path)
    assert (tmp_path / "spark" / partition_path("", odd, "2024-05-01", 10).lstrip("/")).is_dir()
