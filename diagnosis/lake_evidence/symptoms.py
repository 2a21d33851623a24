"""The lake's evidence on the other symptoms `why` binds a lake check to: partitions under min
ISR and offline, hanging transactions, request handler saturation, the active controller."""

from __future__ import annotations

import datetime as dt

from diagnosis.entry_ids import (
    HANDLER_SATURATION,
    HANGING_TRANSACTION,
    UNDER_MIN_ISR,
)
from diagnosis.lake_evidence.findings import LakeFindings, apply_freshness, many_clusters, num, who
from diagnosis.lake_evidence.window import (
    NotEnoughData,
    Window,
    ask_window,
    lake_cluster,
)
from diagnosis.thresholds import handler_idle_saturated_below
from framework.context import Context
from framework.reply import Evidence
from framework.spec import CommandRequest
from window_queries.availability import CONTROLLER_QUESTION, OFFLINE_QUESTION, UNDER_MIN_ISR_QUESTION
from window_queries.saturation import SATURATION_QUESTION
from window_queries.txn import HANGING_QUESTION


async def under_min_isr(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), UNDER_MIN_ISR_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: under_min_isr_timeline")
    rows = facts["rows"]
    if not rows:
        return LakeFindings.without_data(window, "lake: under_min_isr_timeline", "UnderMinIsrPartitionCount samples")
    out = LakeFindings(window)
    many = many_clusters(rows)
    bad = [r for r in rows if (r["max_under"] or 0) > 0]
    for r in sorted(bad, key=lambda r: r["broker"]):
        out.evidence.append(
            Evidence(
                f"Under min ISR, {who(r, many)}",
                f"up to {num(r['max_under'])} partition(s), in {r['minutes_under']} of {r['minutes']} minute(s)",
                "lake: under_min_isr_timeline",
                "bad",
            )
        )
    if not bad:
        at = max((r["max_at"] or 0) for r in rows)
        out.evidence.append(
            Evidence(
                "Under min ISR",
                "0 on every broker" + (f" (up to {num(at)} at min ISR)" if at else ""),
                "lake: under_min_isr_timeline",
                "ok",
            )
        )
    else:
        out.lead.append(
            (UNDER_MIN_ISR, "lake: partitions under min ISR on broker(s) " + ", ".join(str(r["broker"]) for r in bad))
        )
    return apply_freshness(out, facts["data_end"], began)


async def offline(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), OFFLINE_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: offline_timeline")
    rows = facts["rows"]
    if not rows:
        return LakeFindings.without_data(window, "lake: offline_timeline", "OfflinePartitionsCount samples")
    out = LakeFindings(window)
    for r in rows:
        if (r["max_offline"] or 0) > 0:
            first = dt.datetime.fromtimestamp(r["first_offline"], dt.timezone.utc)
            out.evidence.append(
                Evidence(
                    "Offline partitions over the window",
                    f"up to {num(r['max_offline'])}, in {r['minutes_offline']} of {r['minutes']} minute(s), "
                    f"first at {first:%H:%M} UTC",
                    "lake: offline_timeline",
                    "bad",
                )
            )
        else:
            out.evidence.append(Evidence("Offline partitions over the window", "0", "lake: offline_timeline", "ok"))
    return apply_freshness(out, facts["data_end"], began)


async def hanging(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), HANGING_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: last_stable_offset_lag")
    out = LakeFindings(window)
    for r in facts["growing"]:
        out.evidence.append(
            Evidence(
                f"LastStableOffsetLag {r['topic']}-{r['partition']}",
                f"growing: {num(r['first_lag'])} -> {num(r['last_lag'])} records "
                f"({num(r['growth_per_sec'], 1)}/s), leader broker {r['leader_broker']}",
                "lake: last_stable_offset_lag",
                "bad",
            )
        )
    for r in facts["late"]:
        out.evidence.append(
            Evidence(
                f"Late transactions, broker {r['broker']}",
                f"up to {num(r['max'])} partition(s) past transaction.max.timeout.ms",
                "lake: late_transactions",
                "bad",
            )
        )
    if facts["growing"] or facts["late"]:
        out.lead.append((HANGING_TRANSACTION, "lake: LastStableOffsetLag growing without coming down"))
    else:
        out.evidence.append(
            Evidence("LastStableOffsetLag", "no partition's LSO lag kept growing", "lake: last_stable_offset_lag", "ok")
        )
    return apply_freshness(out, facts["data_end"], began)


async def saturation(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    # the same bound the live check alerts on (the runbook's alert table): mean idle under it
    idle_below = handler_idle_saturated_below(ctx.kb)
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), SATURATION_QUESTION, window, idle_below)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: request_handler_idle")
    if not facts["idle"]:
        return LakeFindings.without_data(window, "lake: request_handler_idle", "RequestHandlerAvgIdlePercent samples")
    out = LakeFindings(window)
    many = many_clusters(facts["idle"])
    for r in sorted(facts["idle"], key=lambda r: r["avg_idle"]):
        out.evidence.append(
            Evidence(
                f"Handler idle, {who(r, many)}",
                f"avg {r['avg_idle']:.0%}, min {r['min_idle']:.0%}, last {r['last_idle']:.0%}",
                "lake: request_handler_idle",
                "bad" if r["saturated"] else "ok",
            )
        )
    worst = sorted(facts["queue"], key=lambda r: -(r["max_ms"] or 0))[:3]
    for r in worst:
        out.evidence.append(
            Evidence(
                f"Request queue time p99, {r['request']}",
                f"max {num(r['max_ms'], 1)} ms (broker {r['worst_broker']}), avg {num(r['avg_ms'], 1)} ms",
                "lake: request_queue_time",
                "neutral",
            )
        )
    sat = [r for r in facts["idle"] if r["saturated"]]
    if sat:
        out.lead.append(
            (
                HANDLER_SATURATION,
                f"lake: request handler idle below {idle_below:.0%} on broker(s) "
                + ", ".join(str(r["broker"]) for r in sat),
            )
        )
    return apply_freshness(out, facts["data_end"], began)


async def controller(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), CONTROLLER_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: controller_anomalies")
    rows = facts["rows"]
    out = LakeFindings(window)
    for r in rows:
        out.evidence.append(
            Evidence(
                "Active controller count != 1",
                f"{r['buckets']} minute(s) from {r['start']:%H:%M} UTC "
                f"(between {num(r['min_active'])} and {num(r['max_active'])} active)",
                "lake: controller_anomalies",
                "bad",
            )
        )
    if not rows:
        out.evidence.append(
            Evidence(
                "Active controller", "exactly one in every minute with samples", "lake: controller_anomalies", "ok"
            )
        )
    return apply_freshness(out, facts["data_end"], began)
