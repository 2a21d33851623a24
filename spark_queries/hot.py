"""Hot partitions: write rate per topic-partition and how skewed it is.

Every replica's broker reports its own ``LogEndOffset`` (and ``Size``) for the
partition, so one partition has up to replication-factor series.  Per series
we take the growth over the window (sum of positive steps: a drop in LEO is a
truncation and a drop in Size is retention or compaction deleting segments,
neither of which is "negative writing") divided by the series' time span.
The partition's rate is the max over its replicas: followers trail the
leader, and a replica that was offline part of the window under-counts.

``leader_broker`` is a **heuristic**.  Followers fetch from the leader, so at
any instant they are at or behind its LEO: we pick the replica that had the
highest LEO at the most sample instants (``ts`` shared by the replicas' samples),
then the highest last LEO, then the lowest broker id.  A caught-up follower
ties with the leader now and then but not at every instant; when scrapes of
different brokers are not aligned each replica "wins" its own instants and
the choice falls back to the highest last LEO, which can name a follower that
happened to be scraped later.  Leadership moving during the window is not
modelled (the replica that led longest wins).  Use the cluster's metadata
when the true leader matters.

``skew`` is the partition's rate divided by the median rate of its topic's
partitions (null when that median is 0): a hot key shows up as one partition
with skew >> 1.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_queries._common import only_metrics

LEO = "LogEndOffset"
SIZE = "Size"


def _replica_growth(df: DataFrame, metric: str) -> DataFrame:
    """Per (cluster, topic, partition, broker): growth per second, last value, and
    ``wins``: at how many of its instants this replica had the partition's highest value."""
    s = only_metrics(df, metric).filter(F.col("topic").isNotNull() & F.col("partition").isNotNull())
    key = ["cluster", "topic", "partition", "broker"]
    w = Window.partitionBy(*key).orderBy("ts")
    step = F.greatest(F.col("value") - F.lag("value").over(w), F.lit(0.0))
    at_top = F.col("value") >= F.max("value").over(Window.partitionBy("cluster", "topic", "partition", "ts"))
    s = s.withColumn("step", step).withColumn("at_top", at_top)
    elapsed = F.unix_micros(F.max("ts")) - F.unix_micros(F.min("ts"))
    return s.groupBy(*key).agg(
        F.coalesce(F.sum("step"), F.lit(0.0)).alias("growth"),
        (elapsed / F.lit(1e6)).alias("elapsed_s"),
        F.max_by("value", "ts").alias("last_value"),
        F.count_if("at_top").alias("wins"),
    ).withColumn(
        "per_sec", F.when(F.col("elapsed_s") > 0, F.col("growth") / F.col("elapsed_s"))
    )


def hot_partitions(df: DataFrame, topic: str | None = None, top: int | None = None) -> DataFrame:
    """Rank topic-partitions by records/s (LogEndOffset growth), hottest first.

    Columns: cluster, topic, partition, leader_broker, replicas (brokers that
    reported LEO), records_per_sec, bytes_per_sec (Size growth; null without
    Size samples), topic_median_rate, skew, rank (1 = hottest in the cluster;
    ties broken by bytes_per_sec, topic, partition).  ``topic`` restricts to
    one topic (compared as a literal value); ``top`` keeps ranks <= top.
    """
    if topic is not None:
        df = df.filter(F.col("topic") == F.lit(topic))
    part = ["cluster", "topic", "partition"]
    leo = (
        _replica_growth(df, LEO)
        .groupBy(*part)
        .agg(
            F.max("per_sec").alias("records_per_sec"),
            # most instants at the top, then highest last LEO, then lowest broker id
            F.max_by("broker", F.struct("wins", "last_value", (-F.col("broker")).alias("nb"))).alias(
                "leader_broker"
            ),
            F.count("*").alias("replicas"),
        )
    )
    size = _replica_growth(df, SIZE).groupBy(*part).agg(F.max("per_sec").alias("bytes_per_sec"))
    parts = leo.join(size, on=part, how="left")
    medians = parts.groupBy("cluster", "topic").agg(F.median("records_per_sec").alias("topic_median_rate"))
    parts = parts.join(medians, on=["cluster", "topic"], how="left")
    skew = F.when(F.col("topic_median_rate") > 0, F.col("records_per_sec") / F.col("topic_median_rate"))
    rank = F.row_number().over(
        Window.partitionBy("cluster").orderBy(
            F.col("records_per_sec").desc_nulls_last(),
            F.col("bytes_per_sec").desc_nulls_last(),
            "topic",
            "partition",
        )
    )
    out = parts.select(
        *part,
        "leader_broker",
        "replicas",
        "records_per_sec",
        "bytes_per_sec",
        "topic_median_rate",
        skew.alias("skew"),
        rank.alias("rank"),
    )
    if top is not None:
        out = out.filter(F.col("rank") <= F.lit(int(top)))
    return out.orderBy("cluster", "rank")
