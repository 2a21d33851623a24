"""retention <topic> <ms>: change a topic's retention.ms, dry-run first.

Lowering retention deletes data (every segment older than the new limit goes at the next
retention check), so it needs a second approver. So does -1 ("keep forever"): with no time limit
the topic's log grows on disk without bound (unless retention.bytes caps each partition) until a
broker's disk fills and its log directory goes offline. Raising it to a finite value does not.
"""

from __future__ import annotations

import asyncio
import re

from diagnosis.snapshot import config_value
from framework.actions import ActionPlan, ActionResult, ActionSpec, Precondition, Reconciled
from framework.context import Context
from framework.gateways import config_gateway, gateway
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from live.gateway import AdminGateway, GatewayError, Timeout, UnknownTopic
from live.model import ConfigValue

KEY = "retention.ms"
SETTLE_S = 10.0  # how long execute reads the config back before calling the change missing
INFINITE = -1
# Below a minute retention is shorter than the broker's retention check (log.retention.check.interval.ms,
# 5 min by default) and than most segment rolls: in practice such a value is seconds typed as ms.
MIN_MS = 60_000
# Ten years. Anything longer is almost surely a unit slip; "keep forever" is -1, which says so.
MAX_MS = 10 * 365 * 24 * 3600 * 1000
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+)\s*(ms|s|min|m|h|d|w)?$", re.IGNORECASE)

SPEC = CommandSpec(
    words=("retention",),
    summary="Set a topic's retention.ms (validate_only dry run first; lowering it needs a second approver).",
    params=(
        Param("topic", "the topic", kind="topic"),
        Param(
            "ms", f"retention in ms (or with a unit: 90m, 12h, 7d); -1 keeps data forever; {MIN_MS:,} ms to 10 years"
        ),
    ),
    mutating=True,
    examples=("retention orders 604800000", "retention orders 3d", "retention audit-log -1"),
    details="Lowering retention makes older segments eligible for deletion at the next retention check; that data is gone.",
)


def parse_retention_ms(text: str) -> int:
    """'604800000' / '7d' / '-1' -> ms, bounds-checked."""
    text = text.strip()
    if text == "-1":
        return INFINITE
    m = _DURATION.match(text)
    if not m:
        raise BadInput(
            f"'{text}' is not a retention: give milliseconds (604800000), a duration (7d, 12h) or -1 for forever."
        )
    ms = int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]
    if ms < MIN_MS:
        raise BadInput(
            f"{ms:,} ms is under a minute: shorter than the broker's retention check, so it would delete "
            f"almost everything at once. Did you mean seconds? The floor is {MIN_MS:,} ms."
        )
    if ms > MAX_MS:
        raise BadInput(f"{ms:,} ms is more than 10 years; for 'keep forever' use -1.")
    return ms


def as_limit(ms: int) -> float:
    return float("inf") if ms < 0 else float(ms)


def lowers(before: int, after: int) -> bool:
    return as_limit(after) < as_limit(before)


def human_ms(ms: int) -> str:
    if ms < 0:
        return "forever (-1)"
    for size, unit in ((86_400_000, "d"), (3_600_000, "h"), (60_000, "min")):
        if ms >= size:
            return f"{ms / size:,.4g} {unit} ({ms:,} ms)"
    return f"{ms:,} ms"


def human_bytes(n: int) -> str:
    for size, unit in ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} B"


async def _current(gw: AdminGateway, topic: str) -> tuple[dict[str, ConfigValue] | None, int | None]:
    try:
        cfg = (await gw.topic_configs([topic]))[topic]
    except UnknownTopic:
        return None, None
    value = config_value(cfg, KEY)
    return cfg, int(value) if value is not None else None


async def _size_on_disk(gw: AdminGateway, topic: str) -> int | None:
    """Bytes the topic holds across all replicas; an upper bound on what lowering could delete."""
    try:
        return sum(p.size for d in await gw.log_dirs() for p in d.partitions if p.topic == topic and not p.is_future)
    except GatewayError:
        return None  # optional: the preview says nothing rather than guessing


async def _validate(gw: AdminGateway, topic: str, ms: int) -> str | None:
    try:
        await gw.alter_topic_config(topic, KEY, str(ms), validate_only=True)
    except GatewayError as exc:
        return str(exc)
    return None


async def plan(request: CommandRequest, ctx: Context) -> ActionPlan:
    gw = await gateway(ctx, request.cluster)
    topic = str(request.args["topic"])
    target = parse_retention_ms(str(request.args["ms"]))
    cfg, before = await _current(gw, topic)
    if cfg is None:
        raise BadInput(f"Topic {topic} does not exist.", ["status"])
    before = before if before is not None else 7 * 86_400_000  # Kafka's default when the value is hidden
    # the dry run is the config principal's: it shows now, not after a confirmation, if it lacks the right
    error = await _validate(await config_gateway(ctx, request.cluster), topic, target)
    deleting = lowers(before, target)
    unbounded = target == INFINITE and before != INFINITE
    changes = [f"{topic} {KEY}: {human_ms(before)} -> {human_ms(target)}"]
    if unbounded:
        changes.append(_unbounded_growth(topic, cfg))
    if deleting:
        size = await _size_on_disk(gw, topic)
        changes.append(
            f"records older than {human_ms(target)} become eligible for deletion at the next retention check"
            + (
                f"; the topic holds {human_bytes(size)} on disk across all replicas now (the most that can go)"
                if size is not None
                else ""
            )
        )
    policy = config_value(cfg, "cleanup.policy", "delete")
    if "delete" not in policy:
        changes.append(
            f"cleanup.policy={policy}: retention.ms deletes nothing on this topic (compaction keeps the latest per key)"
        )
    return ActionPlan(
        kind=SPEC.name,
        cluster=gw.name,
        args={"topic": topic, "before": before, "target": target},
        summary=f"{'Lower' if deleting else 'Raise' if target != before else 'Keep'} {topic} retention.ms to {human_ms(target)}."
        + (" Nothing is deleted by age any more: disk use grows without bound." if unbounded else ""),
        changes=changes,
        validation="IncrementalAlterConfigs validate_only: "
        + (f"refused: {error}" if error else "accepted by the broker"),
        preconditions=[
            Precondition("validate_only dry run", error is None, error or "accepted"),
            Precondition("value changes", target != before, f"{KEY} is {human_ms(before)} now"),
        ],
        high_risk=deleting or unbounded,
    )


def _unbounded_growth(topic: str, cfg: dict[str, ConfigValue]) -> str:
    """The warning -1 needs: what stops the topic filling the brokers' disks, if anything."""
    cap = config_value(cfg, "retention.bytes", "-1")
    bounded = cap not in (None, "-1") and cap.lstrip("-").isdigit() and int(cap) >= 0
    limit = (
        f"only retention.bytes={int(cap):,} ({human_bytes(int(cap))} per partition) still bounds it"
        if bounded
        else "retention.bytes is -1 too, so nothing bounds it"
    )
    return (
        f"WARNING: unbounded disk growth: no record of {topic} is deleted by age any more; its log grows "
        f"with every write ({limit}) until a broker's disk fills, and a full log directory goes offline "
        "with every partition on it. Watch the brokers' free disk, or give a finite retention."
    )


async def recheck(plan: ActionPlan, ctx: Context) -> list[Precondition]:
    gw = await gateway(ctx, plan.cluster)
    a = plan.args
    cfg, now = await _current(gw, a["topic"])
    if cfg is None:
        return [Precondition("topic exists", False, f"{a['topic']} no longer exists")]
    # Someone else changed it since the preview: what the approver saw is no longer what happens.
    unchanged = now is None or now == a["before"]
    error = await _validate(await config_gateway(ctx, plan.cluster), a["topic"], a["target"])
    return [
        Precondition(
            "unchanged since the preview", unchanged, f"{KEY} is {human_ms(now) if now is not None else 'hidden'} now"
        ),
        Precondition("validate_only dry run", error is None, error or "accepted"),
    ]


async def execute(plan: ActionPlan, ctx: Context) -> ActionResult:
    gw = await gateway(ctx, plan.cluster)
    a = plan.args
    _, before = await _current(gw, a["topic"])
    try:
        await (await config_gateway(ctx, plan.cluster)).alter_topic_config(a["topic"], KEY, str(a["target"]))
    except Timeout:
        raise  # sent but not answered: the gate reads the cluster back (reconcile)
    except GatewayError as exc:
        return ActionResult(False, f"The change failed: {exc}", {KEY: before}, {})
    _, after = await _current(gw, a["topic"])
    deadline = asyncio.get_running_loop().time() + SETTLE_S
    while after != a["target"] and asyncio.get_running_loop().time() < deadline:  # metadata log catching up
        await asyncio.sleep(0.5)
        _, after = await _current(gw, a["topic"])
    ok = after == a["target"]
    return ActionResult(
        ok,
        f"{a['topic']} {KEY} is now {human_ms(after) if after is not None else 'unreadable'}",
        {KEY: before},
        {KEY: after},
    )


async def reconcile(plan: ActionPlan, ctx: Context) -> Reconciled:
    try:
        _, now = await _current(await gateway(ctx, plan.cluster), plan.args["topic"])
    except Exception:
        return "unknown"
    if now == plan.args["target"]:
        return "done"
    return "not_done" if now == plan.args["before"] else "unknown"  # a third value: someone else changed it


ACTION = ActionSpec(
    plan,
    recheck,
    execute,
    reconcile,
    principal="config",
    second_approver="when it lowers retention.ms or sets -1: lowering deletes data, -1 lets disk use grow without bound",
)
COMMAND = Command(SPEC, action=ACTION)
