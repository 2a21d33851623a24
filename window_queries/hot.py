"""Hot partitions: write rate per topic-partition and how skewed it is.

Every replica's broker reports its own ``LogEndOffset`` (and ``Size``) for the partition, so one
partition has up to replication-factor series.  Per series the growth over the window is the sum
of its positive steps (a drop in LEO is a truncation and a drop in Size is retention or
compaction deleting segments, neither of which is "negative writing") divided by the series'
time span.  A step counts only when the sample before it is at most ``lake.schema.STALE_S``
older, as in the minute rollup (``spark_queries.rollup.minute_rollup``): a replica back from an
outage otherwise showed all it missed as one minute's writes.  The partition's mean rate is the
max over its replicas: followers trail the leader, and a replica that was offline part of the
window under-counts.  Its peak minute (and its chart) is the likely leader's (below): a follower
back from an outage copies what it missed in a minute or two, a burst no client wrote, and took
the peak from the partition's real writes after every broker restart.

A minute's rate is its growth over the seconds its steps span, not over 60 s: divided by a whole
minute, the minute a series began in (first seen 12 s into it), the minute still in progress and
a minute behind a missed scrape all read low (a partition written at a steady 89/s showed "peak
71.6 rec/s, mean 88.9 rec/s").  A minute seen for under half its length counts as half a minute:
a rate from one 10 s step would be noise, and the peak is a 1-minute figure.

``leader_broker`` is a **heuristic**.  Followers fetch from the leader, so at any instant they are
at or behind its LEO: the replica with the highest last LEO, then the highest mean LEO over the
window (a follower that fell behind at some instants and caught up by the end has the lower mean),
then the lowest broker id.  A follower that stays fully caught up ties with the leader everywhere
and the lowest id wins the tie; when scrapes of different brokers are not aligned, a follower
scraped later can look ahead; a replica that was offline early in the window and back at the end
is averaged over its later (higher) samples only.  Leadership moving during the window is not
modelled.  Use the cluster's metadata when the true leader matters.

``skew`` is the partition's rate divided by the median rate of its topic's partitions (null when
that median is 0): a hot key shows up as one partition with skew >> 1.

Two paths, the same answer: a short window is ranked from the raw samples (:data:`HOT_QUESTION`);
a window of :data:`HOT_ROLLUP_FROM_S` or more from the minute rollup, its newest
:data:`HOT_RAW_TAIL_S` from raw samples (:data:`HOT_ROLLUP_QUESTION`, asked over that tail), unless
the rollup has not caught up.  :func:`ask_hot` picks.  Both build one row per replica and minute
(``hot_minutes``) and rank those the same way (``_RANK_SQL``).

User values (the topic, ``top``, ``rank_by``) reach DuckDB only as bound parameters.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Awaitable, Callable
from typing import Any

from lake.embedded import READ_ERRORS, Window
from lake.schema import STALE_S, to_utc
from window_queries import Question

LEO = "LogEndOffset"
SIZE = "Size"
#: KRaft's own metadata log: the JMX exporter reports its LogEndOffset like a partition's, but
#: no client writes to it and no admin call knows it as a topic; ranked only when asked for.
METADATA_LOG = "__cluster_metadata"
RANK_BY = ("peak", "mean")
#: width of the buckets whose rates the peak is taken over
PEAK_BUCKET_S = 60

#: Windows at least this long are ranked from the minute rollup (:data:`HOT_ROLLUP_QUESTION`):
#: it holds a row per replica and minute where the raw table holds one per scrape (six a minute
#: at the collector's 10 s), and the window's rows are read into this process's memory.  In
#: process, on scripts/bench_lake.py's lake (3,000 partitions sampled every 30 s, 2 cores at load
#: 9-13, two runs): an hour 0.43-0.80 s from the rollup and 0.56-0.82 s from raw samples, 30
#: minutes 0.44-0.69 s and 0.49-0.53 s: about even from 30 minutes on, where Spark's break-even
#: was too; the longer the window, the more the rollup saves (a row a minute against two to six).
HOT_ROLLUP_FROM_S = 1800
#: The newest minutes of such a window are ranked from raw samples: ``lake collect`` rolls up at
#: most once a minute, after the ingest batch that carried the samples, so the minute rollup
#: trails the raw table by a minute or two.  Five minutes leave room for a slow rollup run on a
#: busy machine (further behind, and the raw samples answer).
HOT_RAW_TAIL_S = 300
#: How far before the tail its first step may find the previous sample (from the minute
#: rollup's newest sample per minute): a scrape interval of up to a minute, with jitter.
HOT_SEED_S = 120

# The rows a ranking reads: LogEndOffset and Size of $topic (a value), or of every topic but the
# metadata log.
_SERIES = f"""metric IN ('{LEO}', '{SIZE}') AND topic IS NOT NULL AND partition IS NOT NULL
    AND CASE WHEN $topic IS NULL THEN topic <> '{METADATA_LOG}' ELSE topic = $topic END"""

# A minute's records/s (see the module docstring): growth over the seconds seen, at least half a minute.
_RATE = f"growth / greatest(coalesce(covered_s, 0.0), {PEAK_BUCKET_S / 2})"
# The order the peak minute is picked by: the highest rate as whole records (or bytes) a minute,
# then the earliest minute (capped as Spark's packed order was: 2**39 - 1 a minute).
_PEAK_ORDER = (
    f"{{'rate': least(floor(coalesce({_RATE}, 0.0) * {PEAK_BUCKET_S}), {(1 << 39) - 1}), 'earlier': -epoch_us(minute)}}"
)


def _replica_minutes(source: str) -> str:
    """Per replica series and minute of ``source`` (rows of cluster, topic, partition, metric,
    broker, ts, value): growth = the sum of the positive steps, a step belonging to the minute of
    its later sample; ``covered_s``, the seconds those steps span (what the rate is taken over);
    the minute's first and last sample time, its last value, the sum and count of its values."""
    return f"""
SELECT cluster, topic, partition, metric, broker, minute,
       sum(step) AS growth, sum(covered) AS covered_s, min(ts) AS first_ts, max(ts) AS last_ts,
       arg_max(value, ts) AS last_value, sum(value) AS value_sum, count(*) AS n
FROM (
    SELECT cluster, topic, partition, metric, broker, ts, value,
           to_timestamp(epoch_us(ts) // 60000000 * 60) AS minute,
           CASE WHEN gap_us <= $stale_us THEN greatest(value - prev, 0.0) ELSE 0.0 END AS step,
           CASE WHEN gap_us <= $stale_us THEN gap_us / 1e6 END AS covered
    FROM (
        SELECT *, epoch_us(ts) - epoch_us(lag(ts) OVER k) AS gap_us, lag(value) OVER k AS prev
        FROM ({source})
        WINDOW k AS (PARTITION BY cluster, topic, partition, metric, broker ORDER BY ts)
    )
)
GROUP BY cluster, topic, partition, metric, broker, minute
"""


_KEY = "cluster, topic, partition, metric, broker"

#: The raw path: every minute from the window's samples.
RAW_MINUTES_SQL = f"""
CREATE OR REPLACE TEMP TABLE hot_minutes AS
SELECT *, NULL::TIMESTAMPTZ AS rolled_to
FROM ({_replica_minutes(f"SELECT {_KEY}, ts, value FROM w WHERE {_SERIES}")})
"""


def _partials(minutes: str) -> str:
    """Per replica series, what the ranking needs of ``minutes`` (rows of ``hot_minutes``' columns):
    aggregates that compose, so that the minutes can come in parts (the minute rollup is read an
    hour at a time) and parts be aggregated again the same way (``_RANK_SQL``)."""
    return f"""
SELECT {_KEY},
       sum(growth) AS growth, min(first_ts) AS first_ts, max(last_ts) AS last_ts,
       max({_RATE}) AS peak_per_sec,
       max({_PEAK_ORDER}) FILTER (WHERE minute IS NOT NULL) AS peak_order,
       arg_max(minute, {_PEAK_ORDER}) FILTER (WHERE minute IS NOT NULL) AS peak_at,
       arg_max(last_value, last_ts) AS last_value,
       sum(value_sum) AS value_sum, sum(n) AS n,
       max(rolled_to) AS rolled_to
FROM ({minutes}) GROUP BY {_KEY}
"""


_NEW_PARTIALS_SQL = f"CREATE OR REPLACE TEMP TABLE hot_partials AS {_partials('SELECT * FROM hot_minutes')}"

#: The rollup path: the minute table's rows (``hot_1m``, from the window's first minute) before
#: the cut, the tail's minutes from the cut on (``w`` holds the raw samples from the cut, seeded
#: with the table's newest sample of each series in the minutes before it for the step into the
#: cut's minute).  A rollup minute's growth includes the step into it from the sample before, so
#: the window's first minute is the baseline: its growth is left out and its last sample starts
#: the time the mean is taken over; a series that starts later is timed from the start of its
#: first minute.  The table's rows from the cut on are not counted (the tail has them): they only
#: tell, in ``rolled_to``, how far the table reached.  A row without ``seconds`` (written before
#: the column existed) counts as seen for its whole minute.
_TABLE_MINUTES = f"""
SELECT {_KEY},
       CASE WHEN counted THEN bucket END AS minute,
       CASE WHEN counted AND NOT base THEN growth END AS growth,
       CASE WHEN counted AND NOT base THEN coalesce(seconds, {float(PEAK_BUCKET_S)}) END AS covered_s,
       CASE WHEN counted THEN CASE WHEN base THEN last_ts ELSE bucket END END AS first_ts,
       CASE WHEN counted THEN last_ts END AS last_ts,
       CASE WHEN counted THEN "last" END AS last_value,
       CASE WHEN counted THEN "sum" END AS value_sum,
       CASE WHEN counted THEN "count" ELSE 0 END AS n,
       CASE WHEN NOT counted THEN bucket END AS rolled_to
FROM (SELECT *, bucket < $cut AS counted, bucket = $first AS base FROM hot_1m WHERE {_SERIES})
"""
#: One part of the minute table (``hot_1m``, an hour of it) -> its replicas' partials.
_NEW_TABLE_PARTIALS_SQL = f"CREATE OR REPLACE TEMP TABLE hot_partials AS {_partials(_TABLE_MINUTES)}"
_TABLE_PARTIALS_SQL = f"INSERT INTO hot_partials BY NAME {_partials(_TABLE_MINUTES)}"
#: The table's newest sample of each series in the minutes before the cut, for the tail's first step.
_SEEDS_SQL = f"""
INSERT INTO hot_seeds BY NAME
SELECT {_KEY}, last_ts AS ts, "last" AS value FROM hot_1m
WHERE {_SERIES} AND bucket >= $seed_from AND bucket < $cut
"""
_NEW_SEEDS_SQL = """
CREATE OR REPLACE TEMP TABLE hot_seeds (
    cluster VARCHAR, topic VARCHAR, partition INTEGER, metric VARCHAR, broker INTEGER, ts TIMESTAMPTZ, value DOUBLE
)
"""
#: The tail's minutes (from the cut on), seeded.
TAIL_MINUTES_SQL = f"""
CREATE OR REPLACE TEMP TABLE hot_minutes AS
SELECT *, NULL::TIMESTAMPTZ AS rolled_to
FROM ({_replica_minutes(f"SELECT {_KEY}, ts, value FROM w WHERE {_SERIES} UNION ALL SELECT * FROM hot_seeds")})
WHERE minute >= $cut
"""
_TAIL_PARTIALS_SQL = f"INSERT INTO hot_partials BY NAME {_partials('SELECT * FROM hot_minutes')}"
#: The charted partitions' leaders' minutes from one part of the table, beside the tail's.
_CHART_PART_SQL = f"""
INSERT INTO hot_minutes BY NAME
SELECT m.* FROM ({_TABLE_MINUTES}) m
JOIN hot_ranked r
  ON m.cluster = r.cluster AND m.topic = r.topic AND m.partition = r.partition AND m.broker = r.leader_broker
WHERE ($chart IS NULL OR r.pos <= $chart) AND m.metric = '{LEO}' AND m.minute IS NOT NULL
"""

#: ``hot_partials`` -> ``hot_ranked``: the ranking (per cluster), ``pos`` its place in the answer.
_RANK_SQL = f"""
CREATE OR REPLACE TEMP TABLE hot_ranked AS
WITH replicas AS (
    SELECT {_KEY},
           sum(growth) AS growth,
           (epoch_us(max(last_ts)) - epoch_us(min(first_ts))) / 1e6 AS elapsed_s,
           max(peak_per_sec) AS peak_per_sec,
           arg_max(peak_at, peak_order) AS peak_at,
           arg_max(last_value, last_ts) AS last_value,
           sum(value_sum) / nullif(sum(n), 0) AS mean_value,
           max(last_ts) AS last_ts,
           max(rolled_to) AS rolled_to
    FROM hot_partials GROUP BY {_KEY}
),
rated AS (
    SELECT *,
           CASE WHEN elapsed_s > 0 THEN coalesce(growth, 0.0) / elapsed_s END AS per_sec,
           -- the likely leader: highest last LEO, then highest mean LEO, then lowest id
           (coalesce(last_value, '-infinity'::DOUBLE), coalesce(mean_value, '-infinity'::DOUBLE), -broker) AS lead
    FROM replicas
),
parts AS (
    SELECT cluster, topic, partition,
           max(per_sec) FILTER (WHERE metric = '{LEO}') AS records_per_sec,
           max(per_sec) FILTER (WHERE metric <> '{LEO}') AS bytes_per_sec,
           -- the leader's peak, not a follower's catch-up after an outage
           arg_max_null(peak_per_sec, lead) FILTER (WHERE metric = '{LEO}') AS peak_records_per_sec,
           arg_max_null(peak_at, lead) FILTER (WHERE metric = '{LEO}') AS peak_at,
           arg_max_null(broker, lead) FILTER (WHERE metric = '{LEO}') AS leader_broker,
           count(*) FILTER (WHERE metric = '{LEO}') AS replicas,
           max(last_ts) AS last_ts,
           max(rolled_to) AS rolled_to
    FROM rated GROUP BY cluster, topic, partition
),
measured AS (
    -- a partition with Size but no LogEndOffset samples has no rate to rank
    SELECT *, CASE WHEN $rank_by = 'mean' THEN records_per_sec ELSE peak_records_per_sec END AS measure
    FROM parts WHERE replicas > 0
),
ranked AS (
    SELECT *,
           median(measure) OVER t AS topic_median_rate,
           median(peak_records_per_sec) OVER t AS topic_median_peak,
           max(last_ts) OVER c AS data_end,
           max(rolled_to) OVER c AS rollup_end,
           row_number() OVER (
               PARTITION BY cluster
               ORDER BY measure DESC NULLS LAST, bytes_per_sec DESC NULLS LAST, topic, partition
           ) AS rank
    FROM measured
    WINDOW t AS (PARTITION BY cluster, topic), c AS (PARTITION BY cluster)
)
SELECT cluster, topic, partition, leader_broker, replicas, records_per_sec, bytes_per_sec, topic_median_rate,
       CASE WHEN topic_median_rate > 0 THEN measure / topic_median_rate END AS skew,
       rank, peak_records_per_sec, peak_at,
       CASE WHEN topic_median_peak > 0 THEN peak_records_per_sec / topic_median_peak END AS peak_skew,
       data_end, rollup_end,
       row_number() OVER (ORDER BY cluster, rank) AS pos
FROM ranked
WHERE $top IS NULL OR rank <= $top
"""

_RANKED_SQL = "SELECT * EXCLUDE (pos) FROM hot_ranked ORDER BY pos"

#: The chart of the first $chart partitions of the ranking (all with NULL): the likely leader's
#: rate per minute, oldest first, the series' first minute left out (from the rollup it is the
#: baseline, which has no growth counted; both paths draw the same minutes).  One replica's: a
#: follower's copy of a burst lands a minute late, and the max of both per minute would draw a
#: one-minute burst two minutes wide (and a follower back from an outage would draw its catch-up).
_CHART_SQL = f"""
SELECT r.pos,
       list({{'minute': m.minute, 'records_per_sec': coalesce({_RATE}, 0.0)}} ORDER BY m.minute)[2:] AS minute_rates
FROM hot_ranked r
JOIN hot_minutes m
  ON m.cluster = r.cluster AND m.topic = r.topic AND m.partition = r.partition AND m.broker = r.leader_broker
WHERE ($chart IS NULL OR r.pos <= $chart) AND m.metric = '{LEO}' AND m.minute IS NOT NULL
GROUP BY r.pos
"""


def _rank(window: Window, top: int | None, rank_by: str, chart: int | None) -> list[dict[str, Any]]:
    """Rank ``hot_partials``: rows of cluster, topic, partition, leader_broker, replicas,
    records_per_sec, bytes_per_sec, topic_median_rate, skew, rank, peak_records_per_sec, peak_at,
    peak_skew, data_end and rollup_end, ordered by cluster and rank; the first ``chart`` rows (all
    with None) also with ``minute_rates``."""
    if rank_by not in RANK_BY:
        raise ValueError(f"rank_by must be one of {RANK_BY}, got {rank_by!r}")
    params = {"top": None if top is None else int(top), "rank_by": rank_by}
    window.con.execute(_RANK_SQL, params)
    rows = window.rows(_RANKED_SQL)
    _add_charts(window, rows, chart)
    return rows


def _add_charts(window: Window, rows: list[dict[str, Any]], chart: int | None) -> None:
    """``minute_rates`` on the first ``chart`` of the ranked ``rows`` (all with None)."""
    if chart is not None and chart <= 0:
        return
    charts = {r["pos"]: r["minute_rates"] for r in window.rows(_CHART_SQL, {"chart": chart})}
    for pos, row in enumerate(rows[:chart] if chart is not None else rows, 1):
        row["minute_rates"] = charts.get(pos, [])


def hot_partitions(
    window: Window, topic: str | None = None, top: int | None = None, rank_by: str = "mean", minutes: bool = False
) -> list[dict[str, Any]]:
    """Rank topic-partitions by records/s (LogEndOffset growth) over the window's raw samples,
    hottest first.

    Rows of cluster, topic, partition, leader_broker, replicas (brokers that reported LEO),
    records_per_sec (the window mean), bytes_per_sec (Size growth; None without Size samples),
    topic_median_rate, skew, rank, peak_records_per_sec (the highest per-minute rate in the window,
    the likely leader's), peak_at (the start of that minute), peak_skew (the peak over the topic's
    median peak) and data_end (the cluster's newest sample among the partitions ranked: a caller
    tells a quiet window from a lake that stopped).

    ``rank_by`` is ``mean`` (rank and skew on the window mean) or ``peak`` (on the per-minute
    peak; ``topic_median_rate`` and ``skew`` are then the peak's).  Ties are broken by
    bytes_per_sec, topic, partition.  ``topic`` restricts to one topic; without it every topic but
    :data:`METADATA_LOG` is ranked.  ``top`` keeps ranks <= top.  With ``minutes``, a last column
    ``minute_rates``: the partition's per-minute write rates for a chart, dicts of minute and
    records_per_sec, oldest first (see ``_CHART_SQL``)."""
    window.con.execute(RAW_MINUTES_SQL, {"topic": topic, "stale_us": STALE_S * 1_000_000})
    window.con.execute(_NEW_PARTIALS_SQL)
    rows = _rank(window, top, rank_by, None if minutes else 0)
    for r in rows:
        del r["rollup_end"]
    return rows


def hot_partitions_from_rollup(
    window: Window,
    first: _dt.datetime,
    topic: str | None = None,
    top: int | None = None,
    rank_by: str = "mean",
    minutes: bool = False,
) -> list[dict[str, Any]] | None:
    """:func:`hot_partitions` from the minute rollup's rows, a row per replica and minute instead
    of one per sample, for the window from ``first`` (its first minute) to ``window.end``.
    ``window`` holds the raw samples from the cut (``window.start``) on: the table lags the raw
    samples by up to a rollup interval (``ROLLUP_MINUTES_SQL``).

    The rows come with a last column ``rollup_end``: how far the table reached from the cut on.
    Once it holds a minute, every earlier one is complete (rollups run over the minutes each
    ingest batch touched, and a batch carries the brokers' samples up to its scrape); None for a
    cluster whose table holds no minute from the cut on: minutes before it may be missing, and the
    caller must rank from the raw samples instead.  None without a minute table, or with one
    written before its ``seconds`` column existed and not since (it cannot be read as one).

    The table is read an hour at a time (``_table_parts``), each hour's rows reduced to what the
    ranking needs of each replica before the next is read: a day's window (the digest) holds
    1,440 rows per series, and all of them at once took 1.5 GB at 3,000 partitions.  The chart's
    minutes are read again, for the charted partitions only."""
    first, cut = to_utc(first), to_utc(window.start)
    seed_from = cut - _dt.timedelta(seconds=HOT_SEED_S)
    table = {"topic": topic, "first": first, "cut": cut}
    window.con.execute(_NEW_SEEDS_SQL)
    for i, (start, end) in enumerate(_table_parts(first, window.end)):
        if not _attach_part(window, start, end, (LEO, SIZE)):
            return None
        window.con.execute(_TABLE_PARTIALS_SQL if i else _NEW_TABLE_PARTIALS_SQL, table)
        if start < cut and end > seed_from:
            window.con.execute(_SEEDS_SQL, {"topic": topic, "seed_from": seed_from, "cut": cut})
    window.con.execute(TAIL_MINUTES_SQL, {"topic": topic, "stale_us": STALE_S * 1_000_000, "cut": cut})
    window.con.execute(_TAIL_PARTIALS_SQL)
    rows = _rank(window, top, rank_by, 0)
    if minutes:
        _add_table_charts(window, rows, None, first, cut, topic)
    return rows


def _table_parts(start: _dt.datetime, end: _dt.datetime) -> list[tuple[_dt.datetime, _dt.datetime]]:
    """[start, end) cut at every whole hour: the minute table's partitions, read one at a time."""
    parts, t = [], start
    while t < end:
        nxt = min(end, t.replace(minute=0, second=0, microsecond=0) + _dt.timedelta(hours=1))
        parts.append((t, nxt))
        t = nxt
    return parts


def _attach_part(window: Window, start: _dt.datetime, end: _dt.datetime, metrics: tuple[str, ...]) -> bool:
    """The minute table's rows of [start, end) as the view ``hot_1m``; False without a table (or
    with one written before its ``seconds`` column existed, and never since)."""
    try:
        return window.rollup("1m", start, end, metrics, "hot_1m")
    except READ_ERRORS as exc:  # a table without `seconds` (Arrow's "No match for FieldRef"); any other error stands
        if "FieldRef.Name(seconds)" not in str(exc):
            raise
        return False


def _add_table_charts(
    window: Window,
    rows: list[dict[str, Any]],
    chart: int | None,
    first: _dt.datetime,
    cut: _dt.datetime,
    topic: str | None,
) -> None:
    """``minute_rates`` on the first ``chart`` rows (all with None) ranked from the minute table:
    their leaders' minutes before the cut read again from the table (LogEndOffset only), beside
    the tail's."""
    if chart is not None and chart <= 0:
        return
    for start, end in _table_parts(first, cut):
        if _attach_part(window, start, end, (LEO,)):
            window.con.execute(_CHART_PART_SQL, {"topic": topic, "first": first, "cut": cut, "chart": chart})
    _add_charts(window, rows, chart)


# --------------------------------------------------------------------------- the questions


def _facts(
    rows: list[dict[str, Any]], chart: int, resolution: str | None, raw_from: _dt.datetime | None
) -> dict[str, Any]:
    """The answer the commands read: ``rows`` (the ranking), ``series`` (the per-minute rates of
    the first ``chart`` partitions: rows of cluster, topic, partition, minute, records_per_sec),
    ``data_end`` (epoch seconds of the newest sample among the partitions ranked, None without),
    ``resolution`` (``raw``, or ``1m``: the minute rollup, raw samples from ``raw_from`` on)."""
    ends = [t.timestamp() for t in (r.pop("data_end") for r in rows) if t is not None]
    series: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        points = r.pop("minute_rates", None) or []
        if i < chart:
            part = {"cluster": r["cluster"], "topic": r["topic"], "partition": r["partition"]}
            series += [{**part, "minute": p["minute"], "records_per_sec": p["records_per_sec"]} for p in points]
    return {
        "rows": rows,
        "series": series,
        "data_end": max(ends, default=None),
        "resolution": resolution,
        "raw_from": raw_from,
    }


def _raw_answer(
    window: Window, topic: str | None, top: int | None, rank_by: str = "peak", chart: int = 0
) -> dict[str, Any]:
    window.con.execute(RAW_MINUTES_SQL, {"topic": topic, "stale_us": STALE_S * 1_000_000})
    window.con.execute(_NEW_PARTIALS_SQL)
    rows = _rank(window, top, rank_by, chart)
    for r in rows:
        del r["rollup_end"]
    return _facts(rows, chart, "raw", None)


#: Asked when the rollup cannot answer: no minute table, no rows, or a table behind the cut.
NOT_FROM_ROLLUP: dict[str, Any] = {"rows": [], "series": [], "data_end": None, "resolution": None, "raw_from": None}


def _rollup_answer(
    window: Window,
    first: _dt.datetime,
    topic: str | None,
    top: int | None,
    rank_by: str = "peak",
    chart: int = 0,
) -> dict[str, Any]:
    """``window`` holds the tail (from the cut on); ``first``: the window's first minute."""
    if rank_by not in RANK_BY:
        raise ValueError(f"rank_by must be one of {RANK_BY}, got {rank_by!r}")
    rows = hot_partitions_from_rollup(window, first, topic, top, rank_by)
    reached = [r.pop("rollup_end") is not None for r in rows or []]
    if not rows or not all(reached):
        return dict(NOT_FROM_ROLLUP)
    cut = to_utc(window.start)
    _add_table_charts(window, rows, chart, to_utc(first), cut, topic)  # once the table is known to have caught up
    return _facts(rows, chart, "1m", cut)


#: The ranking from the window's raw samples: ``answer(window, topic, top, rank_by, chart)``.
HOT_QUESTION = Question("hot_partitions", (LEO, SIZE), _raw_answer)
#: The ranking from the minute rollup, asked over the window's raw tail (from the cut on):
#: ``answer(tail, first, topic, top, rank_by, chart)``; ``resolution`` None when the rollup cannot
#: answer and the raw samples must (:func:`ask_hot`).
HOT_ROLLUP_QUESTION = Question("hot_partitions_1m", (LEO, SIZE), _rollup_answer)


#: The longest window ranked from raw samples (see :func:`ask_hot`).
RAW_MAX_S = 3600


def rollup_span(start: _dt.datetime, end: _dt.datetime) -> tuple[_dt.datetime, _dt.datetime] | None:
    """(the window's first minute, the cut: where its raw tail begins) when a window this long is
    ranked from the minute rollup; None when the raw samples rank it (shorter than
    :data:`HOT_ROLLUP_FROM_S`, or too short to leave whole minutes before the tail: the baseline
    minute and at least one more)."""
    if (end - start).total_seconds() < HOT_ROLLUP_FROM_S:
        return None
    first = _floor_minute(to_utc(start))
    cut = _floor_minute(to_utc(end)) - _dt.timedelta(seconds=HOT_RAW_TAIL_S)
    if cut - first < _dt.timedelta(minutes=2):
        return None
    return first, cut


def _floor_minute(t: _dt.datetime) -> _dt.datetime:
    return t.replace(second=0, microsecond=0)


#: ``ask(question, start, end, *args)``: a window question answered over [start, end) (for the
#: bot, ``LakeService.ask_window`` through ``diagnosis.lake_evidence``).
AskWindow = Callable[..., Awaitable[dict[str, Any]]]


async def ask_hot(
    ask: AskWindow,
    start: _dt.datetime,
    end: _dt.datetime,
    topic: str | None = None,
    top: int | None = None,
    rank_by: str = "peak",
    chart: int = 0,
) -> dict[str, Any]:
    """The ranking of [start, end) (``_facts``' dict): from the minute rollup with a raw tail for
    a long window whose rollup has caught up, else from the raw samples.  The rollup is asked
    first; a rollup that cannot answer costs a read of the tail and of the table's minutes."""
    span = rollup_span(start, end)
    if span is not None:
        first, cut = span
        facts = await ask(HOT_ROLLUP_QUESTION, cut, end, first, topic, top, rank_by, chart)
        if facts["resolution"] is not None:
            return facts
    # The raw samples are read into the bot's memory: a day of them at 3,000 partitions is ~3 GB.
    # A longer window whose rollup cannot answer is ranked over its last RAW_MAX_S only, and says so.
    narrowed = max(start, end - _dt.timedelta(seconds=RAW_MAX_S))
    facts = await ask(HOT_QUESTION, narrowed, end, topic, top, rank_by, chart)
    facts["ranked_from"] = narrowed if narrowed > start else None
    return facts
