"""A consumer group's window verdict from the lake (Burrow's rules, ``window_queries.lag``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from diagnosis.lake_evidence.findings import LakeFindings, num, unavailable
from diagnosis.lake_evidence.window import (
    NotEnoughData,
    Row,
    Window,
    ask_window,
    lake_cluster,
)
from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Evidence, Series
from framework.spec import CommandRequest
from window_queries.lag import GROUP_LAG_QUESTION


@dataclass
class GroupLagFindings(LakeFindings):
    """The lake's findings on one group, plus the figures `lag` ranks causes with."""

    status: str | None = None  # Burrow's group status: OK, WARN, ERR
    worst_status: str | None = None  # the worst partition status: OK, WARN, STOP, STALL, REWIND
    total_lag: float | None = None  # sum of the partitions' current lag (latest log end - last commit)
    last_commit: float | None = None  # epoch seconds of the last commit the lake saw
    first_commit: float | None = None


def _epoch(value: dt.datetime | None) -> float | None:
    """Epoch seconds of a row's timestamp (``lake.queries`` hands them out aware, in UTC)."""
    return None if value is None else value.timestamp()


async def group_lag(ctx: Context, request: CommandRequest, group: str, window: Window) -> LakeFindings:
    """Burrow's verdict on ``group`` over the window (``window_queries.lag``, answered in the bot's
    process), its partitions' lines and its lag per minute; on a lake with nothing ingested yet,
    not enough data.  Raises Unavailable."""
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), GROUP_LAG_QUESTION, window, group)
    except NotEnoughData:
        return GroupLagFindings.young(window, "lake: partition_lag_status")
    if not facts["group"]:
        return GroupLagFindings.without_data(window, "lake: partition_lag_status", f"commits of group {group}")
    out = GroupLagFindings(window)
    for g in facts["group"]:
        status = g["status"]
        text = (
            f"{status} (worst partition: {g['worst_status']}); {g['partitions_not_ok']} of {g['partitions']} "
            f"partition(s) not OK; lag now {num(g['total_lag'])}"
        )
        out.evidence.append(
            Evidence("Window verdict (Burrow rules)", text, "lake: group_lag_status", "ok" if status == "OK" else "bad")
        )
        out.severity = "ok" if status == "OK" else ("warning" if status == "WARN" else "critical")
        out.status, out.worst_status, out.total_lag = status, g["worst_status"], g["total_lag"]
    parts = facts["partitions"]
    commits = [t for r in parts if (t := _epoch(r.get("last_commit"))) is not None]
    firsts = [t for r in parts if (t := _epoch(r.get("first_commit"))) is not None]
    out.last_commit = max(commits) if commits else None
    out.first_commit = min(firsts) if firsts else None
    out.details = partition_lag_lines(parts)
    clusters = {r["cluster"] for r in facts.get("trend", [])}
    out.series = [
        Series(
            f"Lag of {group}",
            "records",
            [(r["minute"].isoformat(), float(r["lag"])) for r in facts["trend"] if r["cluster"] == c],
            label=f"total lag [{c}]" if len(clusters) > 1 else "total lag",
        )
        for c in sorted(clusters)
    ]
    return out


async def group_lag_or_note(ctx: Context, request: CommandRequest, group: str, window: Window) -> LakeFindings | None:
    """Like :func:`group_lag`, but None without a lake and a note when it is unavailable."""
    if ctx.lake is None:
        return None
    try:
        return await group_lag(ctx, request, group, window)
    except Unavailable as exc:
        return unavailable(window, exc)


def partition_lag_lines(rows: list[Row]) -> list[str]:
    return [
        f"{r['topic']}-{r['partition']}: {r['status']} (lag {num(r['current_lag'])}, max {num(r['max_lag'])}, "
        f"{r['commits']} commit(s) seen)"
        for r in rows
    ]
