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

from lake.schema import RAW, RESOLUTION_NAMES, ROLLUPS, from_spark
from spark_queries.history import metric_history
from spark_queries.rollup import rollup_history


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


def q_history(
    view,
    start,
    end,
    metric: str,
    topic: str | None,
    broker: int | None,
    partition: int | None,
    bucket_s: int,
    now: float | None = None,
) -> dict:
    """One metric per bucket and broker, from the coarsest table whose buckets tile ``bucket_s``
    (``resolution`` in the result: ``1h``, ``1m`` or ``raw``): a 7-day trend reads hour rows.
    ``now`` (epoch s, default the clock): where the hour table's open hours begin.  The same
    answer as the in-process ``window_queries.history`` (below the crossover it answers)."""
    from pyspark.sql import functions as F

    resolution = view.resolution_for(bucket_s)

    def ask(assume_seconds: bool) -> list[dict]:
        if resolution == RAW:
            df = view.window(start, end)
        else:
            df = view.rollup(resolution, start, end, now=now, assume_seconds=assume_seconds)
        if topic is not None:
            df = df.filter(F.col("topic") == F.lit(topic))
        if broker is not None:
            df = df.filter(F.col("broker") == F.lit(int(broker)))
        if partition is not None:
            df = df.filter(F.col("partition") == F.lit(int(partition)))
        if resolution == RAW:
            h = metric_history(df, metric, by=("broker",), bucket_s=bucket_s, agg="max", newest=True)
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
                newest=True,
            )
        newest = (F.unix_micros("newest") / F.lit(1e6)).alias("newest")
        return rows(
            h.select("cluster", F.unix_seconds("bucket").alias("bucket"), "broker", "value", "samples", newest).orderBy(
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
        src = view.window(start, end) if resolution == RAW else view.rollup(resolution, start, end, now=now)
        present = [r["metric"] for r in src.select("metric").distinct().orderBy("metric").limit(60).collect()]
    ends = [r["newest"] for r in out if r["newest"] is not None]
    return {
        "rows": out,
        "present": present,
        "resolution": resolution,
        "resolution_name": RESOLUTION_NAMES[resolution],
        "bucket_s": bucket_s,
        "data_end": max(ends) if ends else None,  # the newest sample the rows were made of (epoch s)
        "engine": "spark",
    }


# --------------------------------------------------------------------------- any window query


def q_window_rows(view, start, end, query: Callable) -> list[dict]:
    """``query(window_df)`` -> rows, for callers with their own pure query (the digest, triage)."""
    return rows(query(view.window(start, end)))


__all__ = [
    "rows",
    "q_history",
    "q_window_rows",
    "RESOLUTION_NAMES",
    "ROLLUPS",
]
