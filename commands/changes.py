"""changes [--since 1h] [topic|broker|group|acls|quotas|configs] [name]: what changed in the cluster
recently - brokers restarted or gone, configs and quotas set, ACLs added or removed, leaderships and
replicas moved, reassignments, consumer groups - from the change events the collector records each
minute in the metric lake, newest first, grouped by what changed. `--full` lists every event.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections.abc import Sequence
from typing import Any

from diagnosis import lake_evidence as lake
from diagnosis.recent_changes import bot_actions
from framework.context import Context
from framework.reply import Cell, Evidence, Reply, Table
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param

SHORT_ROWS = 15
# what the first word narrows to: the kinds of event (live/change_events.py) it covers
# ("action": the bot's own confirmed actions, from its audit log)
SCOPES: dict[str, tuple[str, ...]] = {
    "topic": ("topic", "config", "leadership", "replicas", "reassignment", "action"),
    "broker": ("broker", "broker_config", "leadership", "replicas", "controller", "action"),
    "group": ("group", "action"),
    "acls": ("acl",),
    "quotas": ("quota", "action"),
    "configs": ("config", "broker_config", "action"),
}
ALIASES = {
    "topics": "topic",
    "brokers": "broker",
    "groups": "group",
    "acl": "acls",
    "quota": "quotas",
    "config": "configs",
}

SPEC = CommandSpec(
    words=("changes",),
    summary="What changed in the cluster recently (restarts, configs, quotas, ACLs, leaders, reassignments, groups).",
    params=(
        Param("what", "topic, broker, group, acls, quotas or configs (default: every kind)", required=False),
        Param("name", "the topic, broker id or group to narrow to", required=False),
    ),
    options=(lake.since_option("1h"),),
    examples=("changes", "changes --since 6h", "changes topic orders", "changes broker 102", "changes quotas"),
)


def _scope(what: str | None) -> str | None:
    if what is None:
        return None
    word = ALIASES.get(what.lower(), what.lower())
    if word not in SCOPES:
        raise BadInput(
            f"'{what[:40]}' is not something changes can narrow to: say topic, broker, group, acls, quotas or configs.",
            ["changes", "changes topic orders", "changes broker 102"],
        )
    return word


def names(scope: str | None, name: str, resource: str, change: str) -> bool:
    """Whether an event is about ``name``: a topic by its name or one of its partitions, a broker
    by its id as a whole word, a group by its name."""
    if scope == "topic":
        return resource == f"topic {name}" or re.fullmatch(rf"{re.escape(name)}-\d+", resource) is not None
    if scope == "broker":
        pattern = rf"(?<![\w.,-]){re.escape(name)}(?![\w])"
        return re.search(pattern, resource) is not None or re.search(pattern, change) is not None
    if scope == "group":
        return resource == f"group {name}"
    return name in resource or name in change


def grouped(events: Sequence[Any]) -> list[Any]:
    """Newest first, each resource's events together (the resource whose newest event is newest first)."""
    newest: dict[str, int] = {}
    for e in events:
        newest[e.resource] = max(newest.get(e.resource, 0), e.ts_ms)
    return sorted(events, key=lambda e: (-newest[e.resource], e.resource, -e.ts_ms))


def _clock(ts_ms: int) -> str:
    return dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


async def run(request: CommandRequest, ctx: Context) -> Reply:
    scope = _scope(request.arg_text("what"))
    name = request.arg_text("name")
    since = lake.parse_since(request.option_text("since") or "1h")
    span = lake.describe_since(since)
    title = "What changed" + (f" ({scope} {name})" if scope and name else f" ({scope})" if scope else "")
    if ctx.lake is None:
        return Reply(
            title=title,
            severity="unknown",
            outcome="source_down",
            verdict="Unknown: the metric lake is not configured, and the cluster's changes are recorded there "
            "(the collector of `kbot run` snapshots the metadata every minute).",
        )
    since_ms = int((time.time() - since.total_seconds()) * 1000)
    kinds = SCOPES[scope] if scope else ()
    events: list[Any] = await ctx.lake.changes(since_ms, kinds, None, request.cluster)
    cluster = request.cluster or getattr(ctx.lake, "cluster", None)
    mine = await asyncio.to_thread(bot_actions, ctx, since_ms, cluster)
    events = [*events, *(a for a in mine if not kinds or a.kind in kinds)]  # lake rows and the bot's: same fields
    if name:
        events = [e for e in events if names(scope, name, e.resource, e.change)]
    about = f" to {scope} {name}" if scope and name else f" of {scope}" if scope else ""
    if not events:
        return Reply(
            title=title,
            severity="info",
            verdict=f"No change{about} recorded in the last {span}.",
            notes=[
                "Changes are recorded from the collector's metadata snapshots (one a minute while `kbot run` "
                "runs); the first snapshot is the baseline, so a change is seen from the second one on."
            ],
            window=span,
        )
    shown = grouped(events)
    rows: list[list[Cell]] = [
        [_clock(e.ts_ms), e.resource, e.change, e.before, e.after]
        for e in (shown if request.full else shown[:SHORT_ROWS])
    ]
    first = shown[0]
    resources = len({e.resource for e in events})
    verdict = (
        f"{len(events):,} change(s){about} to {resources:,} resource(s) in the last {span}; newest: "
        f"{first.resource} {first.change} at {_clock(first.ts_ms)} UTC."
    )
    newest = max(e.ts_ms for e in events)
    return Reply(
        title=title,
        severity="info",
        verdict=verdict,
        evidence=[Evidence("Newest change", f"{_clock(newest)} UTC", "lake: change events", "ok")],
        tables=[
            Table(
                "Changes, newest first",
                ["time (UTC)", "resource", "change", "before", "after"],
                rows,
                more=0 if request.full else max(0, len(shown) - SHORT_ROWS),
            )
        ],
        window=span,
        more_command=None if request.full or len(shown) <= SHORT_ROWS else f"changes --full --since {span}",
    )


COMMAND = Command(SPEC, run)
