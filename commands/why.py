"""why <symptom>: rank the runbook's explanations for a symptom, metric or error, with first steps.

The symptom is resolved through the runbook's vocabulary ("URP" -> UnderReplicatedPartitions),
then every entry that lists it is ranked: the entries whose first symptom it is come first.
With a cluster configured, the live check for that symptom runs and the entries its evidence
points at move to the top, with what the cluster showed. With the metric lake, the trend over a
window (--since, default the last 15 minutes) is added as evidence, e.g. URP flat or fluctuating.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from diagnosis import lake_evidence, metric_checks
from diagnosis.entries import diagnosis, hold_unconfirmed
from diagnosis.entry_ids import BROKER_LOSS
from diagnosis.findings import ExpectedCause, LiveFindings, Undecided
from diagnosis.lake_evidence import LakeFindings
from diagnosis.lake_vs_live import check_against_live
from diagnosis.live_common import Check, run_check, unreachable
from diagnosis.named_topics import missing_topics, topic_candidates
from diagnosis.recent_changes import with_recent_changes
from diagnosis.reference import reference_reply
from diagnosis.runbook_checks import check_for
from diagnosis.trends import bucket_for, trend_series
from framework.context import Context
from framework.errors import Unavailable
from framework.gateways import gateway
from framework.reply import Diagnosis, Evidence, Reply
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from live.gateway import GatewayError
from runbook_kb.lookup import Match

SPEC = CommandSpec(
    words=("why",),
    summary="Explain a symptom, metric or error: likely causes ranked, with evidence from the cluster, the source line behind each, first steps.",
    params=(
        Param(
            "symptom",
            "what you see: URP, offline, NotEnoughReplicas, IsrShrinksPerSec, LastStableOffsetLag ...",
            kind="text",
            rest=True,
        ),
    ),
    examples=("why URP", "why offline", "why NotEnoughReplicas", "why hanging transaction"),
    options=(lake_evidence.SINCE_OPTION,),
    details="Ranked from the runbook; with a cluster configured the answer leads with what the cluster shows now; "
    "with the metric lake, the trend over the window (--since, default 15m) is added.",
)

MAX_DIAGNOSES = 4


def _lead_first(lead: list[tuple[str, str]], ranked: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Entries the evidence points at come first, in the evidence's order, then the runbook's ranking."""
    seen = {eid for eid, _ in lead}
    return list(lead) + [(eid, why) for eid, why in ranked if eid not in seen]


async def run(request: CommandRequest, ctx: Context) -> Reply:
    reply = await _answer(request, ctx)
    symptom = str(request.args["symptom"])
    hits = ctx.lookup.answer(symptom, limit=1)
    if hits and hits[0].kind == "reference":  # how Kafka works: no resource of this cluster is asked about
        return reply
    return await _name_missing_topics(ctx, request, symptom, reply)


async def _name_missing_topics(ctx: Context, request: CommandRequest, symptom: str, reply: Reply) -> Reply:
    """A topic the question names that the cluster lacks is said first (issue 35): no runbook cause
    of stuck consumers applies to a topic that is not there."""
    if ctx.live is None or not topic_candidates(symptom):
        return reply
    try:
        gw = await gateway(ctx, request.cluster)
    except GatewayError:
        return reply
    missing = await missing_topics(gw, symptom)
    if not missing:
        return reply
    names = ", ".join(f"`{n}`" for n in missing)
    one = len(missing) == 1
    reply.verdict = (
        f"Topic {names} does not exist in cluster {gw.name}: "
        f"{'its' if one else 'their'} consumers have nothing to read and producers to {'it' if one else 'them'} "
        "fail unless the broker creates topics on first use. Check the name (`describe <topic>`). "
        f"Otherwise: {reply.verdict}"
    )
    reply.evidence.insert(0, Evidence(f"Topic {names}", "does not exist", "live: metadata (topic list)", "bad"))
    if reply.severity in ("ok", "info", "unknown"):
        reply.severity = "warning"
    return reply


async def _answer(request: CommandRequest, ctx: Context) -> Reply:
    symptom = str(request.args["symptom"])
    hits = ctx.lookup.answer(symptom, limit=MAX_DIAGNOSES)
    if hits and hits[0].kind == "reference":
        # A question about how Kafka works (the acks x min ISR matrix, KIP-16, latency parts):
        # the reference topic answers it; failure modes are offered as the next reads.
        others = [f"/kafka runbook {h.id}  ({h.title})" for h in hits[1:]]
        ref = reference_reply(ctx.kb, hits[0].id, symptom, reason=hits[0].reason, others=others)
        return await _with_live(ctx, request, symptom, hits[0].id, ref)
    matches = ctx.lookup.search(symptom, limit=MAX_DIAGNOSES)
    if not matches:
        raise BadInput(
            f"The runbook has nothing for '{symptom}'.",
            [f"why {s}" for s in ctx.lookup.did_you_mean(symptom)] or ["help why"],
        )
    ranked = [(m.entry.id, m.reason) for m in matches]
    lake_evidence.window_for(request, ctx)  # a bad --since is bad input before any work starts
    # The metric lake's window query runs while the live check reads the cluster.
    lake_task = asyncio.ensure_future(_lake_part(ctx, request, matches[0].entry.id))
    live: LiveFindings | None = None
    check = check_for(ctx.kb, matches[0].entry.id)
    try:
        if check is not None and ctx.live is not None:
            await ctx.progress(f"reading the cluster for '{symptom}'")
            try:
                gw = await gateway(ctx, request.cluster)
            except GatewayError as exc:  # nothing listens there: the runbook's answer still stands
                live = unreachable(exc)
            else:
                live = metric_checks.echo_typed(symptom, await run_check(check, gw))
    except BaseException:
        lake_task.cancel()
        raise
    if live is not None and not lake_task.done():
        # Answer from the cluster now; the lake's trend follows when its query is done (a cold
        # Spark takes seconds). Transports that can show it later get it as reply.later.
        try:
            await asyncio.wait_for(asyncio.shield(lake_task), LAKE_GRACE_S)
        except asyncio.TimeoutError:
            early = _reply(ctx, symptom, matches, ranked, check, live, None)
            early.notes.append("The metric lake's evidence is still coming; it is added when ready.")
            early.later = asyncio.ensure_future(_after_lake(ctx, symptom, matches, ranked, check, live, lake_task))
            return early
    return _reply(ctx, symptom, matches, ranked, check, live, await lake_task)


async def _with_live(ctx: Context, request: CommandRequest, symptom: str, topic_id: str, ref: Reply) -> Reply:
    """A reference answer led by what the cluster shows now, when the runbook binds the topic to a
    live check (the latency map: every broker's p99 split) and a cluster is configured."""
    check = check_for(ctx.kb, topic_id)
    if check is None or ctx.live is None:
        return ref
    await ctx.progress(f"reading the cluster for '{symptom}'")
    try:
        gw = await gateway(ctx, request.cluster)
    except GatewayError as exc:
        live = unreachable(exc)
    else:
        live = await run_check(check, gw)
    points = [f"/kafka why {e}" for e, _ in live.lead if e in ctx.kb.failure_modes]
    # the causes the cluster's reading points at, ranked as a failure-mode answer ranks them
    diagnoses = [
        diagnosis(ctx.kb, ctx.kb.failure_modes[e], reason=why) for e, why in live.lead if e in ctx.kb.failure_modes
    ][:MAX_DIAGNOSES]
    if live.undecided is not None:
        diagnoses = [_undecided(ctx, d, live.undecided) for d in diagnoses]
    return replace(
        ref,
        diagnoses=diagnoses,
        actions=[*live.actions, *ref.actions],
        severity=live.severity,
        verdict=live.verdict,
        evidence=[*live.evidence, *ref.evidence],
        notes=[*live.notes, *ref.notes],
        followups=[*points, *ref.followups],
    )


LAKE_GRACE_S = 0.3  # how long a live answer waits for a lake query that is almost done
# The metric whose trend is charted beside the lake's findings, by the lake check bound to the entry.
TREND_METRIC = {
    "urp": "UnderReplicatedPartitions",
    "under_min_isr": "UnderMinIsrPartitionCount",
    "offline": "OfflinePartitionsCount",
}


async def _lake_part(ctx: Context, request: CommandRequest, entry_id: str) -> LakeFindings | None:
    """The lake's findings for the entry, with the symptom's trend per broker for a chart."""
    findings = await lake_evidence.for_symptom(ctx, request, entry_id)
    entry = ctx.kb.failure_modes.get(entry_id)
    metric = TREND_METRIC.get(entry.checks.lake or "") if entry is not None else None
    if findings is None or metric is None or not findings.available or not findings.has_data:
        return findings
    window = findings.window
    try:
        facts = await lake_evidence.window_trend(ctx, request, window, metric, bucket_for(window.since))
    except Unavailable:
        return findings  # the findings stand without the chart
    findings.series = trend_series(
        metric, facts["rows"], "partitions", (window.start.isoformat(), window.end.isoformat())
    )
    return findings


async def _after_lake(
    ctx: Context,
    symptom: str,
    matches: list[Match],
    ranked: list[tuple[str, str]],
    check: Check | None,
    live: LiveFindings,
    lake_task: asyncio.Future[LakeFindings | None],
) -> Reply:
    return _reply(ctx, symptom, matches, ranked, check, live, await lake_task)


def _reply(
    ctx: Context,
    symptom: str,
    matches: list[Match],
    ranked: list[tuple[str, str]],
    check: Check | None,
    live: LiveFindings | None,
    lake: LakeFindings | None,
) -> Reply:
    if live is not None:
        ranked = _lead_first(live.lead, ranked)
    elif lake is not None and lake.lead:
        ranked = _lead_first(lake.lead, ranked)  # no live data: the lake's trend points the way
    diagnoses = [diagnosis(ctx.kb, ctx.kb.failure_modes[eid], reason=why) for eid, why in ranked[:MAX_DIAGNOSES]]
    if live is not None and live.facts is not None and _local_dev(ctx):
        # before the look-alikes' steps go first: the runbook's own first step gets the command
        diagnoses = [_local_bring_back(d, live.facts.missing_brokers) for d in diagnoses]
    if live is not None and live.undecided is not None:
        diagnoses = [_undecided(ctx, d, live.undecided) for d in diagnoses]
    followups = [f"/kafka runbook {eid}" for eid, _ in ranked[:2]]
    if live is not None and live.expected is not None:
        # an operation explains the symptom, not a fault: it comes first, the failure modes the
        # symptom matches follow as the causes considered
        diagnoses = [_expected_diagnosis(ctx, live.expected), *diagnoses[: MAX_DIAGNOSES - 1]]
        followups = [f"/kafka runbook {live.expected.topic}", *followups[:1]]
    top = diagnoses[0].title
    if live is not None:
        verdict, severity, evidence = live.verdict, live.severity, list(live.evidence)
        notes, actions = list(live.notes), list(live.actions)
    else:
        # Nothing showed whether the symptom is present now: say so rather than guess a severity.
        unseen = "No cluster is configured" if ctx.live is None else "The runbook has no live check for this"
        verdict = (
            f"{unseen}, so whether '{symptom}' is happening now is unknown. {len(matches)} runbook "
            f"explanation{'s' if len(matches) > 1 else ''}; check '{top}' first."
        )
        severity, actions = "unknown", []
        evidence = [Evidence("Runbook match", f"{m.entry.title}: {m.reason}", "kb") for m in matches]
        lake_led = lake is not None and bool(lake.lead)
        notes = [
            (
                "No live evidence in this answer: ranked from the metric lake's trend and the runbook."
                if lake_led
                else "No live evidence in this answer: ranked from the runbook alone."
            )
            + ("" if check is not None else " The runbook has no live check for this symptom yet.")
        ]
        if lake is not None and lake.verdict:
            verdict = f"{lake.verdict} Check '{top}' first."
            severity = lake.severity if lake.severity != "info" else severity
    if lake is not None:
        # the lake ends before the live read: its lines say where, and any that the cluster as it
        # is now contradicts says so (diagnosis.lake_vs_live)
        lake = check_against_live(lake, live.facts if live is not None else None, ctx.clock())
        evidence += lake.evidence
        notes += lake.notes
    return Reply(
        title=f"Why {symptom}?",
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        diagnoses=diagnoses,
        actions=actions,
        notes=notes,
        followups=followups,
        window=lake.window.label if lake is not None and lake.available else None,
        series=list(getattr(lake, "series", None) or []),  # set by _lake_part when the trend was read
        settled=live is not None and live.settled and severity in ("ok", "info"),
    )


def _undecided(ctx: Context, d: Diagnosis, undecided: Undecided) -> Diagnosis:
    """The cause the evidence cannot tell from its look-alikes: the steps that gather the deciding
    evidence first, and none that move data on a guess (the runbook's confirmed_only steps)."""
    if d.entry_id != undecided.entry:
        return d
    kept, _ = hold_unconfirmed(d)
    return replace(
        kept,
        mitigation=[*undecided.steps, *kept.mitigation],
        undecided_with=[ctx.kb.failure_modes[e].title for e in undecided.reasons if e in ctx.kb.failure_modes],
    )


def _local_dev(ctx: Context) -> bool:
    """The local cluster `kbot run` starts (bot.app.local_settings names it "local", on loopback)."""
    bootstrap = ctx.settings.kbot_bootstrap or ""
    hosts = [b.rsplit(":", 1)[0] for b in bootstrap.split(",") if b]
    return ctx.settings.kbot_cluster_name == "local" and bool(hosts) and all(h == "127.0.0.1" for h in hosts)


def _local_bring_back(d: Diagnosis, missing: frozenset[int]) -> Diagnosis:
    """On the local cluster, broker loss's first step ("bring the missing broker back") gets the
    command that does it: `kbot cluster start <id>` starts a killed broker and waits until it serves."""
    if d.entry_id != BROKER_LOSS or not missing or not d.mitigation:
        return d
    steps = list(d.mitigation)
    first = next((i for i, s in enumerate(steps) if s.command is None and not s.confirmed_only), None)
    if first is None:  # the runbook's entry gives a command of its own: it stays
        return d
    command = " && ".join(f"kbot cluster start {b}" for b in sorted(missing))
    steps[first] = replace(steps[first], command=command)
    return replace(d, mitigation=steps)


def _expected_diagnosis(ctx: Context, expected: ExpectedCause) -> Diagnosis:
    """The operation a live check found behind the symptom, as the answer's first cause: its steps
    come from the check, its explanation from the runbook's reference topic."""
    topic = ctx.kb.topics.get(expected.topic)
    summary = " ".join(topic.summary.split()) if topic is not None else ""
    return Diagnosis(
        entry_id=expected.topic,
        title=expected.title,
        cause=summary or expected.title,
        mitigation=list(expected.steps),
        do_not=list(expected.do_not),
        why_ranked=expected.reason,
        mechanism_note=summary,
    )


COMMAND = Command(SPEC, with_recent_changes(run))
