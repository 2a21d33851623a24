"""ISR churn per broker: IsrShrinksPerSec vs IsrExpandsPerSec.

Both meters are stored as cumulative counts (see ``lake.schema``), so the
number of shrinks/expands in the window is the sum of per-step increments of
each series, with counter resets (a broker restart sets the count back to 0)
counted as the new value rather than a negative step.

A leader shrinks an ISR when a follower stops keeping up and expands it when
the follower catches up again.  Shrinks with no matching expands mean replicas
leave the ISR and never come back (a follower that cannot catch up, or a dead
broker); ``shrinks_without_expands`` flags brokers with shrinks > 0 and no
expands in the window.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_queries._common import labels_key, only_metrics, with_increments

SHRINKS = "IsrShrinksPerSec"
EXPANDS = "IsrExpandsPerSec"


def isr_churn(df: DataFrame) -> DataFrame:
    """Per broker: shrinks, expands, net_shrinks, resets, shrinks_without_expands.

    ``shrinks``/``expands`` are counts of events in the window (doubles, as the
    lake stores values); ``resets`` is how many counter resets (restarts) were
    seen across the broker's two series.  Brokers need at least two samples of
    a series for it to count; a series with one sample contributes 0.
    """
    c = only_metrics(df, SHRINKS, EXPANDS).withColumn("lk", labels_key())
    c = with_increments(c, ["cluster", "broker", "metric", "lk"])
    inc = F.coalesce(F.col("inc"), F.lit(0.0))
    out = c.groupBy("cluster", "broker").agg(
        F.sum(F.when(F.col("metric") == F.lit(SHRINKS), inc).otherwise(F.lit(0.0))).alias("shrinks"),
        F.sum(F.when(F.col("metric") == F.lit(EXPANDS), inc).otherwise(F.lit(0.0))).alias("expands"),
        F.count_if(F.col("reset")).alias("resets"),
    )
    return out.select(
        "cluster",
        "broker",
        "shrinks",
        "expands",
        (F.col("shrinks") - F.col("expands")).alias("net_shrinks"),
        "resets",
        ((F.col("shrinks") > 0) & (F.col("expands") == 0)).alias("shrinks_without_expands"),
    )
