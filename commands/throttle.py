"""throttle set <rate> | throttle clear: cap (or uncap) replication traffic for reassignments.

Kafka's replication throttle has two halves, and both are needed for it to do anything:
  * a rate per broker: leader.replication.throttled.rate / follower.replication.throttled.rate
    (dynamic broker configs, set here on every registered broker);
  * which replicas it applies to, per topic: leader/follower.replication.throttled.replicas.
For topics under reassignment we list the replicas explicitly, as kafka-reassign-partitions.sh
does (leader side: the replicas the partition already has; follower side: the ones being added),
rather than `*`: `*` would also throttle ordinary followers of those topics catching up after a
restart, which lengthens URP for no benefit. With no reassignment in progress only the rates are
set (they then throttle nothing until a reassignment lists replicas).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

from framework.actions import ActionPlan, ActionResult, ActionSpec, Precondition, Reconciled
from framework.context import Context
from framework.errors import NothingToDo
from framework.gateways import config_gateway, gateway
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from live.gateway import AdminGateway, GatewayError
from live.model import ConfigValue, Reassignment

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
MAX_RATE = 10_000_000_000  # 10 GB/s: above any NIC a broker has; a bigger number is a typo, not a throttle
SETTLE_S = 10.0  # how long execute reads configs back before calling a change missing
LOW_RATE = 1_000_000  # below 1 MB/s a reassignment of real data takes days: allowed, but said
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*(k|m|g|ki|mi|gi)?(b)?(?:/s|ps)?$", re.IGNORECASE)

SET_SPEC = CommandSpec(
    words=("throttle", "set"),
    summary="Cap replication traffic (bytes/s) on every broker, and on the replicas of partitions being reassigned.",
    params=(Param("rate", "bytes per second: 10485760, 50MB/s, 10MiB/s (KB/MB/GB = 1000^n, KiB/MiB/GiB = 1024^n)"),),
    mutating=True,
    examples=("throttle set 50MB/s", "throttle set 10485760"),
    details="Sets leader/follower.replication.throttled.rate on every broker; for topics under reassignment also "
    "lists the moving replicas in leader/follower.replication.throttled.replicas. Dry-run with validate_only first.",
)
CLEAR_SPEC = CommandSpec(
    words=("throttle", "clear"),
    summary="Remove the replication throttle: the per-broker rates and the topics' throttled-replica lists.",
    mutating=True,
    examples=("throttle clear",),
)


def parse_rate(text: str) -> int:
    """'50MB/s' -> 50_000_000 bytes/s; bounds-checked (> 0, <= 10 GB/s)."""
    m = _RATE.match(text.strip())
    if not m:
        raise BadInput(f"'{text}' is not a rate: write bytes per second like 10485760, 50MB/s or 10MiB/s.")
    number, prefix, unit = m.group(1), (m.group(2) or "").lower(), m.group(3)
    if unit == "b":  # lower-case b is bits in network units (Mb/s); Kafka's throttle is in bytes
        raise BadInput(
            f"'{text}' reads as bits per second; the throttle is in bytes: write {number}{(m.group(2) or '').upper()}B/s."
        )
    rate = int(float(number) * _UNITS[prefix])
    if rate <= 0:
        raise BadInput("The rate must be above 0 bytes/s (use `throttle clear` to remove the throttle).")
    if rate > MAX_RATE:
        raise BadInput(
            f"{rate:,} bytes/s is above {MAX_RATE // 10**9} GB/s, more than any broker link carries: check the unit."
        )
    return rate


def human_rate(rate: int) -> str:
    for size, unit in ((10**9, "GB/s"), (10**6, "MB/s"), (10**3, "kB/s")):
        if rate >= size:
            return f"{rate / size:,.1f} {unit} ({rate:,} bytes/s)"
    return f"{rate:,} bytes/s"


def replica_lists(moves: list[Reassignment]) -> dict[str, dict[str, str]]:
    """Pure: per topic under reassignment, the explicit throttled-replica lists ("partition:broker,...")."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in sorted(moves, key=lambda r: (r.topic, r.partition)):
        lists = out.setdefault(r.topic, {REPLICA_KEYS[0]: [], REPLICA_KEYS[1]: []})
        existing = [b for b in r.replicas if b not in r.adding]
        lists[REPLICA_KEYS[0]] += [f"{r.partition}:{b}" for b in existing]
        lists[REPLICA_KEYS[1]] += [f"{r.partition}:{b}" for b in r.adding]
    return {t: {k: ",".join(v) for k, v in lists.items() if v} for t, lists in out.items()}


# Per broker (its id as text: the plan is JSON) or topic, config key -> value; None: not set, or
# (in a target) delete it.
Settings = Mapping[str, Mapping[str, str | None]]
State = dict[str, dict[str, str | None]]


def _dynamic(cfg: Mapping[str, ConfigValue], key: str) -> str | None:
    """The value set on this resource itself (not a default inherited from elsewhere)."""
    v = cfg.get(key)
    return v.value if v is not None and v.source in ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_TOPIC_CONFIG") else None


async def _broker_state(gw: AdminGateway, brokers: list[int]) -> State:
    cfgs = await gw.broker_configs(brokers)
    return {str(b): {k: _dynamic(cfgs[b], k) for k in RATE_KEYS} for b in brokers}


async def _topic_state(gw: AdminGateway, topics: list[str]) -> State:
    cfgs = await gw.topic_configs(topics) if topics else {}
    return {t: {k: _dynamic(cfgs[t], k) for k in REPLICA_KEYS} for t in topics}


async def _dry_run(gw: AdminGateway, brokers: Settings, topics: Settings) -> list[str]:
    """validate_only on every change; returns the refusals (empty: all accepted)."""
    errors = []
    for b, kv in brokers.items():
        for k, v in kv.items():
            try:
                await gw.alter_broker_config(int(b), k, v, validate_only=True)
            except GatewayError as exc:
                errors.append(f"broker {b} {k}: {exc}")
    for t, kv in topics.items():
        for k, v in kv.items():
            try:
                await gw.alter_topic_config(t, k, v, validate_only=True)
            except GatewayError as exc:
                errors.append(f"topic {t} {k}: {exc}")
    return errors


def _changes(before_b: Settings, target_b: Settings, before_t: Settings, target_t: Settings) -> list[str]:
    def show(v: str | None) -> str:
        return "(not set)" if v is None else v if len(v) <= 80 else v[:77] + "..."

    lines = [
        f"broker {b} {k}: {show(before_b[b][k])} -> {show(v)}" for b, kv in target_b.items() for k, v in kv.items()
    ]
    lines += [
        f"topic {t} {k}: {show(before_t[t][k])} -> {show(v)}" for t, kv in target_t.items() for k, v in kv.items()
    ]
    return lines


def _make_plan(
    kind: str,
    gw: AdminGateway,
    summary: str,
    brokers: list[int],
    target_b: Settings,
    target_t: Settings,
    before_b: Settings,
    before_t: Settings,
    errors: list[str],
    notes: list[str],
) -> ActionPlan:
    pre = [
        Precondition(
            "validate_only dry run",
            not errors,
            "; ".join(errors[:5])
            if errors
            else f"the brokers accepted all {sum(len(v) for v in target_b.values()) + sum(len(v) for v in target_t.values())} change(s)",
        )
    ]
    if not target_b and not target_t:
        pre.append(Precondition("something to change", False, "no broker or topic has a replication throttle set"))
    return ActionPlan(
        kind=kind,
        cluster=gw.name,
        args={"brokers": brokers, "target_brokers": target_b, "target_topics": target_t},
        summary=summary,
        changes=_changes(before_b, target_b, before_t, target_t) + notes,
        validation=(
            "IncrementalAlterConfigs validate_only: " + ("refused: " + "; ".join(errors[:3]) if errors else "accepted")
        ),
        preconditions=pre,
    )


async def plan_set(request: CommandRequest, ctx: Context) -> ActionPlan:
    gw = await gateway(ctx, request.cluster)
    rate = parse_rate(str(request.args["rate"]))
    brokers = (await gw.describe_cluster()).broker_ids
    await ctx.progress("reading broker configs and reassignments in progress")
    moves = await gw.reassignments()
    lists = replica_lists(moves)
    before_b = await _broker_state(gw, brokers)
    before_t = await _topic_state(gw, sorted(lists))
    target_b = {str(b): {k: str(rate) for k in RATE_KEYS} for b in brokers}
    errors = await _dry_run(await config_gateway(ctx, request.cluster), target_b, lists)
    notes = []
    if not lists:
        notes.append(
            "No reassignment is in progress, so no topic lists throttled replicas: the rates throttle nothing until one does."
        )
    if rate < LOW_RATE:
        notes.append(f"{human_rate(rate)} is very low: copying a replica of real size at that rate takes days.")
    return _make_plan(
        SET_SPEC.name,
        gw,
        f"Throttle replication to {human_rate(rate)} on {len(brokers)} broker(s)"
        + (f" and the moving replicas of {len(lists)} topic(s)." if lists else "."),
        brokers,
        target_b,
        lists,
        before_b,
        before_t,
        errors,
        notes,
    )


async def plan_clear(request: CommandRequest, ctx: Context) -> ActionPlan:
    gw = await gateway(ctx, request.cluster)
    brokers = (await gw.describe_cluster()).broker_ids
    await ctx.progress("reading broker and topic configs")
    before_b = await _broker_state(gw, brokers)
    before_t = await _topic_state(gw, await gw.topics(include_internal=True))
    # DELETE only what is set, so the preview lists exactly what goes away.
    target_b = {b: {k: None for k, v in kv.items() if v is not None} for b, kv in before_b.items()}
    target_t = {t: {k: None for k, v in kv.items() if v is not None} for t, kv in before_t.items()}
    target_b = {b: kv for b, kv in target_b.items() if kv}
    target_t = {t: kv for t, kv in target_t.items() if kv}
    if not target_b and not target_t:
        raise NothingToDo(
            f"No replication throttle is set on any of the {len(brokers)} broker(s) or on any topic: nothing to clear."
        )
    errors = await _dry_run(await config_gateway(ctx, request.cluster), target_b, target_t)
    return _make_plan(
        CLEAR_SPEC.name,
        gw,
        f"Remove the replication throttle from {len(target_b)} broker(s) and {len(target_t)} topic(s).",
        brokers,
        target_b,
        target_t,
        before_b,
        {t: before_t[t] for t in target_t},
        errors,
        [],
    )


async def recheck(plan: ActionPlan, ctx: Context) -> list[Precondition]:
    gw = await gateway(ctx, plan.cluster)
    now = (await gw.describe_cluster()).broker_ids
    same = sorted(now) == sorted(plan.args["brokers"])
    errors = await _dry_run(
        await config_gateway(ctx, plan.cluster), plan.args["target_brokers"], plan.args["target_topics"]
    )
    # A broker that joined since the preview would be left unthrottled: preview again instead.
    return [
        Precondition("same brokers as previewed", same, f"registered now: {now}, previewed: {plan.args['brokers']}"),
        Precondition("validate_only dry run", not errors, "; ".join(errors[:5]) or "accepted"),
    ]


async def _read_back(gw: AdminGateway, plan: ActionPlan) -> dict[str, State]:
    brokers = [int(b) for b in plan.args["target_brokers"]]
    return {
        "brokers": await _broker_state(gw, brokers) if brokers else {},
        "topics": await _topic_state(gw, sorted(plan.args["target_topics"])),
    }


def _matches(state: Mapping[str, State], plan: ActionPlan) -> tuple[int, int]:
    """(changes in place, changes planned)."""
    want = [(state["brokers"], b, k, v) for b, kv in plan.args["target_brokers"].items() for k, v in kv.items()]
    want += [(state["topics"], t, k, v) for t, kv in plan.args["target_topics"].items() for k, v in kv.items()]
    return sum(1 for where, name, k, v in want if where.get(name, {}).get(k) == v), len(want)


async def execute(plan: ActionPlan, ctx: Context) -> ActionResult:
    gw = await gateway(ctx, plan.cluster)
    before = await _read_back(gw, plan)
    op = await config_gateway(ctx, plan.cluster)  # writes as the config principal; reads stay the observer's
    failed = []
    for b, kv in plan.args["target_brokers"].items():
        for k, v in kv.items():
            try:
                await op.alter_broker_config(int(b), k, v)
            except GatewayError as exc:
                failed.append(f"broker {b} {k}: {exc}")
    for t, kv in plan.args["target_topics"].items():
        for k, v in kv.items():
            try:
                await op.alter_topic_config(t, k, v)
            except GatewayError as exc:
                failed.append(f"topic {t} {k}: {exc}")
    after = await _read_back(gw, plan)
    done, total = _matches(after, plan)
    # Dynamic configs travel through the KRaft metadata log; a broker's describe_configs can
    # trail the controller for a moment, so read back until it agrees (or the wait is over).
    deadline = asyncio.get_running_loop().time() + SETTLE_S
    while not failed and done < total and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
        after = await _read_back(gw, plan)
        done, total = _matches(after, plan)
    ok = not failed and done == total
    detail = f"{done} of {total} config change(s) read back as planned" + (
        "; failed: " + "; ".join(failed[:5]) if failed else ""
    )
    return ActionResult(ok, detail, before, after)


async def reconcile(plan: ActionPlan, ctx: Context) -> Reconciled:
    # Partial is "not_done": setting or deleting a config again is idempotent.
    try:
        done, total = _matches(await _read_back(await gateway(ctx, plan.cluster), plan), plan)
    except Exception:
        return "unknown"
    return "done" if done == total else "not_done"


SET_ACTION = ActionSpec(plan_set, recheck, execute, reconcile, principal="config")
CLEAR_ACTION = ActionSpec(plan_clear, recheck, execute, reconcile, principal="config")
SET = Command(SET_SPEC, action=SET_ACTION)
CLEAR = Command(CLEAR_SPEC, action=CLEAR_ACTION)
