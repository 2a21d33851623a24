"""Consumer lag verdicts with Burrow's evaluation rules.

Input: ``CommittedOffset`` and ``ConsumerLag`` rows (``broker`` -1,
``labels.group`` = the group), one pair per observed commit with ``ts`` = the
commit time (see ``lake.schema``).  A commit without a ``ConsumerLag`` row has
an unknown lag (Burrow's nil lag) and is skipped by the lag rules.

The rules are Burrow's ``calculatePartitionStatus``
(linkedin/Burrow, core/internal/evaluator/caching.go), applied to the commits
in the frame (the "window", Burrow's stored intervals), in this order:

0. current lag (lag of the last commit) <= ``allowed_lag`` -> **OK**.
1. **STOP**: now - last commit time > last commit time - first commit time
   (the consumer stopped committing for longer than the window it had been
   committing in).  Burrow skips STOP when the lag was zero in its last few
   broker-offset samples; here the only log end offsets known are those at
   commit times (offset + lag) and the latest of them is the current lag,
   which rule 0 already checked, so that exception never applies.
2. **REWIND**: the committed offset went down between two commits and never
   got back to the offset before the drop.
3. If the lag was <= ``allowed_lag`` at any commit, **OK**.
4. **STALL**: the committed offset never changed (consumer keeps committing
   the same offset while lag exists: stuck, or its commits are not moving).
5. **WARN**: offsets move but the lag never went down from one commit to the
   next (the consumer is slower than the producers).
6. otherwise **OK**.

``now`` is the evaluation time; by default the latest commit time seen in
the cluster (so a partition is STOPPED relative to the others' commits).

Current lag, as Burrow computes it: the partition's *latest* log end offset
minus the last committed offset.  The ``ConsumerLag`` rows are taken at commit
times only, so for a consumer that stopped committing the lag of its last
commit is frozen while producers keep writing (a stopped group showed 158 in
the lake against 2,438 live).  When the frame holds the brokers'
``LogEndOffset`` samples of the partition at or after the last commit, the
current lag is the latest of them minus the last committed offset; otherwise
it is the lag of the last commit.  The lag rules 2-5 still compare lags at
commit times, as Burrow's do.

Group status, as Burrow: ERR if any partition is STOP/STALL/REWIND, else WARN
if any partition is WARN, else OK.  Severity follows Burrow's status constants
(OK 1, WARN 2, STOP 4, STALL 5, REWIND 6).
"""

from __future__ import annotations

import datetime as _dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lake.schema import LABEL_GROUP
from spark_queries._common import label, only_metrics, ts_lit

COMMITTED = "CommittedOffset"
LAG = "ConsumerLag"
LOG_END = "LogEndOffset"

OK, WARN, STOP, STALL, REWIND, ERR = "OK", "WARN", "STOP", "STALL", "REWIND", "ERR"
SEVERITY = {OK: 1, WARN: 2, STOP: 4, STALL: 5, REWIND: 6}

_KEY = ["cluster", "group", "topic", "partition"]


def _series(df: DataFrame, metric: str, name: str) -> DataFrame:
    return (
        only_metrics(df, metric)
        .withColumn("group", label(LABEL_GROUP))
        .filter(F.col("group").isNotNull() & F.col("topic").isNotNull() & F.col("partition").isNotNull())
        .groupBy(*_KEY, "ts")
        .agg(F.max("value").alias(name))
    )


def commits(df: DataFrame) -> DataFrame:
    """One row per commit: cluster, group, topic, partition, ts, offset, lag (nullable)."""
    return _series(df, COMMITTED, "offset").join(_series(df, LAG, "lag"), on=[*_KEY, "ts"], how="left")


def latest_log_ends(df: DataFrame) -> DataFrame:
    """Per cluster/topic/partition, the latest ``LogEndOffset`` sample in ``df``: columns cluster,
    topic, partition, log_end_ts, log_end.  Every replica reports the metric; at the latest
    instant the largest value is the leader's (a follower's can only trail it)."""
    leo = only_metrics(df, LOG_END).filter(F.col("topic").isNotNull() & F.col("partition").isNotNull())
    key = ["cluster", "topic", "partition"]
    at = leo.groupBy(*key, "ts").agg(F.max("value").alias("log_end"))
    return at.groupBy(*key).agg(F.max("ts").alias("log_end_ts"), F.max_by("log_end", "ts").alias("log_end"))


def _severity(status: Column) -> Column:
    expr = F.lit(None).cast("int")
    for name, sev in SEVERITY.items():
        expr = F.when(status == F.lit(name), F.lit(sev)).otherwise(expr)
    return expr


def partition_lag_status(
    df: DataFrame,
    now: _dt.datetime | str | None = None,
    allowed_lag: float = 0,
) -> DataFrame:
    """Burrow status per group/topic/partition over the commits in ``df``.

    Columns: cluster, group, topic, partition, commits, first_commit, last_commit,
    last_offset, current_lag, max_lag, status, severity.
    """
    c = commits(df)
    w = Window.partitionBy(*_KEY).orderBy("ts")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    from_here = w.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    c = (
        c.withColumn("prev_offset", F.lag("offset").over(w))
        .withColumn("prev_lag", F.last("lag", ignorenulls=True).over(before))
        .withColumn("max_offset_from_here", F.max("offset").over(from_here))
    )
    is_rewind = F.col("offset") < F.col("prev_offset")
    rewind_ts = F.when(is_rewind, F.col("ts"))
    allowed = F.lit(float(allowed_lag))
    p = c.groupBy(*_KEY).agg(
        F.count("*").alias("commits"),
        F.min("ts").alias("first_commit"),
        F.max("ts").alias("last_commit"),
        F.max_by("offset", "ts").alias("last_offset"),
        F.max_by("lag", F.when(F.col("lag").isNotNull(), F.col("ts"))).alias("current_lag"),
        F.max("lag").alias("max_lag"),
        F.countDistinct("offset").alias("distinct_offsets"),
        F.min(rewind_ts).alias("first_rewind"),
        # Burrow looks at the first rewind: did the offset get back to where it was?
        F.min_by(F.col("max_offset_from_here") >= F.col("prev_offset"), rewind_ts).alias("rewind_recovered"),
        F.coalesce(F.bool_or(F.col("lag") <= allowed), F.lit(False)).alias("lag_ever_ok"),
        F.coalesce(F.bool_or(F.col("lag") < F.col("prev_lag")), F.lit(False)).alias("lag_ever_down"),
    )
    # Burrow's current lag: the latest log end offset known at or after the last commit, minus the
    # last committed offset; the lag of the last commit when the frame has no such sample
    ends = latest_log_ends(df)
    p = p.join(ends, on=["cluster", "topic", "partition"], how="left")
    fresh_end = F.col("log_end").isNotNull() & (F.col("log_end_ts") >= F.col("last_commit"))
    p = p.withColumn(
        "current_lag",
        F.when(fresh_end, F.greatest(F.col("log_end") - F.col("last_offset"), F.lit(0.0))).otherwise(
            F.col("current_lag")
        ),
    )
    p = p.withColumn("max_lag", F.greatest(F.col("max_lag"), F.col("current_lag")))
    now_col = ts_lit(now) if now is not None else F.max("last_commit").over(Window.partitionBy("cluster"))
    micros = F.unix_micros
    stopped = (micros(now_col) - micros(F.col("last_commit"))) > (
        micros(F.col("last_commit")) - micros(F.col("first_commit"))
    )
    status = (
        F.when(F.coalesce(F.col("current_lag"), F.lit(0.0)) <= allowed, F.lit(OK))
        .when(stopped, F.lit(STOP))
        .when(F.col("first_rewind").isNotNull() & ~F.col("rewind_recovered"), F.lit(REWIND))
        .when(F.col("lag_ever_ok"), F.lit(OK))
        .when(F.col("distinct_offsets") == 1, F.lit(STALL))
        .when(~F.col("lag_ever_down"), F.lit(WARN))
        .otherwise(F.lit(OK))
    )
    return p.select(
        *_KEY,
        "commits",
        "first_commit",
        "last_commit",
        "last_offset",
        "current_lag",
        "max_lag",
        status.alias("status"),
    ).withColumn("severity", _severity(F.col("status")))


def group_lag_status(partition_status: DataFrame) -> DataFrame:
    """Per cluster and group, from :func:`partition_lag_status`'s output.

    Columns: cluster, group, status (OK/WARN/ERR), worst_status (the worst
    partition status), partitions, partitions_not_ok, total_lag, and the
    partition with the most lag: max_lag_topic, max_lag_partition, max_lag.
    """
    s = partition_status
    worst_sev = F.max("severity")
    lag = F.coalesce(F.col("current_lag"), F.lit(0.0))
    out = s.groupBy("cluster", "group").agg(
        worst_sev.alias("worst_severity"),
        F.max_by("status", "severity").alias("worst_status"),
        F.count("*").alias("partitions"),
        F.count_if(F.col("status") != F.lit(OK)).alias("partitions_not_ok"),
        F.sum(lag).alias("total_lag"),
        F.max_by(
            F.struct("topic", "partition", lag.alias("lag")), F.struct(lag, F.col("topic"), F.col("partition"))
        ).alias("ml"),
    )
    group_status = (
        F.when(F.col("worst_severity") >= F.lit(SEVERITY[STOP]), F.lit(ERR))
        .when(F.col("worst_severity") == F.lit(SEVERITY[WARN]), F.lit(WARN))
        .otherwise(F.lit(OK))
    )
    return out.select(
        "cluster",
        "group",
        group_status.alias("status"),
        "worst_status",
        "partitions",
        "partitions_not_ok",
        "total_lag",
        F.col("ml.topic").alias("max_lag_topic"),
        F.col("ml.partition").alias("max_lag_partition"),
        F.col("ml.lag").alias("max_lag"),
    )


def lag_per_minute(df: DataFrame, bucket_s: int = 60) -> DataFrame:
    """The group's total lag per minute, for a chart: per partition and minute, the newest log end
    offset any replica reported minus the newest committed offset, each carried forward from the
    minute it was last seen (a consumer that stopped committing keeps its last offset while the
    log end grows, which is the picture of a STOP), summed over the partitions. ``df`` holds the
    group's CommittedOffset rows and its partitions' LogEndOffset rows. Columns cluster, minute,
    lag (records), partitions (how many partitions had both offsets by then)."""
    from spark_queries._common import bucket

    part = ["cluster", "topic", "partition"]
    minute = bucket("ts", bucket_s).alias("minute")
    per_minute = (
        df.filter(F.col("metric").isin([COMMITTED, LOG_END]))
        .groupBy(*part, minute)
        .agg(
            F.max(F.when(F.col("metric") == F.lit(LOG_END), F.col("value"))).alias("log_end"),
            F.max(F.when(F.col("metric") == F.lit(COMMITTED), F.col("value"))).alias("committed"),
        )
    )
    # every partition at every minute of its cluster, so a partition's last offsets are carried
    # into the minutes it was not sampled in (a stopped group commits nothing more)
    grid = per_minute.select("cluster", "minute").distinct().join(per_minute.select(*part).distinct(), on="cluster")
    per_minute = grid.join(per_minute, on=[*part, "minute"], how="left")
    so_far = Window.partitionBy(*part).orderBy("minute").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    filled = per_minute.select(
        *part,
        "minute",
        F.last("log_end", ignorenulls=True).over(so_far).alias("log_end"),
        F.last("committed", ignorenulls=True).over(so_far).alias("committed"),
    )
    lag = F.when(
        F.col("log_end").isNotNull() & F.col("committed").isNotNull(),
        F.greatest(F.col("log_end") - F.col("committed"), F.lit(0.0)),
    )
    return (
        filled.select("cluster", "minute", lag.alias("lag"))
        .groupBy("cluster", "minute")
        .agg(F.sum("lag").alias("lag"), F.count("lag").alias("partitions"))
        .filter(F.col("partitions") > 0)
        .orderBy("cluster", "minute")
    )
