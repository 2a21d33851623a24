"""The lake's evidence on under-replication (``why URP``): the URP shape per broker, where the
URP is reported, and ISR churn (``window_queries.urp``)."""

from __future__ import annotations

import datetime as dt

from diagnosis.entry_ids import (
    BROKER_LOSS,
    SLOW_FOLLOWER,
)
from diagnosis.lake_evidence.findings import LakeFindings, apply_freshness, many_clusters, num, who
from diagnosis.lake_evidence.window import (
    Facts,
    NotEnoughData,
    Row,
    Window,
    ask_window,
    describe_since,
    lake_cluster,
)
from framework.context import Context
from framework.reply import Evidence
from framework.spec import CommandRequest
from window_queries.urp import URP_QUESTION

#: The label of the line that says which broker reports most of the URP (``diagnosis.lake_vs_live``
#: checks it against the live read's missing replicas).
REPORTED_BY = "URP reported mostly by"


def _since(r: Row) -> str:
    """When the broker's current stretch of URP began, as far as the window tells."""
    ts = r.get("episode_start")
    if ts is None:
        return ""
    if r.get("began_before_window"):
        return f", since before {ts:%H:%M:%S} UTC (the window's first sample)"
    return f", since {ts:%H:%M:%S} UTC"


def trend_text(r: Row) -> str:
    """One broker's URP trend (a row of ``window_queries.urp.urp_trend``), with when its current
    stretch of URP began."""
    if r["shape"] == "flat":
        return (
            f"flat: level at {num(r['modal_value'])} for {r['modal_share']:.0%} of its non-zero samples "
            f"({r['nonzero_samples']} of {r['samples']} samples > 0, last {num(r['last'])}{_since(r)})"
        )
    if r["shape"] == "brief":
        return (
            f"{num(r['last'] or r['max'])} under-replicated in {r['nonzero_samples']} of {r['samples']} sample(s)"
            f"{_since(r)}: too few to tell flat from fluctuating"
        )
    return (
        f"fluctuating: between {num(r['min'])} and {num(r['max'])}, {r['changes']} changes in "
        f"{r['samples']} samples, last {num(r['last'])}{_since(r)}"
    )


def urp_findings(facts: Facts, window: Window, ctx: Context) -> LakeFindings:
    """Evidence from q_urp's rows: the URP shape per broker, where it concentrates, ISR churn."""
    trend, conc, churn = facts["trend"], facts["concentration"], facts["churn"]
    if not trend and not churn:
        return LakeFindings.without_data(window, "lake: urp_trend", "UnderReplicatedPartitions samples")
    out = LakeFindings(window)
    many = many_clusters(trend + churn)
    shaped = sorted((r for r in trend if r["shape"] != "zero"), key=lambda r: (-(r["max"] or 0), r["broker"]))
    for r in shaped:
        out.evidence.append(Evidence(f"URP trend, {who(r, many)}", trend_text(r), "lake: urp_trend", "bad"))
    if trend and not shaped:
        samples = max(r["samples"] for r in trend)
        out.evidence.append(
            Evidence(
                "URP trend",
                f"0 on all {len(trend)} reporting broker(s) (up to {samples} samples each)",
                "lake: urp_trend",
                "ok",
            )
        )
    top = [r for r in conc if r["rank"] == 1 and r["share"] is not None]
    if shaped and len(top) == 1:
        r = top[0]
        out.evidence.append(
            Evidence(
                REPORTED_BY,
                f"{who(r, many)}: {r['share']:.0%} of the cluster's URP "
                f"(mean {num(r['mean_urp'], 1)}, max {num(r['max_urp'])}), as the leader of the partitions "
                "missing a replica: the missing replicas may be on another broker",
                "lake: urp_concentration",
                "bad",
            )
        )
    elif shaped and top:
        out.evidence.append(
            Evidence(
                "URP reported evenly by",
                ", ".join(who(r, many) for r in sorted(top, key=lambda r: r["broker"]))
                + f" ({top[0]['share']:.0%} each)",
                "lake: urp_concentration",
                "bad",
            )
        )
    moving = sorted((r for r in churn if (r["shrinks"] or 0) > 0 or (r["expands"] or 0) > 0), key=lambda r: r["broker"])
    for r in moving:
        text = f"{num(r['shrinks'])} ISR shrinks, {num(r['expands'])} expands"
        if r["shrinks_without_expands"]:
            text += " (shrinks without expands)"
        if r["resets"]:
            text += f"; counters reset {r['resets']}x (the broker restarted)"
        out.evidence.append(
            Evidence(
                f"ISR churn, {who(r, many)}",
                text,
                "lake: isr_churn",
                "bad" if r["shrinks_without_expands"] else "neutral",
            )
        )
    if churn and not moving:
        out.evidence.append(Evidence("ISR churn", "no ISR shrinks or expands", "lake: isr_churn", "ok"))
    if not shaped:
        out.verdict = (
            f"The metric lake shows no under-replicated partitions in the last {describe_since(window.since)}."
        )
        out.severity = "ok"
        return out
    started = [r for r in shaped if r.get("episode_start") is not None]
    first = min(started, key=lambda r: r["episode_start"]) if started else None
    out.began = first["episode_start"].timestamp() if first is not None and not first["began_before_window"] else None
    brokers = ", ".join(str(r["broker"]) for r in shaped)
    since = _since(first).replace(",", "", 1) if first is not None else ""
    told = [r for r in shaped if r["shape"] != "brief"]
    if not told:
        # a sample or two of URP: a step up, too few samples to tell broker loss from a slow follower
        out.verdict = (
            f"The metric lake shows URP on broker(s) {brokers}{since}, in too few samples to tell "
            "a lost broker (flat) from a slow follower (fluctuating)."
        )
        out.severity = "warning"
        return out
    shapes = {r["shape"] for r in told}
    # the broker carrying most of the URP decides the signature when both shapes appear
    lead_shape = None
    if top:
        lead_shape = next(
            (r["shape"] for r in told if (r["cluster"], r["broker"]) == (top[0]["cluster"], top[0]["broker"])), None
        )
    shape = lead_shape or ("flat" if shapes == {"flat"} else "fluctuating")
    entry = BROKER_LOSS if shape == "flat" else SLOW_FOLLOWER
    title = ctx.kb.failure_modes[entry].title if entry in ctx.kb.failure_modes else entry
    out.lead.append((entry, f"lake: URP {shape} on broker(s) {brokers} over the last {describe_since(window.since)}"))
    out.verdict = (
        f"The metric lake shows URP {shape} on broker(s) {brokers}{since} over the "
        f"{describe_since(window.since)}: the pattern of '{title}'."
    )
    out.severity = "warning"
    return out


async def urp(ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), URP_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: urp_trend")
    return apply_freshness(urp_findings(facts, window, ctx), facts["data_end"], began)
