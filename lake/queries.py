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


#: Windows at least this long are ranked from the minute rollup (:func:`_hot_from_rollup`).
#: Through Spark Connect at 30,000 partitions sampled every 30 s (scripts/bench_lake.py's lake,
#: its newest hour rewritten as ``lake collect`` leaves it, a file per 30 s batch; medians on
#: 2 cores), from raw samples and from the rollup: an hour about 6 s and 1.7 s, 30 minutes 2.5 s
#: and 1.6 s, 15 minutes 1.5 s and 1.8 s.  At 15 minutes the tail and the second table cost more
#: than the 30 raw samples per series they save.  (At the collector's default 10 s there are
#: three times as many raw samples; that break-even was not measured.)
HOT_ROLLUP_FROM_S = 1800
#: The newest minutes of a hot-partitions window are ranked from raw samples: ``lake collect``
#: rolls up at most once a minute, after the ingest batch that carried the samples, so the
#: minute rollup trails the raw table by a minute or two.  Five minutes leave room for a slow
#: rollup run on a busy machine (further behind, and the raw samples answer).
HOT_RAW_TAIL_S = 300
#: How far before the tail its first step may find the previous sample (from the minute
#: rollup's newest sample per minute): a scrape interval of up to a minute, with jitter.
_HOT_SEED_S = 120


def q_hot(view, start, end, topic: str | None, top: int, rank_by: str = "peak", chart: int = 0) -> dict:
    """The ranking, and (``chart`` > 0) the per-minute rates of the first ``chart`` partitions
    in ``series`` (rows of cluster, topic, partition, minute, records_per_sec), from one Spark
    query over the window: each query through Connect pays its own planning and Delta snapshot,
    so the chart and the data's end come with the ranking.  ``resolution`` says what it was
    ranked from: ``1m`` (the minute rollup, the minutes from ``raw_from`` on from raw samples)
    or ``raw``.

    A window of :data:`HOT_ROLLUP_FROM_S` or more is ranked from the minute rollup when it has
    caught up (:func:`_hot_from_rollup`); otherwise from the raw samples."""
    from spark_queries._common import only_metrics
    from spark_queries.hot import LEO, SIZE, hot_partitions

    ranked, raw_from = None, None
    if (end - start).total_seconds() >= HOT_ROLLUP_FROM_S:
        ranked, raw_from = _hot_from_rollup(view, start, end, topic, top, rank_by, chart) or (None, None)
    if ranked is None:
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
    return {
        "rows": ranked,
        "series": series,
        "data_end": max(ends, default=None),
        "resolution": RAW if raw_from is None else "1m",
        "raw_from": raw_from,
    }


def _hot_from_rollup(view, start, end, topic, top, rank_by, chart) -> tuple[list[dict], _dt.datetime] | None:
    """``spark_queries.hot.hot_partitions_from_rollup`` over the window, and where its raw tail
    begins: the minute rollup's rows up to :data:`HOT_RAW_TAIL_S` before the end, the minutes
    after from raw samples; a row per replica and minute instead of every raw sample (see
    :data:`HOT_ROLLUP_FROM_S`).

    None when the rollup cannot answer, and the raw samples must: no minute table, a window too
    short to leave whole minutes before the tail, no rows, or a table that has not reached the
    tail's start for a cluster ranked (its rollups are behind, or the lake's data ends earlier)."""
    from lake.schema import to_utc
    from spark_queries._common import only_metrics
    from spark_queries.hot import LEO, SIZE, hot_partitions_from_rollup
    from spark_queries.rollup import NEWEST_SAMPLE_COLUMNS, newest_samples

    if not (view.is_delta() and view.is_delta("1m")):
        return None
    minute = _dt.timedelta(minutes=1)
    first = _floor_minute(to_utc(start))
    cut = _floor_minute(to_utc(end)) - _dt.timedelta(seconds=HOT_RAW_TAIL_S)
    if cut - first < 2 * minute:  # the baseline minute and at least one more
        return None
    # the table's rows from the tail's start on are read only to tell how far it reached: a lake
    # whose data begins inside the tail has no row at the tail's first minute, and is complete
    table = view.rollup("1m", first, end)
    # hot_partitions_from_rollup keeps the ranked series (hot_series) of the table and the tail
    seeds = newest_samples(only_metrics(view.rollup("1m", cut - _dt.timedelta(seconds=_HOT_SEED_S), cut), LEO, SIZE))
    raw = only_metrics(view.window(cut, end), LEO, SIZE)
    tail = raw.select(*NEWEST_SAMPLE_COLUMNS).unionByName(seeds)

    def rank(has_seconds: bool) -> list[dict]:
        options = {"minutes": chart > 0, "has_seconds": has_seconds}
        return rows(hot_partitions_from_rollup(table, tail, first, cut, topic, top, rank_by, **options))

    try:
        ranked = rank(True)
    except Exception as exc:
        if not _without_seconds(exc):
            raise
        ranked = rank(False)
    reached = [r.pop("rollup_end") is not None for r in ranked]
    if not ranked or not all(reached):
        return None
    return ranked, cut


def _without_seconds(exc: Exception) -> bool:
    """The query named the rollup rows' ``seconds`` and a table was written before that column
    existed (``lake.schema``).  The readers assume it, because looking at a table's columns is a
    round trip through Spark Connect on every question; asked again, they look, and take such
    a table's rows as seen for their whole width."""
    from pyspark.errors import AnalysisException

    return isinstance(exc, AnalysisException) and "`seconds`" in str(exc)


def _floor_minute(t: _dt.datetime) -> _dt.datetime:
    return t.replace(second=0, microsecond=0)


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
    "q_hot",
    "q_history",
    "q_window_rows",
    "q_collected",
    "RESOLUTION_NAMES",
    "ROLLUPS",
]
