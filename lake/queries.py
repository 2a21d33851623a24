"""The lake's query functions: what the commands ask, run through ``LakeService.query``.

Each ``q_*`` is called as ``fn(view, start, end, ...)`` in Spark's worker thread (with the
service's time limit and job cancellation), applies the pure ``spark_queries`` to the window and
returns plain rows: dicts of Python values, timestamps as aware UTC datetimes (:func:`rows`).
User values reach Spark only as literals.  Results that describe a trend also carry
``data_end``: the newest sample time in the window (epoch seconds, None without samples), so
the caller can tell a healthy trend from a lake that simply stopped before the symptom began.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from lake.schema import RAW, ROLLUPS, from_spark


def rows(df) -> list[dict]:
    """Collect ``df`` as dicts; timestamps become aware UTC (``lake.schema.from_spark``)."""
    return [_plain(r.asDict(recursive=True)) for r in df.collect()]


def _plain(d: dict) -> dict:
    return {k: (from_spark(v) if isinstance(v, _dt.datetime) else v) for k, v in d.items()}


def _data_end(df) -> float | None:
    from pyspark.sql import functions as F

    row = df.agg(F.unix_micros(F.max("ts")).alias("end")).first()
    return None if row is None or row["end"] is None else row["end"] / 1e6


# --------------------------------------------------------------------------- symptoms


def q_urp(view, start, end) -> dict:
    from spark_queries._common import only_metrics
    from spark_queries.isr import EXPANDS, SHRINKS, isr_churn
    from spark_queries.urp import URP, urp_concentration, urp_trend

    df = only_metrics(view.window(start, end), URP, SHRINKS, EXPANDS).cache()
    try:
        return {
            "trend": rows(urp_trend(df)),
            "concentration": rows(urp_concentration(df)),
            "churn": rows(isr_churn(df)),
            "data_end": _data_end(df),
        }
    finally:
        df.unpersist()


def q_under_min_isr(view, start, end) -> dict:
    from pyspark.sql import functions as F

    from spark_queries._common import only_metrics
    from spark_queries.availability import AT_MIN_ISR, UNDER_MIN_ISR, under_min_isr_timeline

    df = only_metrics(view.window(start, end), UNDER_MIN_ISR, AT_MIN_ISR)
    t = under_min_isr_timeline(df)
    return {
        "rows": rows(
            t.groupBy("cluster", "broker").agg(
                F.max("under_min_isr").alias("max_under"),
                F.count_if(F.col("under_min_isr") > 0).alias("minutes_under"),
                F.max("at_min_isr").alias("max_at"),
                F.count("*").alias("minutes"),
            )
        ),
        "data_end": _data_end(df),
    }


def q_offline(view, start, end) -> dict:
    from pyspark.sql import functions as F

    from spark_queries._common import only_metrics
    from spark_queries.availability import OFFLINE, UNDER_MIN_ISR, offline_timeline

    df = only_metrics(view.window(start, end), UNDER_MIN_ISR, OFFLINE)
    t = offline_timeline(df)
    return {
        "rows": rows(
            t.groupBy("cluster").agg(
                F.max("offline_partitions").alias("max_offline"),
                F.count_if(F.col("offline_partitions") > 0).alias("minutes_offline"),
                F.min(F.when(F.col("offline_partitions") > 0, F.unix_seconds("bucket"))).alias("first_offline"),
                F.count("*").alias("minutes"),
            )
        ),
        "data_end": _data_end(df),
    }


def q_hanging(view, start, end) -> dict:
    from pyspark.sql import functions as F

    from spark_queries.txn import last_stable_offset_lag, late_transactions

    df = view.window(start, end)
    growing = last_stable_offset_lag(df).filter(F.col("growing")).orderBy(F.col("last_lag").desc()).limit(5)
    late = late_transactions(df).filter(F.col("late"))
    return {"growing": rows(growing), "late": rows(late), "data_end": _data_end(df)}


def q_saturation(view, start, end, idle_below: float) -> dict:
    from spark_queries.saturation import request_handler_idle, request_queue_time

    df = view.window(start, end)
    return {
        "idle": rows(request_handler_idle(df, idle_below)),
        "queue": rows(request_queue_time(df, quantile="0.99")),
        "data_end": _data_end(df),
    }


def q_controller(view, start, end) -> dict:
    from spark_queries._common import only_metrics
    from spark_queries.availability import ACTIVE_CONTROLLER, controller_anomalies

    df = only_metrics(view.window(start, end), ACTIVE_CONTROLLER)
    return {"rows": rows(controller_anomalies(df)), "data_end": _data_end(df)}


def q_hot(view, start, end, topic: str | None, top: int, rank_by: str = "peak", chart: int = 0) -> dict:
    """The ranking, and (``chart`` > 0) the per-minute rates of the first ``chart`` partitions
    in ``series`` (rows of cluster, topic, partition, minute, records_per_sec), from one Spark
    query over the window: each query through Connect pays its own planning and Delta snapshot,
    so the chart and the data's end come with the ranking."""
    from spark_queries._common import only_metrics
    from spark_queries.hot import LEO, SIZE, hot_partitions

    df = only_metrics(view.window(start, end), LEO, SIZE)
    ranked = rows(hot_partitions(df, topic=topic, top=top, rank_by=rank_by, minutes=chart > 0))
    ends = [t.timestamp() for t in (r.pop("data_end") for r in ranked) if t is not None]
    series = []
    for i, r in enumerate(ranked):
        points = r.pop("minute_rates", None) or []
        if i < chart:
            part = {"cluster": r["cluster"], "topic": r["topic"], "partition": r["partition"]}
            series += [
                {**part, "minute": from_spark(p["minute"]), "records_per_sec": p["records_per_sec"]} for p in points
            ]
    return {"rows": ranked, "series": series, "data_end": max(ends, default=None)}


# --------------------------------------------------------------------------- consumer lag


def q_group_lag(view, start, end, group: str) -> dict:
    from pyspark.sql import functions as F

    from lake.schema import LABEL_GROUP
    from spark_queries._common import label, only_metrics
    from spark_queries.lag import COMMITTED, LAG, LOG_END, group_lag_status, lag_per_minute, partition_lag_status

    win = view.window(start, end)
    commits = only_metrics(win, COMMITTED, LAG).filter(label(LABEL_GROUP) == F.lit(group))
    # the brokers' log end offsets of the group's partitions give Burrow's current lag (the
    # lag rows were taken at commit times and stay frozen once the consumers stop committing)
    ends = only_metrics(win, LOG_END).join(
        commits.select("cluster", "topic", "partition").distinct(),
        on=["cluster", "topic", "partition"],
        how="left_semi",
    )
    both = commits.unionByName(ends)
    parts = partition_lag_status(both, now=end).cache()
    try:
        return {
            "partitions": rows(parts.orderBy(F.col("severity").desc(), "topic", "partition")),
            "group": rows(group_lag_status(parts)),
            "trend": rows(lag_per_minute(both)),
        }
    finally:
        parts.unpersist()


# --------------------------------------------------------------------------- history

RESOLUTION_NAMES = {RAW: "raw samples", "1m": "1-minute rollups", "1h": "1-hour rollups"}


def q_history(
    view, start, end, metric: str, topic: str | None, broker: int | None, partition: int | None, bucket_s: int
) -> dict:
    """One metric per bucket and broker, from the coarsest table whose buckets tile ``bucket_s``
    (``resolution`` in the result: ``1h``, ``1m`` or ``raw``): a 7-day trend reads hour rows."""
    from pyspark.sql import functions as F

    from spark_queries.history import metric_history
    from spark_queries.rollup import rollup_history

    resolution = view.resolution_for(bucket_s)
    if resolution == RAW:
        df = view.window(start, end)
    else:
        df = view.rollup(resolution, start, end)
    if topic is not None:
        df = df.filter(F.col("topic") == F.lit(topic))
    if broker is not None:
        df = df.filter(F.col("broker") == F.lit(int(broker)))
    if partition is not None:
        df = df.filter(F.col("partition") == F.lit(int(partition)))
    if resolution == RAW:
        h = metric_history(df, metric, by=("broker",), bucket_s=bucket_s, agg="max")
    else:
        h = rollup_history(df, metric, by=("broker",), bucket_s=bucket_s, agg="max")
    out = rows(
        h.select("cluster", F.unix_seconds("bucket").alias("bucket"), "broker", "value", "samples").orderBy(
            "bucket", "broker"
        )
    )
    present: list[str] = []
    if not out:  # say what the window does hold, to suggest a name
        src = view.window(start, end) if resolution == RAW else view.rollup(resolution, start, end)
        present = [r["metric"] for r in src.select("metric").distinct().orderBy("metric").limit(60).collect()]
    return {
        "rows": out,
        "present": present,
        "resolution": resolution,
        "resolution_name": RESOLUTION_NAMES[resolution],
        "bucket_s": bucket_s,
    }


# --------------------------------------------------------------------------- any window query


def q_window_rows(view, start, end, query: Callable) -> list[dict]:
    """``query(window_df)`` -> rows, for callers with their own pure query (the digest, triage)."""
    return rows(query(view.window(start, end)))


__all__ = [
    "rows",
    "q_urp",
    "q_under_min_isr",
    "q_offline",
    "q_hanging",
    "q_saturation",
    "q_controller",
    "q_hot",
    "q_group_lag",
    "q_history",
    "q_window_rows",
    "RESOLUTION_NAMES",
    "ROLLUPS",
]
