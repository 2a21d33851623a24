"""Transactions: LastStableOffsetLag per partition, late transactions per broker.

The last stable offset (LSO) cannot pass the first offset of a transaction
that is still open, so a transaction that never commits or aborts (a hanging
transaction) pins the LSO while the log end offset keeps moving:
``LastStableOffsetLag`` (LEO - LSO) grows without ever coming down, and
read_committed consumers stop at the LSO.  Normal transactional traffic makes
the lag go up and down by a batch or so.

``growing`` is true when the lag ended the window at its maximum, above where
it started, and has gone up at least ``min_increases`` times since it last went
down (i.e. it has been climbing steadily, not just jittering).

``PartitionsWithLateTransactionsCount`` is the broker's count of partitions
with a transaction open longer than ``transaction.max.timeout.ms``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_queries._common import only_metrics

LSO_LAG = "LastStableOffsetLag"
LATE_TXN = "PartitionsWithLateTransactionsCount"


def last_stable_offset_lag(df: DataFrame, min_increases: int = 5) -> DataFrame:
    """Per topic-partition: samples, first_lag, last_lag, max_lag,
    increases_since_last_decrease, growth_per_sec, growing, leader_broker
    (the broker that reported the last sample)."""
    part = ["cluster", "topic", "partition"]
    s = (
        only_metrics(df, LSO_LAG)
        .filter(F.col("topic").isNotNull() & F.col("partition").isNotNull())
        # leadership can move: one value per instant, from whichever broker reported it
        .groupBy(*part, "ts")
        .agg(F.max("value").alias("value"), F.max_by("broker", "value").alias("broker"))
    )
    w = Window.partitionBy(*part).orderBy("ts")
    delta = F.col("value") - F.lag("value").over(w)
    s = s.withColumn("up", F.coalesce(delta > 0, F.lit(False))).withColumn("down", F.coalesce(delta < 0, F.lit(False)))
    s = s.withColumn("last_down_ts", F.max(F.when(F.col("down"), F.col("ts"))).over(Window.partitionBy(*part)))
    since_last_down = F.col("last_down_ts").isNull() | (F.col("ts") > F.col("last_down_ts"))
    elapsed_s = (F.unix_micros(F.max("ts")) - F.unix_micros(F.min("ts"))) / F.lit(1e6)
    out = s.groupBy(*part).agg(
        F.count("*").alias("samples"),
        F.min_by("value", "ts").alias("first_lag"),
        F.max_by("value", "ts").alias("last_lag"),
        F.max("value").alias("max_lag"),
        F.count_if(F.col("up") & since_last_down).alias("increases_since_last_decrease"),
        elapsed_s.alias("elapsed_s"),
        F.max_by("broker", "ts").alias("leader_broker"),
    )
    growth = F.when(F.col("elapsed_s") > 0, (F.col("last_lag") - F.col("first_lag")) / F.col("elapsed_s"))
    growing = (
        (F.col("last_lag") > F.col("first_lag"))
        & (F.col("last_lag") >= F.col("max_lag"))
        & (F.col("increases_since_last_decrease") >= F.lit(int(min_increases)))
    )
    return out.select(
        *part,
        "samples",
        "first_lag",
        "last_lag",
        "max_lag",
        "increases_since_last_decrease",
        growth.alias("growth_per_sec"),
        growing.alias("growing"),
        "leader_broker",
    )


def late_transactions(df: DataFrame) -> DataFrame:
    """Per broker: max and last PartitionsWithLateTransactionsCount, nonzero_samples,
    first_late_ts (first sample > 0, null if none) and ``late`` (max > 0)."""
    s = only_metrics(df, LATE_TXN)
    return s.groupBy("cluster", "broker").agg(
        F.max("value").alias("max"),
        F.max_by("value", "ts").alias("last"),
        F.count_if(F.col("value") > 0).alias("nonzero_samples"),
        F.min(F.when(F.col("value") > 0, F.col("ts"))).alias("first_late_ts"),
        (F.max("value") > 0).alias("late"),
    )
