"""UnderReplicatedPartitions (URP) trend per broker.

URP is reported by partition *leaders*.  Its shape over the window separates
the two replication failure modes in the runbook:

* ``flat``: non-zero and level: steps up once and stays.  Every partition with
  a replica on a lost broker is under-replicated until it comes back, so the
  count is constant: the broker-loss signature.
* ``fluctuating``: non-zero and moving up and down: followers drop out of and
  rejoin the ISR, the slow-follower signature.
* ``zero``: no URP in the window.

Classification (all thresholds are parameters):
``flat`` when the most common non-zero value (the *modal* value) covers at
least ``flat_share`` of the non-zero samples, there are at least
``min_flat_samples`` non-zero samples, and the value changed at most
``max(2, max_change_rate * (samples - 1))`` times (2 = one step up, one step
down); otherwise ``fluctuating``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_queries._common import only_metrics

URP = "UnderReplicatedPartitions"
_KEY = ["cluster", "broker"]


def _per_instant(df: DataFrame) -> DataFrame:
    # One value per broker and instant (duplicate scrapes collapse to the max).
    return only_metrics(df, URP).groupBy("cluster", "broker", "ts").agg(F.max("value").alias("value"))


def urp_trend(
    df: DataFrame,
    flat_share: float = 0.8,
    max_change_rate: float = 0.2,
    min_flat_samples: int = 3,
) -> DataFrame:
    """Per broker URP statistics over the frame's time range and a ``shape``.

    Columns: cluster, broker, samples, min, max, mean, last, distinct_values,
    changes (number of consecutive samples whose value differs), nonzero_samples,
    modal_value (most common non-zero value; ties go to the larger value),
    modal_share (its share of the non-zero samples), shape.
    """
    # One scan and one shuffle: the samples are hash-partitioned by broker once, and the
    # per-instant max, the change count (a window over the broker's instants), the per-value
    # counts and the per-broker statistics all run inside that partitioning.  The statistics
    # come from the (broker, value) groups, so the modal value needs no second pass and no join
    # (that plan read the window twice and cost half the answer time through Spark Connect).
    u = _per_instant(df.repartition(*_KEY))
    changed = F.coalesce(
        (F.col("value") != F.lag("value").over(Window.partitionBy(*_KEY).orderBy("ts"))).cast("int"), F.lit(0)
    )
    per_value = (
        u.select(*_KEY, "ts", "value", changed.alias("changed"))
        .groupBy(*_KEY, "value")
        .agg(F.count("*").alias("n"), F.sum("changed").alias("changes"), F.max("ts").alias("last_ts"))
    )
    nonzero = F.col("value") > 0
    out = per_value.groupBy(*_KEY).agg(
        F.sum("n").alias("samples"),
        F.min("value").alias("min"),
        F.max("value").alias("max"),
        (F.sum(F.col("value") * F.col("n")) / F.sum(F.when(F.col("value").isNotNull(), F.col("n")))).alias("mean"),
        F.max_by("value", "last_ts").alias("last"),
        F.count("value").alias("distinct_values"),
        F.sum("changes").alias("changes"),
        F.coalesce(F.sum(F.when(nonzero, F.col("n"))), F.lit(0)).alias("nonzero_samples"),
        # ties between equally common values go to the larger value; max_by skips null orderings
        F.max_by("value", F.when(nonzero, F.struct("n", "value"))).alias("modal_value"),
        F.max(F.when(nonzero, F.col("n"))).alias("modal_n"),
    )
    modal_share = F.when(F.col("nonzero_samples") > 0, F.col("modal_n") / F.col("nonzero_samples"))
    allowed_changes = F.greatest(F.lit(2.0), F.lit(float(max_change_rate)) * (F.col("samples") - 1))
    shape = (
        F.when(F.col("max") <= 0, F.lit("zero"))
        .when(
            (F.col("nonzero_samples") >= F.lit(int(min_flat_samples)))
            & (modal_share >= F.lit(float(flat_share)))
            & (F.col("changes") <= allowed_changes),
            F.lit("flat"),
        )
        .otherwise(F.lit("fluctuating"))
    )
    return out.select(
        *_KEY,
        "samples",
        "min",
        "max",
        "mean",
        "last",
        "distinct_values",
        F.col("changes").cast("long").alias("changes"),
        "nonzero_samples",
        "modal_value",
        modal_share.alias("modal_share"),
        shape.alias("shape"),
    )


def urp_concentration(df: DataFrame) -> DataFrame:
    """Which broker(s) carry most of the cluster's URP over the window.

    Columns: cluster, broker, mean_urp, max_urp, share (the broker's sum of URP
    samples / the cluster's; null when the cluster had none), rank (1 = most URP,
    dense so ties share a rank).  Brokers without any URP sample are absent.
    """
    u = _per_instant(df)
    per_broker = u.groupBy(*_KEY).agg(
        F.avg("value").alias("mean_urp"),
        F.max("value").alias("max_urp"),
        F.sum("value").alias("urp_sum"),
    )
    total = F.sum("urp_sum").over(Window.partitionBy("cluster"))
    share = F.when(total > 0, F.col("urp_sum") / total)
    rank = F.dense_rank().over(Window.partitionBy("cluster").orderBy(F.col("urp_sum").desc()))
    return per_broker.select(*_KEY, "mean_urp", "max_urp", share.alias("share"), rank.alias("rank"))
