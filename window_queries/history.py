"""``history <metric>`` answered in the bot's process: DuckDB over the rollup tables' Delta snapshot.

The same numbers as Spark's answer (``lake.queries.q_history``: ``spark_queries.rollup.rollup_history``
over a rollup table, ``spark_queries.history.metric_history`` over raw samples), per cluster,
bucket and broker:

* the table is the coarsest one whose buckets tile the history's bucket width and that exists
  (``1h``, ``1m``, else the raw samples); the hour table holds closed hours only, so its newest
  ``lake.schema.OPEN_HOURS`` hours come from the minute rollup (Spark's ``LakeView.rollup``);
* a gauge is the largest sample in the bucket (max of the rows' ``max``), ``samples`` the count;
* a ``*PerSec`` meter is, per series (cluster, broker, topic, partition, labels), its increase
  over the seconds the lake saw of the bucket (``seconds``; a row written before that column
  existed counts as seen for its whole width when it has an increase), summed over the series:
  a bucket seen in part (still filling, cut by the window's start, after a gap) reads at the rate
  it was seen at.  A bucket with no step has no rate and is left out.  From raw samples the steps
  are the rollup's (``minute_rollup``): reset-aware, none over a gap longer than ``STALE_S``.

``newest`` (per row) and ``data_end`` (of the answer) are the time of the newest sample the rows
were made of, in epoch seconds: how old the history's data is.

Where the answer is read is decided before a data file is opened, from Delta's log: the files
the read would open after partition pruning.  Past :data:`BUDGET_BYTES`, on an object store, or
over several clusters the question raises ``lake.embedded.PastCrossover`` and Spark answers it
(``diagnosis.lake_evidence.history``; ``docs/lake-engines.md`` has the measurements).

User values (the metric, topic, broker, partition) reach DuckDB and Arrow only as bound values.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from lake.embedded import FileSet, PastCrossover, Question, Window, WindowReader
from lake.schema import RAW, RESOLUTION_NAMES, ROLLUPS, STALE_S, open_hours_start, to_utc

#: The files (bytes on disk, after partition pruning) one question reads in process; past it,
#: Spark.  Measured (scripts/bench_history.py, docs/lake-engines.md; 3,000 partitions, load ~45 on
#: 2 cores): a day of the minute rollup (114 MB) answers a metric of a few series in 0.3-0.6 s and
#: even a metric on every row in 2.9 s, where Spark took 2-8 s.  The largest read of minutes
#: `history` makes is 2 days (3 days and more read the hour table), 228 MB at that size; a bigger
#: lake goes to Spark.
BUDGET_BYTES = 256 * 1024 * 1024

_SERIES = "cluster, broker, topic, partition, list_sort(map_entries(labels)) AS lk"

_GAUGE_SQL = """
WITH hist AS ({hist})
SELECT cluster, epoch_us(bucket) // 1000000 // $bucket_s * $bucket_s AS bucket, broker,
       max("max")::DOUBLE AS value, sum("count")::BIGINT AS samples, epoch_us(max(last_ts)) / 1e6 AS newest
FROM hist GROUP BY ALL ORDER BY bucket, broker
"""

_COUNTER_SQL = f"""
WITH hist AS ({{hist}}), per_series AS (
    SELECT {_SERIES}, epoch_us(bucket) // 1000000 // $bucket_s * $bucket_s AS b,
           sum(inc) AS inc,
           sum(coalesce(seconds, CASE WHEN inc IS NOT NULL THEN width END)) AS seen,
           sum("count") AS samples, max(last_ts) AS newest
    FROM hist GROUP BY ALL
)
SELECT * FROM (
    SELECT cluster, b AS bucket, broker, sum(CASE WHEN seen > 0 THEN inc / seen END)::DOUBLE AS value,
           sum(samples)::BIGINT AS samples, epoch_us(max(newest)) / 1e6 AS newest
    FROM per_series GROUP BY ALL
) WHERE value IS NOT NULL ORDER BY bucket, broker
"""

# raw samples as rollup rows of the history's own width (spark_queries.rollup.minute_rollup)
_RAW_AS_ROLLUP = f"""
WITH s AS (
    SELECT {_SERIES}, ts, value,
           lag(value) OVER k AS before, epoch_us(ts) - epoch_us(lag(ts) OVER k) AS gap_us
    FROM raw_rows WINDOW k AS (PARTITION BY cluster, broker, topic, partition, list_sort(map_entries(labels)) ORDER BY ts)
), steps AS (
    SELECT *, CASE WHEN gap_us <= $stale_us THEN before END AS prev FROM s
)
SELECT cluster, broker, topic, partition,
       CASE WHEN lk IS NULL THEN NULL ELSE map_from_entries(lk) END AS labels,
       to_timestamp(epoch_us(ts) // 1000000 // $bucket_s * $bucket_s) AS bucket,
       max(value) AS "max", count(*) AS "count", max(ts) AS last_ts,
       sum(CASE WHEN prev IS NULL THEN NULL WHEN value < prev THEN value ELSE value - prev END) AS inc,
       sum(CASE WHEN gap_us <= $stale_us THEN gap_us / 1e6 END) AS seconds
FROM steps GROUP BY ALL
"""

# one read of a rollup table: DuckDB's Parquet reader over the snapshot's files of the read's
# partitions, with the question's filters pushed to it and only the columns it needs read (the
# gauge needs no labels: decoding them was most of an Arrow read's time)
_ROLLUP_ROWS = (
    "SELECT bucket, $cluster AS cluster, broker, topic, partition, {labels} AS labels, "
    '"max", "count", last_ts, inc, seconds, {width} AS width '
    "FROM read_parquet($files_{i}) WHERE metric = $metric AND bucket >= $start_{i} AND bucket < $end_{i}"
    " AND ($topic IS NULL OR topic = $topic) AND ($broker IS NULL OR broker = $broker)"
    " AND ($partition IS NULL OR partition = $partition)"
)


_PRESENT_SQL = "SELECT DISTINCT metric FROM read_parquet($files) WHERE bucket >= $start AND bucket < $end"


def resolution_for(window: Window, bucket_s: int) -> str:
    """The coarsest table whose buckets tile ``bucket_s`` exactly and that exists (as Spark's
    ``LakeView.resolution_for``): ``1h``, ``1m`` or ``raw``."""
    for name, width in sorted(ROLLUPS.items(), key=lambda kv: -kv[1]):
        reader = window.rollups.get(name)
        if bucket_s >= width and bucket_s % width == 0 and reader is not None and reader.exists():
            return name
    return RAW


def plan(
    window: Window, resolution: str, start: _dt.datetime, end: _dt.datetime, now: float
) -> list[tuple[WindowReader, _dt.datetime, _dt.datetime, int]]:
    """The reads that answer [start, end) at ``resolution``: (table, from, to, row width).

    A rollup read starts at the bucket ``start`` falls in.  The hour table's newest
    :data:`lake.schema.OPEN_HOURS` hours (by ``now``) are read from the minute rollup, as Spark
    reads them; a minute row and the hour row it rolls into add up to the same per-series sums,
    so the two are read side by side instead of rolled up first."""
    if resolution == RAW:
        assert window.raw is not None
        return [(window.raw, start, end, 0)]
    width = ROLLUPS[resolution]
    s = _dt.datetime.fromtimestamp(int(to_utc(start).timestamp()) // width * width, _dt.timezone.utc)
    e = to_utc(end)
    reader = window.rollups[resolution]
    minutes = window.rollups.get("1m")
    cut = _dt.datetime.fromtimestamp(open_hours_start(now), _dt.timezone.utc)
    if resolution != "1h" or e <= cut or minutes is None or not minutes.exists():
        return [(reader, s, e, width)]
    recent = (minutes, max(s, cut), e, ROLLUPS["1m"])
    return [recent] if s >= cut else [(reader, s, cut, width), recent]


def _answer(
    window: Window,
    metric: str,
    topic: str | None,
    broker: int | None,
    partition: int | None,
    bucket_s: int,
    now: float,
    budget_bytes: int | None = BUDGET_BYTES,
) -> dict[str, Any]:
    bucket_s = int(bucket_s)
    if bucket_s <= 0:
        raise ValueError("bucket width must be a positive number of seconds")
    resolution = resolution_for(window, bucket_s)
    reads = plan(window, resolution, window.start, window.end, now)
    files = FileSet()
    for reader, s, e, _w in reads:
        if reader.remote:
            raise PastCrossover("the lake is on an object store")
        files = files + reader.files(s, e, window.cluster)
    if len(files.clusters) > 1:
        raise PastCrossover(f"the history spans {len(files.clusters)} clusters", files)
    if budget_bytes is not None and files.bytes > budget_bytes:
        raise PastCrossover(
            f"the history reads {files.bytes / 1e6:,.0f} MB in {files.files} files, past the "
            f"{budget_bytes / 1e6:,.0f} MB one process reads in about a second",
            files,
            budget=True,
        )
    where = {k: v for k, v in (("topic", topic), ("broker", broker), ("partition", partition)) if v is not None}
    params: dict[str, Any] = {"bucket_s": bucket_s}
    counter = metric.endswith("PerSec")
    if resolution == RAW:
        window.attach("raw_rows", reads[0][0].read(reads[0][1], reads[0][2], window.cluster, [metric], where))
        hist = f"SELECT *, $bucket_s AS width FROM ({_RAW_AS_ROLLUP})"
        params["stale_us"] = STALE_S * 1_000_000
    else:
        params.update(metric=metric, topic=topic, broker=broker, partition=partition)
        params["cluster"] = next(iter(files.clusters), window.cluster)
        parts = []
        for i, (reader, s, e, width) in enumerate(reads):  # names and widths are ours, never a user's
            uris = reader.file_uris(s, e, window.cluster)
            if not uris:
                continue
            params.update({f"files_{i}": uris, f"start_{i}": s, f"end_{i}": e})
            labels = "labels" if counter else "NULL::MAP(VARCHAR, VARCHAR)"
            parts.append(_ROLLUP_ROWS.format(width=int(width), i=i, labels=labels))
        if not parts:
            return _facts([], [], resolution, bucket_s, files)
        hist = " UNION ALL ".join(parts)
    out = window.rows((_COUNTER_SQL if counter else _GAUGE_SQL).format(hist=hist), params)
    present: list[str] = []
    if not out:  # say what the window does hold, to suggest a name
        names: set[str] = set()
        for reader, s, e, _w in reads:
            uris = reader.file_uris(s, e, window.cluster) if resolution != RAW else []
            if uris:  # only the metric column, by DuckDB's reader
                found = window.con.execute(_PRESENT_SQL, {"files": uris, "start": s, "end": e}).fetchall()
                names |= {m for (m,) in found}
            elif resolution == RAW:
                names |= set(reader.read(s, e, window.cluster, None, columns=("metric",)).column("metric").to_pylist())
        present = sorted(n for n in names if n is not None)[:60]
    return _facts(out, present, resolution, bucket_s, files)


def _facts(
    out: list[dict[str, Any]], present: list[str], resolution: str, bucket_s: int, files: FileSet
) -> dict[str, Any]:
    ends = [r["newest"] for r in out if r["newest"] is not None]
    return {
        "rows": out,
        "present": present,
        "resolution": resolution,
        "resolution_name": RESOLUTION_NAMES[resolution],
        "bucket_s": bucket_s,
        "data_end": max(ends) if ends else None,
        "engine": "in process",
        "read": {"files": files.files, "bytes": files.bytes, "rows": files.rows},
    }


#: ``answer(window, metric, topic, broker, partition, bucket_s, now, budget_bytes)``: reads no
#: ``w`` (it picks its tables itself: no metrics to read up front).  ``rows``: cluster, bucket
#: (epoch s), broker, value, samples, newest (epoch s); see the module docstring.
HISTORY_QUESTION = Question("history", (), _answer)
