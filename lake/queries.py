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


# --------------------------------------------------------------------------- symptoms


def _without_seconds(exc: Exception) -> bool:
    """The query named the rollup rows' ``seconds`` and a table was written before that column
    existed (``lake.schema``).  The readers assume it, because looking at a table's columns is a
    round trip through Spark Connect on every question; asked again, they look, and take such
    a table's rows as seen for their whole width."""
    from pyspark.errors import AnalysisException

    return isinstance(exc, AnalysisException) and "`seconds`" in str(exc)


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

    def ask(assume_seconds: bool) -> list[dict]:
        if resolution == RAW:
            df = view.window(start, end)
        else:
            df = view.rollup(resolution, start, end, assume_seconds=assume_seconds)
        if topic is not None:
            df = df.filter(F.col("topic") == F.lit(topic))
        if broker is not None:
            df = df.filter(F.col("broker") == F.lit(int(broker)))
        if partition is not None:
            df = df.filter(F.col("partition") == F.lit(int(partition)))
        if resolution == RAW:
            h = metric_history(df, metric, by=("broker",), bucket_s=bucket_s, agg="max")
        else:
            has_seconds = True if assume_seconds else None  # None: look at the table's columns
            h = rollup_history(
                df,
                metric,
                by=("broker",),
                bucket_s=bucket_s,
                agg="max",
                width_s=ROLLUPS[resolution],
                has_seconds=has_seconds,
            )
        return rows(
            h.select("cluster", F.unix_seconds("bucket").alias("bucket"), "broker", "value", "samples").orderBy(
                "bucket", "broker"
            )
        )

    try:
        out = ask(assume_seconds=True)
    except Exception as exc:
        if resolution == RAW or not _without_seconds(exc):
            raise
        out = ask(assume_seconds=False)
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


# --------------------------------------------------------------------------- how much the lake holds


def q_collected(view, start, end) -> dict:
    """How much the lake holds, for telling a young lake (its collector started inside the window,
    or no ingest has committed yet) from a window that simply has no such samples.

    ``minutes``: minutes of [start, end) with at least one raw sample; ``first`` / ``last``: the
    window's first and newest sample (epoch seconds, None without); ``earlier``: the lake holds
    something from before ``start`` (raw samples, or rows of a rollup table, which outlive the
    raw samples).  A young lake holds nothing earlier, so ``minutes`` is then all it holds.
    Tables that are not there yet count as empty (never an error)."""
    from pyspark.sql import functions as F

    from lake.schema import to_utc
    from spark_queries._common import ts_lit

    try:
        row = (
            view.window(start, end)
            .agg(
                F.count_distinct(F.date_trunc("minute", F.col("ts"))).alias("minutes"),
                F.unix_micros(F.min("ts")).alias("first"),
                F.unix_micros(F.max("ts")).alias("last"),
            )
            .first()
        )
        before = ts_lit(to_utc(start))
        earlier = bool(view.all().filter(F.col("ts") < before).select("ts").limit(1).collect())
        for resolution in ROLLUPS:
            if earlier:
                break
            if view.is_delta(resolution):
                rolled = view.spark.read.format("delta").load(_table(view, resolution))
                if view.cluster is not None:
                    rolled = rolled.filter(F.col("cluster") == F.lit(view.cluster))
                earlier = bool(rolled.filter(F.col("bucket") < before).select("bucket").limit(1).collect())
    except Exception as exc:
        from lake.errors import missing_table

        if not missing_table(exc):
            raise
        return {"minutes": 0, "first": None, "last": None, "earlier": False}

    def epoch(us: int | None) -> float | None:
        return None if us is None else us / 1e6

    return {
        "minutes": int(row["minutes"] or 0) if row is not None else 0,
        "first": epoch(row["first"]) if row is not None else None,
        "last": epoch(row["last"]) if row is not None else None,
        "earlier": earlier,
    }


def _table(view, resolution: str) -> str:
    from lake.schema import table_path

    return table_path(view.path, resolution)


# --------------------------------------------------------------------------- any window query


def q_window_rows(view, start, end, query: Callable) -> list[dict]:
    """``query(window_df)`` -> rows, for callers with their own pure query (the digest, triage)."""
    return rows(query(view.window(start, end)))


__all__ = [
    "rows",
    "q_history",
    "q_window_rows",
    "q_collected",
    "RESOLUTION_NAMES",
    "ROLLUPS",
]
