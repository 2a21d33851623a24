"""history <metric> [--since 1h] [--topic T] [--broker N] [--partition P]: one metric over time, per broker, from the metric lake.

One line per minute (wider buckets for long windows), one value per broker, newest first, under
the age of the data (when its newest sample was taken, how long before the answer). Gauges show the
largest sample in the bucket; cumulative meters (names ending in PerSec) show the events per
bucket (counter restarts handled), at the rate measured over the part of the bucket the lake saw:
the bucket still filling, the one the window's start cuts and the one after a collector outage
read at their real rate instead of a false drop or spike. The answer is read from the coarsest
table that has the bucket width (1-hour rollups for days, 1-minute rollups for hours, raw samples
below a minute) and says which it used, and which engine read it: this process (DuckDB over the
Delta snapshot) for what it reads in about a second, Spark past that (docs/lake-engines.md).
Runbook words work as names too: `history URP` is UnderReplicatedPartitions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from rapidfuzz import process

from diagnosis import lake_evidence as lake
from diagnosis.lake_age import LakeAgeReply, YoungLake, guarded, young_or_none, young_reply
from diagnosis.trends import MAX_POINTS, broker_series, bucket_for, by_bucket
from framework.context import Context
from framework.reply import Evidence, Reply, Section
from framework.spec import Command, CommandRequest, CommandSpec, Option, Param
from runbook_kb.lookup import norm

MAX_BROKER_COLUMNS = 8
PER_PARTITION = frozenset(
    {"LogEndOffset", "LogStartOffset", "Size", "LastStableOffsetLag", "CommittedOffset", "ConsumerLag"}
)

SPEC = CommandSpec(
    words=("history",),
    summary="One metric over time from the metric lake: a value per minute and broker.",
    params=(
        Param(
            "metric",
            "UnderReplicatedPartitions (or URP), IsrShrinksPerSec, LogEndOffset, RequestHandlerAvgIdlePercent ...",
            kind="word",
        ),
    ),
    options=(
        lake.since_option("1h"),
        Option("topic", "only samples of this topic", kind="topic"),
        Option("broker", "only samples reported by this broker (node id)", kind="int"),
        Option("partition", "only samples of this partition number", kind="int"),
    ),
    examples=(
        "history URP",
        "history IsrShrinksPerSec --since 30m --broker 102",
        "history LogEndOffset --topic orders --partition 3",
    ),
)


def known_metrics() -> list[str]:
    return lake.known_metrics()


def resolve_metric(ctx: Context, text: str) -> tuple[str, bool]:
    """(metric name, known?): exact name (any case), then the runbook's vocabulary; else as typed."""
    names = known_metrics()
    by_lower = {n.lower(): n for n in names}
    if text.lower() in by_lower:
        return by_lower[text.lower()], True
    target = ctx.kb.vocabulary.get(text) or next(
        (v for k, v in ctx.kb.vocabulary.items() if norm(k) == norm(text)), None
    )
    if target is not None and target.lower() in by_lower:
        return by_lower[target.lower()], True
    return text, False


def _clip(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(value: float | None, counter: bool, bucket_s: int = 60) -> str:
    if value is None:
        return "-"
    if counter:  # a meter's rate, shown as the events per bucket at that rate
        return f"+{value * bucket_s:,.0f}"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.3g}"


def _who(broker: int) -> str:
    return "cluster" if broker == -1 else f"b{broker}"


@dataclass(frozen=True)
class DataAge:
    """How old a history's data is: ``short`` for the verdict, ``long`` for the evidence."""

    short: str
    long: str
    seconds: float | None


def _ago(seconds: float) -> str:
    secs = max(0, int(seconds))
    if secs < 120:
        return f"{secs} s"
    if secs < 7200:
        return f"{secs // 60} min"
    return lake.describe_since(dt.timedelta(minutes=secs // 60))


def data_age(data_end: float | None, now: float) -> DataAge:
    """The newest sample the answer was made of and its age at ``now`` (epoch seconds)."""
    if data_end is None:
        return DataAge("data age unknown", "the lake did not say when its newest sample was taken", None)
    age = now - data_end
    when = f"{dt.datetime.fromtimestamp(data_end, dt.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
    return DataAge(f"data {_ago(age)} old", f"newest sample {when}, {_ago(age)} before this answer", age)


def engine_line(facts: dict[str, Any]) -> str:
    """Which engine read the history, and why Spark when it did (docs/lake-engines.md)."""
    if facts.get("engine") == "in process":
        read = facts.get("read") or {}
        size = f": {read.get('files', 0)} file(s), {read.get('bytes', 0) / 1e6:,.1f} MB" if read else ""
        how = "in process (DuckDB over the Delta snapshot)" + size
        reason = facts.get("engine_reason")
        return how + (f"; {reason}" if reason else "")
    reason = facts.get("engine_reason")
    return "Spark" + (f": {reason}" if reason else "")


async def run(request: CommandRequest, ctx: Context) -> Reply:
    typed = str(request.args["metric"])
    metric, known = resolve_metric(ctx, typed)
    topic = request.option_text("topic")
    broker = request.option_int("broker")
    partition = request.option_int("partition")
    window = lake.window_for(request, ctx, default=dt.timedelta(hours=1))
    bucket_s = bucket_for(window.since)
    await ctx.progress(f"reading {metric} over the {lake.describe_since(window.since)} from the metric lake")
    young: YoungLake | None = None
    try:
        facts = await guarded(
            ctx, request, window, lambda: lake.history(ctx, request, window, metric, topic, broker, partition, bucket_s)
        )
    except YoungLake as exc:
        facts, young = {"rows": []}, exc
    rows = facts["rows"]
    resolution = facts.get("resolution_name") or "raw samples"
    scope = "".join(
        [
            f" topic {topic}" if topic else "",
            f" partition {partition}" if partition is not None else "",
            f" broker {broker}" if broker is not None else "",
        ]
    )
    title = f"History of {_clip(metric)}" + (f" ({scope.strip()})" if scope else "")
    if not rows:
        present = facts.get("present") or []
        suggestions = [
            name for name, _s, _i in process.extract(metric, present or known_metrics(), limit=3, score_cutoff=60)
        ]
        if known or metric in present:
            # a known metric with no samples: a lake too young to hold any is told apart from a
            # window without them (the collector stopped, or the cluster has no such series)
            young = young or await young_or_none(ctx, request, window)
        if young is not None and young.first is None:  # it holds no sample at all yet
            return young_reply(
                title, window, young, "lake: metric_history", f"No {_clip(metric)} samples{scope} in the lake yet."
            )
        if not known and metric not in present:
            verdict = f"Unknown metric '{_clip(metric)}': the metric lake has no such metric in the last {lake.describe_since(window.since)}."
        else:
            verdict = f"No data for this window: no {_clip(metric)} samples{scope} in the last {lake.describe_since(window.since)}."
        notes = (
            [f"Metrics in this window: {', '.join(present[:20])}" + (" …" if len(present) > 20 else "")]
            if present
            else ["The lake has no samples at all in this window."]
        )
        if young is not None:  # it holds other samples, for less than the window
            notes.append(f"The metric lake is younger than this window ({young.minutes} min collected): {young.held}")
        notes.append(f"Resolution: {resolution}.")
        return Reply(
            title=title,
            severity="info",
            verdict=verdict,
            window=window.label,
            notes=notes,
            evidence=[lake.no_data(window, "lake: metric_history", f"{_clip(metric)} samples{scope}")],
            followups=[f"/kafka history {s}" for s in suggestions],
        )
    if min(r["bucket"] for r in rows) >= window.start.timestamp() // bucket_s * bucket_s + bucket_s:
        # the series begins after the window's first bucket: a young lake has not seen all of it
        young = await young_or_none(ctx, request, window)
    counter = metric.endswith("PerSec")
    brokers = sorted({r["broker"] for r in rows})
    clusters = sorted({r["cluster"] for r in rows})
    buckets = by_bucket(rows)
    width = "minute" if bucket_s == 60 else lake.describe_since(dt.timedelta(seconds=bucket_s))
    lines = []
    for b in sorted(buckets, reverse=True)[:MAX_POINTS]:  # newest first: a short answer cuts the oldest
        t = dt.datetime.fromtimestamp(b, dt.timezone.utc)
        values = buckets[b]
        if len(brokers) <= MAX_BROKER_COLUMNS:
            cells = "  ".join(f"{_who(k)} {_fmt(values.get(k), counter, bucket_s)}" for k in brokers)
        else:
            top = max(values.items(), key=lambda kv: kv[1])
            cells = f"max {_fmt(top[1], counter, bucket_s)} on {_who(top[0])} ({len(values)} brokers)"
        lines.append(f"{t:%H:%M}  {cells}")
    last_bucket = max(buckets)
    newest = buckets[last_bucket]
    peak = max(rows, key=lambda r: r["value"])
    unit = f"events per {width}" if counter else f"largest sample per {width}"
    age = data_age(facts.get("data_end"), ctx.clock())
    verdict = (
        f"{metric}{scope}: newest {dt.datetime.fromtimestamp(last_bucket, dt.timezone.utc):%H:%M} UTC ({age.short}) "
        f"{', '.join(f'{_who(k)} {_fmt(v, counter, bucket_s)}' for k, v in sorted(newest.items())[:MAX_BROKER_COLUMNS])}; "
        f"peak {_fmt(peak['value'], counter, bucket_s)} on {_who(peak['broker'])} at "
        f"{dt.datetime.fromtimestamp(peak['bucket'], dt.timezone.utc):%H:%M} UTC."
    )
    newest_at = dt.datetime.fromtimestamp(last_bucket, dt.timezone.utc)
    evidence = [
        Evidence("Data age", age.long, "lake: metric_history", "neutral"),
        Evidence(
            "Series",
            f"{len(buckets)} {width} bucket(s) x {len(brokers)} broker(s), {unit}; newest bucket {newest_at:%H:%M} UTC, "
            f"{lake.age(ctx.clock() - last_bucket)} before this answer",
            "lake: metric_history",
            "neutral",
        ),
        Evidence("Resolution", f"{resolution} ({facts.get('resolution', 'raw')})", "lake: metric_history", "neutral"),
        Evidence("Read by", engine_line(facts), "lake: metric_history", "neutral"),
    ]
    notes = [
        f"Resolution: {resolution}"
        + ("; no raw samples were read." if facts.get("resolution") not in (None, "raw") else ".")
    ]
    if len(clusters) > 1:
        notes.append(
            f"Samples from {len(clusters)} clusters ({', '.join(clusters)}) are combined; add --cluster to pick one."
        )
    if metric in PER_PARTITION and (topic is None or partition is None):
        notes.append(
            "Per-partition series are combined per broker (largest value); add --topic/--partition for one series."
        )
    if young is not None:
        # what the lake has seen so far, under the one line that says it has not seen enough
        verdict = f"{young.short[:-1]} for the last {lake.describe_since(window.since)}; so far: {verdict}"
        evidence.insert(0, young.evidence())
        notes.insert(0, young.held)
    reply = Reply(
        title=title,
        severity="info",
        verdict=verdict,
        evidence=evidence,
        sections=[Section(f"Per {width} (UTC), newest first", lines)],
        notes=notes,
        window=window.label,
        # a meter's chart in the unit it is labelled with: events per bucket, as the lines show
        series=broker_series(metric, scope, unit, buckets, brokers, scale=bucket_s if counter else 1),
    )
    return reply if young is None else LakeAgeReply(**vars(reply), lake=young.as_dict())


COMMAND = Command(SPEC, run)
