"""lag [group]: a group's lag and members watched over a few reads, its likely cause ranked from that evidence (and the metric lake's window verdict, Burrow's rules: OK, WARN, STALL, STOP, REWIND); without a group, every group of the cluster, lagging ones first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diagnosis import lake_evidence
from diagnosis.entries import diagnosis
from diagnosis.groups import (
    LIST_LIMIT,
    Cause,
    facts_from_reads,
    last_commit_text,
    rank,
    signals_from_kb,
    summarize_groups,
    summary_line,
    summary_severity,
    trend_text,
    watch_group,
)
from diagnosis.recent_changes import with_recent_changes
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Action, Evidence, Reply, Section, Severity, Table
from framework.spec import Command, CommandRequest, CommandSpec, Param
from kbot_settings import KbotSettings

SPEC = CommandSpec(
    words=("lag",),
    summary="Consumer group lag and its likely cause (consumers stopped, rebalance storm, slow consumers), with the "
    "metric lake's window verdict (OK/WARN/STALL/STOP/REWIND); without a group, every group, lagging ones first.",
    params=(Param("group", "the consumer group id (default: list every group)", kind="group", required=False),),
    options=(lake_evidence.SINCE_OPTION,),
    examples=("lag", "lag payments-service", "lag payments-service --since 1h"),
)

SHOWN = 15  # groups named per line group in the listing
MAX_ROWS = 200  # partitions shown in the per-partition table


@dataclass
class LagReply(Reply):
    """A Reply whose JSON also carries the lag figures as numbers (``lag``)."""

    lag: dict[str, Any] = field(default_factory=dict)  # JSON: the figures differ per answer


_ORDER: Mapping[str, int] = {"ok": 0, "info": 1, "warning": 2, "error": 2, "critical": 3}


async def run(request: CommandRequest, ctx: Context) -> Reply:
    group = request.args.get("group")
    if group is None:
        return await _list(request, ctx)
    return await _one(request, ctx, str(group))


async def _list(request: CommandRequest, ctx: Context) -> Reply:
    lake_evidence.window_for(request, ctx)  # a bad --since is bad input here too
    await ctx.progress("listing the consumer groups and their lag")
    gw = await gateway(ctx, request.cluster)
    listing = await gw.list_consumer_groups()
    summaries, skipped = await summarize_groups(gw, listing.groups, LIST_LIMIT)
    lagging = [s for s in summaries if s.lagging]
    failed = [s for s in summaries if s.error]
    quiet = [s for s in summaries if not s.lagging and not s.error]
    others = len(listing.groups) - len(summaries) - skipped
    lines = [summary_line(s) for s in lagging]
    if quiet:
        names = ", ".join(s.group for s in quiet[:SHOWN]) + (
            f" and {len(quiet) - SHOWN} more" if len(quiet) > SHOWN else ""
        )
        lines.append(f"Caught up ({len(quiet)}): {names}")
    lines += [summary_line(s) for s in failed]
    notes = []
    if skipped:
        notes.append(
            f"{skipped} group(s) not read: at most {LIST_LIMIT} groups are read per listing; "
            f"ask `lag <group>` for one of them."
        )
    if others:
        notes.append(
            f"{others} group(s) of other protocols (Connect, share groups ...) have no consumer offsets "
            f"and are not listed."
        )
    if listing.failed_brokers:
        notes.append(
            "Brokers that did not list their groups (the groups they coordinate are missing): "
            + "; ".join(f"{b}: {why}" for b, why in sorted(listing.failed_brokers.items()))
        )
    severity: Severity = max((summary_severity(s) for s in summaries), key=_ORDER.__getitem__, default="ok")
    if severity == "error":
        severity = "warning"
    if not summaries:
        verdict = f"No consumer groups in cluster {gw.name}."
    elif lagging:
        verdict = (
            f"{len(lagging)} of {len(summaries)} group(s) are behind; most: {lagging[0].group} "
            f"with {lagging[0].total_lag:,} records."
        )
    else:
        verdict = f"All {len(summaries)} group(s) read are caught up."
    evidence = [
        Evidence(
            "Consumer groups",
            f"{len(listing.groups):,} listed, {len(summaries):,} read",
            "live: list_groups",
            "neutral",
        ),
        Evidence(
            "Groups behind", f"{len(lagging):,}", "live: list_group_offsets + list_offsets", "bad" if lagging else "ok"
        ),
    ]
    data = {
        "groups": [s.as_dict() for s in summaries],
        "listed": len(listing.groups),
        "read": len(summaries),
        "skipped": skipped,
        "failed_brokers": {str(b): why for b, why in listing.failed_brokers.items()},
    }
    return LagReply(
        title=f"Consumer groups of {gw.name}",
        severity=severity,
        verdict=verdict,
        evidence=evidence,
        sections=[Section("Groups, lagging first", lines or ["No consumer groups."])],
        actions=[Action(f"Lag of {s.group}", f"lag {s.group}") for s in lagging[:3]],
        notes=notes,
        lag=data,
    )


async def _one(request: CommandRequest, ctx: Context, group: str) -> Reply:
    window = lake_evidence.window_for(request, ctx)
    # the lake's window verdict is computed while the cluster is read
    lake_task = asyncio.ensure_future(lake_evidence.group_lag_or_note(ctx, request, group, window))
    try:
        await ctx.progress(f"watching group {group}'s lag for a few seconds")
        gw = await gateway(ctx, request.cluster)
        reads = await watch_group(gw, group)
    except BaseException:
        lake_task.cancel()
        raise
    lake = await lake_task
    lake_facts = lake if lake is not None and lake.available and lake.has_data else None
    facts = facts_from_reads(group, reads, lake_facts)
    ranking = rank(facts, signals_from_kb(ctx.kb))
    last, members_known = reads[-1]
    g = last.lag
    rows = sorted(g.partitions, key=lambda p: -(p.lag or 0))
    per_partition = Table(
        "Per partition (largest first)",
        ["partition", "committed", "log end", "lag", "error"],
        [[f"{p.topic}-{p.partition}", p.committed, p.log_end, p.lag, p.error] for p in rows[:MAX_ROWS]],
        more=max(0, len(rows) - MAX_ROWS),
    )
    states = sorted(set(facts.states), key=facts.states.index)
    evidence = [
        Evidence(
            "Group state",
            (g.state if len(states) == 1 else " -> ".join(states))
            + f" ({len(reads)} read(s) over {facts.seconds:.1f} s)",
            "live: describe_groups",
            "bad" if ranking.status in ("STOP", "REBALANCING") else "neutral",
        ),
    ]
    if members_known:
        ids = set().union(*(r.member_ids for r, _ in reads))
        evidence.append(
            Evidence(
                "Members",
                f"{len(last.members)} now"
                + (f", {len(ids)} different ids while watched" if len(ids) > len(last.members) else ""),
                "live: describe_groups",
                "bad" if not last.members and g.total_lag else "neutral",
            )
        )
    evidence.append(
        Evidence(
            "Total lag",
            f"{g.total_lag:,} records over {len(rows)} partition(s); "
            + (trend_text(ranking.change, facts.seconds) if len(reads) > 1 else "one read"),
            "live: list_group_offsets + list_offsets",
            "bad" if g.total_lag else "ok",
        )
    )
    lagging = [p for p in rows if (p.lag or 0) > 0]
    if lagging:
        worst = lagging[0]
        evidence.append(Evidence("Largest", f"{worst.topic}-{worst.partition}: {worst.lag:,}", "live", "bad"))
    if ranking.status == "STOP":
        evidence.append(
            Evidence(
                "Last commit",
                last_commit_text(facts),
                "lake: partition_lag_status" if facts.lake_last_commit is not None else "live",
                "bad",
            )
        )
    if facts.deleted_unread:
        evidence.append(
            Evidence(
                "Deleted before read",
                f"{facts.deleted_unread:,} records on {', '.join(facts.deleted_partitions[:4])}: the committed offset "
                "is below the log start (retention deleted them)",
                "live: list_group_offsets + list_offsets (earliest)",
                "bad",
            )
        )
    no_commit = [p for p in rows if p.committed is None]
    if no_commit:
        evidence.append(Evidence("Partitions without a committed offset", str(len(no_commit)), "live", "neutral"))
    ranked = [c for c in ranking.causes if not c.considered]
    diagnoses = [
        diagnosis(ctx.kb, ctx.kb.failure_modes[c.entry_id], reason=c.reason, first_steps=2)
        for c in ranked
        if c.entry_id in ctx.kb.failure_modes
    ]
    cause_lines = [f"{i}. {_title(ctx, c)}: {c.reason}" for i, c in enumerate(ranked, 1)]
    cause_lines += [f"Considered: {_title(ctx, c)}: {c.reason}" for c in ranking.causes if c.considered]
    sections: list[Section] = []
    severity = ranking.severity
    notes = ["Lag over a few seconds of live reads; the trend over minutes needs the metric lake's window."]
    if lake is not None:
        evidence += lake.evidence
        notes = lake.notes if lake.available else notes + lake.notes
        if lake.details:
            sections.append(Section(f"Window verdict per partition ({lake.window.label})", lake.details))
    collected = lake_collects(group, ctx.settings)
    if not collected and lake is None:
        # the trend can never come on the default setup: say what turns it on
        notes = [f"Lag over a few seconds of live reads. {lake_groups_hint(group, False, ctx.settings)}"]
    elif not collected and lake is not None and lake.available and not lake.has_data:
        notes.append(lake_groups_hint(group, True, ctx.settings))
    if cause_lines:
        sections.append(Section("Likely causes, ranked", cause_lines))
    if lake is not None:
        if lake.available and lake.has_data and _ORDER[lake.severity] > _ORDER[severity] and g.total_lag:
            severity = lake.severity
    data = {
        "group": group,
        "state": g.state,
        "status": ranking.status,
        "total_lag": g.total_lag,
        "deleted_unread": facts.deleted_unread,
        "lag_change": ranking.change,
        "seconds_watched": round(facts.seconds, 3),
        "reads": len(reads),
        "states": list(facts.states),
        "members": len(last.members) if members_known else None,
        "committed_moved": facts.committed_moved,
        "last_commit": facts.lake_last_commit,
        "causes": [{"key": c.key, "entry_id": c.entry_id, "considered": c.considered} for c in ranking.causes],
        "partitions": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed": p.committed,
                "log_start": p.log_start,
                "log_end": p.log_end,
                "lag": p.lag,
                "deleted_unread": p.deleted_unread,
            }
            for p in rows
        ],
        "lake_collects_group": collected,
        "lake": (
            {
                "status": getattr(lake, "status", None),
                "worst_status": getattr(lake, "worst_status", None),
                "total_lag": getattr(lake, "total_lag", None),
            }
            if lake_facts is not None
            else None
        ),
    }
    return LagReply(
        title=f"Lag of {group}",
        severity=severity,
        verdict=ranking.verdict,
        evidence=evidence,
        diagnoses=diagnoses,
        sections=sections,
        notes=notes,
        tables=[per_partition],
        series=list(lake_facts.series) if lake_facts is not None else [],
        window=lake.window.label if lake is not None and lake.available else None,
        lag=data,
    )


def lake_groups(settings: KbotSettings) -> list[str]:
    """The consumer groups whose commits the lake's collector samples (KBOT_LAKE_GROUPS)."""
    return [g.strip() for g in (settings.kbot_lake_groups or "").split(",") if g.strip()]


def lake_collects(group: str, settings: KbotSettings) -> bool:
    return group in lake_groups(settings)


def lake_groups_hint(group: str, has_lake: bool, settings: KbotSettings) -> str:
    """How to get a lag trend for ``group``: the collector samples a group's commits only when
    KBOT_LAKE_GROUPS names it, and it is unset by default, so without this the trend never comes."""
    named = lake_groups(settings)
    now = f"it names {', '.join(named[:5])}{' ...' if len(named) > 5 else ''}" if named else "unset here"
    held = (
        f"The metric lake holds no commits of group {group}"
        if has_lake
        else "The trend over minutes needs the metric lake"
    )
    wanted = ",".join([*named, group])
    return (
        f"{held}: its collector samples a group's commits only when KBOT_LAKE_GROUPS names the group ({now})."
        f"[[terminal: Set KBOT_LAKE_GROUPS={wanted} for `kbot run` or `kbot lake collect` (or pass "
        f"`kbot lake collect --groups {wanted}`) and restart it; the trend begins then.]]"
        f"[[slack: Whoever runs the bot can add {group} to KBOT_LAKE_GROUPS and restart it; the trend begins then.]]"
    )


def _title(ctx: Context, c: Cause) -> str:
    entry = ctx.kb.failure_modes.get(c.entry_id) if c.entry_id else None
    return f"{entry.title} ({entry.id})" if entry is not None else c.title


COMMAND = Command(SPEC, with_recent_changes(run))
