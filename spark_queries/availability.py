"""Availability timelines: under-min-ISR, offline partitions, active controller.

Bucketed per ``bucket_s`` seconds (default one minute, epoch aligned, UTC).

* ``UnderMinIsrPartitionCount`` / ``AtMinIsrPartitionCount``: reported by each
  partition's leader; a partition under min ISR rejects acks=all produce
  requests (NotEnoughReplicas), so the per-broker timeline says when and where
  writes were failing.  Summing the per-broker values gives the cluster total,
  since each partition has one leader.
* ``OfflinePartitionsCount``: partitions without a leader, reported by the
  active controller only (others report 0), hence the max across nodes.
* ``ActiveControllerCount``: 1 on the active controller, 0 elsewhere.  The sum
  over nodes must be exactly 1; 0 means no controller (elections stall), 2+ a
  split brain.  We take each node's last value in the bucket before summing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_queries._common import bucket, only_metrics

UNDER_MIN_ISR = "UnderMinIsrPartitionCount"
AT_MIN_ISR = "AtMinIsrPartitionCount"
OFFLINE = "OfflinePartitionsCount"
ACTIVE_CONTROLLER = "ActiveControllerCount"


def _max_of(metric: str) -> Column:
    return F.max(F.when(F.col("metric") == F.lit(metric), F.col("value")))


def under_min_isr_timeline(df: DataFrame, bucket_s: int = 60) -> DataFrame:
    """Per cluster, bucket, broker: under_min_isr and at_min_isr (max in the bucket;
    null when the broker sent no sample of that metric in the bucket)."""
    s = only_metrics(df, UNDER_MIN_ISR, AT_MIN_ISR).withColumn("bucket", bucket("ts", bucket_s))
    return s.groupBy("cluster", "bucket", "broker").agg(
        _max_of(UNDER_MIN_ISR).alias("under_min_isr"),
        _max_of(AT_MIN_ISR).alias("at_min_isr"),
    )


def offline_timeline(df: DataFrame, bucket_s: int = 60) -> DataFrame:
    """Per cluster and bucket: offline_partitions (max over nodes) and
    under_min_isr_partitions (sum over brokers of each broker's max)."""
    s = only_metrics(df, UNDER_MIN_ISR, OFFLINE).withColumn("bucket", bucket("ts", bucket_s))
    per_node = s.groupBy("cluster", "bucket", "broker").agg(
        _max_of(OFFLINE).alias("offline"),
        _max_of(UNDER_MIN_ISR).alias("under_min_isr"),
    )
    return per_node.groupBy("cluster", "bucket").agg(
        F.max("offline").alias("offline_partitions"),
        F.sum("under_min_isr").alias("under_min_isr_partitions"),
    )


def controller_timeline(df: DataFrame, bucket_s: int = 60) -> DataFrame:
    """Per cluster and bucket: active_controllers (sum of each node's last value),
    controllers (sorted ids of nodes reporting >= 1), reporting_nodes, and
    ``anomaly`` (active_controllers != 1)."""
    s = only_metrics(df, ACTIVE_CONTROLLER).withColumn("bucket", bucket("ts", bucket_s))
    per_node = s.groupBy("cluster", "bucket", "broker").agg(F.max_by("value", "ts").alias("v"))
    out = per_node.groupBy("cluster", "bucket").agg(
        F.sum("v").alias("active_controllers"),
        F.array_sort(F.collect_list(F.when(F.col("v") >= 1, F.col("broker")))).alias("controllers"),
        F.count("*").alias("reporting_nodes"),
    )
    return out.withColumn("anomaly", F.col("active_controllers") != F.lit(1.0))


def controller_anomalies(df: DataFrame, bucket_s: int = 60) -> DataFrame:
    """Intervals of consecutive buckets whose active controller count != 1.

    Columns: cluster, start, end (exclusive: last bucket + bucket_s), buckets,
    min_active, max_active.  A bucket with no samples at all splits intervals.
    """
    t = controller_timeline(df, bucket_s).filter(F.col("anomaly"))
    idx = F.floor(F.unix_seconds("bucket") / F.lit(int(bucket_s)))
    rn = F.row_number().over(Window.partitionBy("cluster").orderBy("bucket"))
    t = t.withColumn("island", idx - rn)  # constant along a run of consecutive buckets
    return (
        t.groupBy("cluster", "island")
        .agg(
            F.min("bucket").alias("start"),
            F.max("bucket").alias("last_bucket"),
            F.count("*").alias("buckets"),
            F.min("active_controllers").alias("min_active"),
            F.max("active_controllers").alias("max_active"),
        )
        .select(
            "cluster",
            "start",
            F.timestamp_seconds(F.unix_seconds("last_bucket") + F.lit(int(bucket_s))).alias("end"),
            "buckets",
            "min_active",
            "max_active",
        )
    )
