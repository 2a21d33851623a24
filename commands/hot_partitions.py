"""hot-partitions [topic] [--since 30m] [--rank peak|mean]: partitions ranked by write rate, from the metric lake.

A partition's rate is its LogEndOffset growth per second. By default partitions are ranked on the
peak of their per-minute rates within the window (a 70 s burst shows at its own rate instead of
being averaged over 15 minutes); `--rank mean` ranks on the mean over the window. Both figures
are shown, and the answer says which one it ranked on. Skew is the ranked rate divided by the
median of its topic's partitions, so a hot key shows as one partition far above its siblings. The leader is taken from the cluster's metadata when a cluster is configured,
else inferred from the lake (the replica that was ahead). When the lake cannot answer (none
configured, Spark down, a query past its timeout, a young lake, no samples in the window), the
partitions are ranked on the cluster's end offsets read a few seconds apart, and the answer says
that this is a live-only ranking over those seconds, not the window's, and why the lake could not
answer.
"""

from __future__ import annotations

import asyncio

from diagnosis import lake_evidence as lake
from diagnosis.entries import diagnosis
from diagnosis.entry_ids import HOT_PARTITION
from diagnosis.lake_age import LakeAgeReply, YoungLake, guarded, young_or_none, young_reply
from diagnosis.metric_checks import hot_partition_findings, ranked_rates, read_partition_rates
from diagnosis.thresholds import hot_rule
from framework.context import Context
from framework.errors import Unavailable
from framework.gateways import gateway
from framework.reply import Evidence, Reply, Series, Table
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Option, Param
from live.gateway import GatewayError, UnknownTopic

DEFAULT_TOP = 10
MAX_TOP = 50
CHART_LINES = 5  # partitions drawn per minute in the chart: the first of the ranking

SPEC = CommandSpec(
    words=("hot-partitions",),
    summary="Partitions ranked by records/s over a window (metric lake), with skew vs their topic's median and the leader broker.",
    params=(Param("topic", "only this topic", kind="topic", required=False),),
    options=(
        lake.since_option("15m"),
        Option("top", f"how many partitions to list (default {DEFAULT_TOP}, at most {MAX_TOP})", kind="int"),
        Option("rank", "peak (the highest 1-minute rate in the window, default) or mean (over the window)"),
    ),
    examples=("hot-partitions", "hot-partitions orders --since 30m", "hot-partitions --rank mean"),
    details="From LogEndOffset growth in the metric lake; the answer names the window it looked at and "
    "whether it ranked on the per-minute peak or the window mean. When the lake cannot answer (none, down, "
    "too young, no samples), it ranks on the cluster's end offsets read a few seconds apart instead, and says so.",
)

#: A young lake and no cluster to read instead.
_YOUNG_NOTE = "With a cluster configured, the partitions are ranked on its live end offsets meanwhile."


async def _live_leaders(
    ctx: Context, request: CommandRequest, topics: list[str], notes: list[str]
) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> leader from the cluster's metadata; {} without a cluster."""
    if ctx.live is None or not topics:
        return {}

    try:
        gw = await gateway(ctx, request.cluster)
        try:
            described = await gw.describe_topics(topics)
        except UnknownTopic as exc:
            # a topic the lake remembers may be gone now: the others still get live leaders
            notes.append(
                f"Not in the cluster's metadata now (deleted?): {', '.join(exc.topics)}; "
                "their leaders are the lake's estimate."
            )
            rest = [t for t in topics if t not in set(exc.topics)]
            described = await gw.describe_topics(rest) if rest else []
    except (GatewayError, Unavailable) as exc:
        notes.append(f"Leaders are the lake's estimate: the cluster did not answer ({exc}).")
        return {}
    return {(p.topic, p.partition): p.leader for t in described for p in t.partitions}


#: Seconds between the two end-offset reads of the live ranking: long enough that a partition
#: written a few records a second shows, short enough for an answer in an incident.
LIVE_GAP_S = 3.0
#: Seconds the live ranking waits, after its reads, for the lake's age (a Spark query, asked
#: while the cluster was read) to say "not enough data yet" instead of "no samples".
YOUNG_WAIT_S = 2.0


def _why_not_lake(ctx: Context, lake_error: Unavailable) -> str:
    """Why the lake did not rank, in a few words, for the verdict (the whole reason, with what to
    do about it, is the evidence's "Metric lake" line)."""
    if isinstance(lake_error, YoungLake):
        return f"not enough data yet, {lake_error.minutes} min collected"
    if ctx.lake is None:
        return "no metric lake is configured"
    if lake.timed_out(lake_error):
        return "its query ran past its time limit"
    if isinstance(lake_error, _NoSamples):
        return f"no LogEndOffset samples in its last {lake_error.since}"
    return "it is unavailable"


class _NoSamples(Unavailable):
    """The lake answered, with no LogEndOffset samples for the window (a lake that holds older data)."""

    def __init__(self, scope: str, since: str):
        self.since = since
        super().__init__(
            f"The metric lake has no LogEndOffset samples for {scope} in the last {since}: its collector "
            "may have stopped, or the exporters give no per-partition offsets."
        )


async def _live_instead(
    ctx: Context,
    request: CommandRequest,
    topic: str | None,
    top: int,
    window: lake.Window,
    lake_error: Unavailable,
    young: "asyncio.Future[YoungLake | None] | None" = None,
) -> Reply:
    """The lake cannot answer (none configured, Spark down, a query past its timeout, a young lake,
    no samples in the window): rank on the cluster's end offsets instead, two ListOffsets reads
    :data:`LIVE_GAP_S` apart, and say plainly that this is a live-only ranking over those seconds
    and why the lake could not answer.  ``young``: the lake's age, being told while the cluster is
    read (it turns "no samples" into "not enough data yet").  Without a cluster, or when it fails
    too, the lake's own answer stands (with the cluster's error)."""

    try:
        if ctx.live is None:
            young_lake = await young if young is not None else None
            raise young_lake or lake_error
        try:
            await ctx.progress(f"the lake cannot rank them: reading end offsets {LIVE_GAP_S:g} s apart")
            live = await read_partition_rates(await gateway(ctx, request.cluster), topic, LIVE_GAP_S)
        except GatewayError as exc:
            if isinstance(exc, UnknownTopic):
                raise
            raise Unavailable(f"{lake_error} The live end offsets failed too: {exc}") from exc
        if young is not None:
            # the lake's age comes from Spark, which may be starting: the live ranking does not wait long
            await asyncio.wait({young}, timeout=YOUNG_WAIT_S)
            if young.done() and not young.cancelled() and young.exception() is None:
                lake_error = young.result() or lake_error
    finally:
        if young is not None and not young.done():
            young.cancel()
    found = hot_partition_findings(live)
    scope = f"topic {topic}" if topic else "all topics"
    since = lake.describe_since(window.since)
    seconds = f"{live.seconds:.1f} s"
    diagnoses = [
        diagnosis(ctx.kb, ctx.kb.failure_modes[entry_id], reason=reason)
        for entry_id, reason in found.lead
        if entry_id in ctx.kb.failure_modes
    ]
    ranked = ranked_rates(live.rates)
    table = Table(
        f"Live ranking: records/s between two end-offset reads {seconds} apart",
        ["#", "partition", "rec/s", "x topic median", "leader"],
        [
            [n, f"{t}-{p}", round(rate, 1), round(rate / median, 1) if median > 0 else None, live.leaders.get((t, p))]
            for n, ((t, p), rate, median) in enumerate(ranked[:top], 1)
        ],
        more=max(0, len(ranked) - top),
    )
    why = _why_not_lake(ctx, lake_error)
    reply = LakeAgeReply(
        title=f"Hot partitions ({scope}), live",
        severity=found.severity,
        verdict=f"{found.verdict} Live-only ranking over {seconds} of end offsets: the metric lake could not "
        f"answer ({why}).",
        evidence=[*found.evidence, Evidence("Metric lake", str(lake_error), "lake", "neutral")],
        diagnoses=diagnoses,
        tables=[table] if ranked else [],
        actions=found.actions,
        notes=[
            f"Live-only: each partition's end offset read twice (ListOffsets), {seconds} apart, and ranked on the "
            f"records written between; not the lake's last {since}, so a burst that ended before those seconds "
            "does not show. Ask again for the lake's ranking once it answers.",
            *found.notes,
        ],
        followups=["/kafka hot-partitions" + (f" {topic}" if topic else "")],
        lake={"answered": False, "reason": why, **(lake_error.as_dict() if isinstance(lake_error, YoungLake) else {})},
    )
    if not ranked:
        reply.notes.append(f"No partition with a leader to read in {scope}.")
    return reply


def _rates(r: lake.Row, rank_by: str) -> str:
    """Both rates, the ranked one first: 'peak 714.0 rec/s at 22:41 (1-min), mean 96.2 rec/s'."""
    peak, mean = r.get("peak_records_per_sec"), r.get("records_per_sec")
    at = r.get("peak_at")
    peak_text = (
        f"peak {peak:,.1f} rec/s" + (f" at {at:%H:%M}" if at is not None else "") + " (1-min)"
        if peak is not None
        else "peak unknown"
    )
    mean_text = f"mean {mean:,.1f} rec/s" if mean is not None else "mean unknown"
    return f"{peak_text}, {mean_text}" if rank_by == "peak" else f"{mean_text}, {peak_text}"


def _ranked(r: lake.Row, rank_by: str) -> float | None:
    """The rate the ranking is on (and the hot rule applies to): the peak minute's, or the mean."""
    rate = r.get("peak_records_per_sec") if rank_by == "peak" else r.get("records_per_sec")
    return None if rate is None else float(rate)


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 1)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    topic = request.arg_text("topic")
    top = int(request.options.get("top") or DEFAULT_TOP)
    top = max(1, min(MAX_TOP, top))
    rank_by = str(request.options.get("rank") or "peak").strip().lower()
    if rank_by not in ("peak", "mean"):
        raise BadInput(f"--rank takes peak or mean, not '{rank_by[:20]}'.")
    window = lake.window_for(request, ctx)
    scope = f"topic {topic}" if topic else "all topics"
    title = f"Hot partitions ({scope})"
    await ctx.progress(f"ranking partitions over the {lake.describe_since(window.since)} from the metric lake")
    try:
        facts = await guarded(
            ctx, request, window, lambda: lake.hot(ctx, request, window, topic, top, rank_by, chart=CHART_LINES)
        )
    except YoungLake as exc:
        if ctx.live is None:
            return young_reply(title, window, exc, "lake: hot_partitions", _YOUNG_NOTE)
        return await _live_instead(ctx, request, topic, top, window, exc)
    except Unavailable as exc:
        return await _live_instead(ctx, request, topic, top, window, exc)
    rows = facts["rows"]
    measure = "peak 1-minute rate" if rank_by == "peak" else f"mean over the {lake.describe_since(window.since)}"
    if not rows:
        # no samples to rank: how young the lake is is told while the cluster is read
        young = asyncio.ensure_future(young_or_none(ctx, request, window))
        if ctx.live is not None:
            none = _NoSamples(scope, lake.describe_since(window.since))
            return await _live_instead(ctx, request, topic, top, window, none, young)
        young_lake = await young
        if young_lake is not None:
            return young_reply(title, window, young_lake, "lake: hot_partitions", _YOUNG_NOTE)
        return Reply(
            title=title,
            severity="info",
            window=window.label,
            verdict=f"No data for this window: the metric lake has no LogEndOffset samples for {scope} "
            f"in the last {lake.describe_since(window.since)}.",
            evidence=[lake.no_data(window, "lake: hot_partitions", "LogEndOffset samples")],
            followups=["/kafka hot-partitions --since 1h"],
        )
    notes: list[str] = []
    leaders = await _live_leaders(ctx, request, sorted({r["topic"] for r in rows}), notes)
    many = len({r["cluster"] for r in rows}) > 1
    table = Table(
        f"Top {len(rows)} by records/s ({measure})",
        ["#", "partition", "peak rec/s", "peak at (UTC)", "mean rec/s", "KiB/s", "x topic median", "leader"],
    )
    evidence: list[Evidence] = []
    rule = hot_rule(ctx.kb)
    newest = facts.get("data_end")
    # every lake line says how old its data is
    aged = f" ({lake.data_age(float(newest), ctx.clock())})" if newest is not None else ""
    for r in rows:
        live_leader = leaders.get((r["topic"], r["partition"]))
        leader = (
            f"leader {live_leader} (live)"
            if live_leader is not None
            else f"leader {r['leader_broker']} (estimated from the lake)"
        )
        skew = r["skew"]
        # skew is null only when the topic's median rate is 0 (most partitions idle)
        skew_text = f"{skew:.1f}x topic median" if skew is not None else "topic median 0 rec/s"
        rate = _rates(r, rank_by)
        where = f" [{r['cluster']}]" if many else ""
        at = r.get("peak_at")
        table.rows.append(
            [
                r["rank"],
                f"{r['topic']}-{r['partition']}{where}",
                _round(r.get("peak_records_per_sec")),
                f"{at:%H:%M}" if at is not None else None,
                _round(r.get("records_per_sec")),
                _round(r["bytes_per_sec"] / 1024) if r.get("bytes_per_sec") else None,
                _round(skew),
                leader.removeprefix("leader "),
            ]
        )
        if len(evidence) < 3:
            median = f" ({r['topic_median_rate']:,.1f} rec/s)" if skew is not None else ""
            evidence.append(
                Evidence(
                    f"{r['topic']}-{r['partition']}",
                    f"{rate}, {skew_text}{median}, {leader}{aged}",
                    "lake: hot_partitions",
                    "bad" if rule.is_hot(_ranked(r, rank_by), skew) else "neutral",
                )
            )
    hottest = rows[0]
    hot = rule.is_hot(_ranked(hottest, rank_by), hottest["skew"])
    entry = ctx.kb.failure_modes.get(HOT_PARTITION)
    diagnoses = []
    ranked = _ranked(hottest, rank_by)
    if hot:
        live_leader = leaders.get((hottest["topic"], hottest["partition"]))
        hot_leader = live_leader if live_leader is not None else hottest["leader_broker"]
        verdict = (
            f"{hottest['topic']}-{hottest['partition']} is hot: {_rates(hottest, rank_by)}, "
            f"{hottest['skew']:.1f}x its topic's median, led by broker {hot_leader}."
        )
        if entry is not None:
            diagnoses.append(
                diagnosis(
                    ctx.kb,
                    entry,
                    reason=f"lake: {hottest['topic']}-{hottest['partition']} "
                    f"at {hottest['skew']:.1f}x its topic's median ({measure})",
                )
            )
    else:
        verdict = (
            f"No hot partition in the last {lake.describe_since(window.since)}: the busiest, "
            f"{hottest['topic']}-{hottest['partition']}, writes {ranked or 0:,.1f} records/s ({measure})"
            + (f", {hottest['skew']:.1f}x its topic's median." if hottest["skew"] is not None else ".")
        )
    raw_from, ranked_from = facts.get("raw_from"), facts.get("ranked_from")
    source = (
        f" (from the 1-minute rollups; raw samples from {raw_from:%H:%M} UTC on)"
        if facts.get("resolution") == "1m" and raw_from is not None
        else f" from {ranked_from:%H:%M} UTC on only: the 1-minute rollups do not cover the window yet, and "
        "longer than that the raw samples are not read"
        if ranked_from is not None
        else ""
    )
    notes.insert(
        0,
        f"Ranked on the {measure}{source}"
        + (
            "; `--rank mean` ranks on the window mean."
            if rank_by == "peak"
            else "; `--rank peak` ranks on the highest 1-minute rate."
        ),
    )
    if entry is not None:
        # the runbook's first warning (adding partitions does not split a hot key ...) leads the notes
        notes = [f"Do not: {d.action}. {d.why}" for d in entry.do_not[:1]] + notes
    follow = f"/kafka history LogEndOffset --topic {hottest['topic']} --partition {hottest['partition']}"
    return Reply(
        title=title,
        severity="warning" if hot else "ok",
        verdict=verdict,
        evidence=evidence,
        diagnoses=diagnoses,
        tables=[table],
        series=minute_series(facts.get("series") or [], rows, many),
        notes=notes,
        followups=[f"{follow} --since {lake.describe_since(window.since).replace(' ', '')}"] if not many else [],
        window=window.label,
    )


def minute_series(rows: list[lake.Row], ranked: list[lake.Row], many_clusters: bool) -> list[Series]:
    """The per-minute write rates of the first partitions of the ranking, one line each, in the
    ranking's order (the chart's legend reads like the table)."""
    rank = {(r["cluster"], r["topic"], r["partition"]): n for n, r in enumerate(ranked)}
    lines: dict[tuple[str, str, int], Series] = {}
    for r in rows:
        key = (r["cluster"], r["topic"], r["partition"])
        if key not in lines:
            label = f"{r['topic']}-{r['partition']}" + (f" [{r['cluster']}]" if many_clusters else "")
            lines[key] = Series("Write rate per minute", "records/s", label=label)
        lines[key].points.append((r["minute"].isoformat(), round(float(r["records_per_sec"] or 0.0), 1)))
    return [lines[k] for k in sorted(lines, key=lambda k: rank.get(k, len(rank)))]


COMMAND = Command(SPEC, run)
