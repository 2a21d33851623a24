"""elect-leaders <topic> [partitions]: move leadership back to each partition's preferred replica.

PREFERRED elections only, on partitions of ONE named topic: never UNCLEAN (that may drop
acknowledged writes) and never "every partition of the cluster" (a cluster-wide election moves
thousands of leaders at once, which is its own incident).
"""

from __future__ import annotations

import asyncio
import re

from framework.actions import ActionPlan, ActionResult, ActionSpec, Precondition, Reconciled
from framework.context import Context
from framework.errors import NothingToDo
from framework.gateways import gateway, operator_gateway
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from live.gateway import AdminGateway, GatewayError, Timeout, UnknownTopic
from live.model import TopicInfo

MAX_PARTITIONS = 10_000  # more than any real topic; bounds what a typo like 0-99999999 can expand to
SETTLE_S = 10.0  # metadata on the broker we ask may trail the controller for a moment

SPEC = CommandSpec(
    words=("elect-leaders",),
    summary="Preferred leader election on one topic's partitions whose leader is not the preferred replica.",
    params=(
        Param("topic", "the topic", kind="topic"),
        Param(
            "partitions",
            "which partitions: '0,2,5-7' (default: every partition of the topic not led by its preferred replica)",
            required=False,
        ),
    ),
    mutating=True,
    examples=("elect-leaders orders", "elect-leaders orders 0,2,5-7"),
    details="Only preferred elections; a partition whose preferred replica is down or out of the ISR is skipped, with why.",
)

_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_partitions(text: str) -> list[int]:
    """'0,2,5-7' -> [0, 2, 5, 6, 7]: sorted, without duplicates."""
    out: set[int] = set()
    for item in (s.strip() for s in text.split(",")):
        m = _ITEM.match(item)
        if not m:
            raise BadInput(f"'{item or text}' is not a partition list: use numbers and ranges like 0,2,5-7.")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if hi < lo:
            raise BadInput(f"Range {item} runs backwards; write {hi}-{lo}.")
        if hi - lo + 1 + len(out) > MAX_PARTITIONS:
            raise BadInput(f"That names more than {MAX_PARTITIONS:,} partitions.")
        out.update(range(lo, hi + 1))
    return sorted(out)


# (partition, preferred leader, current leader) to elect; (partition, why) skipped; partitions already led
# by their preferred replica
Election = tuple[list[tuple[int, int, int | None]], list[tuple[int, str]], list[int]]


def election_plan(topic: TopicInfo, registered: set[int], wanted: list[int] | None) -> Election:
    """Pure: (eligible [(partition, preferred, current leader)], skipped [(partition, why)], already [partition]).

    A preferred replica that is down or out of the ISR cannot take over: Kafka would refuse with
    PREFERRED_LEADER_NOT_AVAILABLE, so the preview says so instead of promising the election."""
    parts = {p.partition: p for p in topic.partitions}
    missing = [n for n in (wanted or []) if n not in parts]
    if missing:
        raise BadInput(
            f"{topic.name} has partitions 0-{len(parts) - 1}; no partition {', '.join(map(str, missing[:10]))}.",
            [f"describe {topic.name}"],
        )
    eligible: list[tuple[int, int, int | None]] = []
    skipped: list[tuple[int, str]] = []
    already: list[int] = []
    for n in wanted if wanted is not None else sorted(parts):
        p = parts[n]
        preferred = p.preferred_leader
        if preferred is None:
            skipped.append((n, "it has no replicas"))
        elif p.leader == preferred:
            already.append(n)
        elif preferred not in registered:
            skipped.append((n, f"preferred replica {preferred} is not a registered broker"))
        elif preferred not in p.isr:
            skipped.append((n, f"preferred replica {preferred} is not in the ISR {list(p.isr)}"))
        else:
            eligible.append((n, preferred, p.leader))
    return eligible, skipped, already


async def _read(gw: AdminGateway, topic: str) -> tuple[TopicInfo | None, set[int]]:
    try:
        [info] = await gw.describe_topics([topic])
    except UnknownTopic:
        return None, set()
    return info, set((await gw.describe_cluster()).broker_ids)


def _leader_text(leader: int | None) -> str:
    return "none" if leader is None else str(leader)


async def plan(request: CommandRequest, ctx: Context) -> ActionPlan:
    gw = await gateway(ctx, request.cluster)
    topic = str(request.args["topic"])
    wanted = parse_partitions(str(request.args["partitions"])) if request.args.get("partitions") else None
    info, registered = await _read(gw, topic)
    if info is None:
        raise BadInput(f"Topic {topic} does not exist.", ["status"])
    eligible, skipped, already = election_plan(info, registered, wanted)
    if not eligible and not skipped:
        raise NothingToDo(f"Every selected partition of {topic} is already led by its preferred replica.")
    changes = [f"{topic}-{n}: leader {_leader_text(cur)} -> {pref} (preferred)" for n, pref, cur in eligible]
    changes += [f"{topic}-{n}: skipped, {why}" for n, why in skipped]
    if already and wanted is not None:
        changes.append(f"already led by the preferred replica: {', '.join(f'{topic}-{n}' for n in already)}")
    pre = [
        Precondition(
            "preferred replica alive and in ISR",
            bool(eligible),
            f"{len(eligible)} partition(s) can move to their preferred replica"
            + (f"; {len(skipped)} skipped" if skipped else "")
            if eligible
            else "no partition of the selection can move: "
            + (
                "every one is already led by its preferred replica"
                if not skipped
                else "; ".join(f"{topic}-{n}: {why}" for n, why in skipped[:5])
            ),
        )
    ]
    return ActionPlan(
        kind=SPEC.name,
        cluster=gw.name,
        args={
            "topic": topic,
            "partitions": [[n, pref] for n, pref, _ in eligible],
            "skipped": [[n, w] for n, w in skipped],
        },
        summary=f"Preferred leader election on {len(eligible)} partition(s) of {topic}.",
        changes=changes or [f"nothing to move on {topic}"],
        validation="Preferred election has no dry run in Kafka's API; each preferred replica was checked alive and in the ISR, "
        "and is checked again right before the election.",
        preconditions=pre,
    )


async def recheck(plan: ActionPlan, ctx: Context) -> list[Precondition]:
    gw = await gateway(ctx, plan.cluster)
    topic = plan.args["topic"]
    info, registered = await _read(gw, topic)
    if info is None:
        return [Precondition("topic exists", False, f"{topic} no longer exists")]
    planned = [n for n, _ in plan.args["partitions"]]
    eligible, skipped, already = election_plan(info, registered, planned)
    if not planned:
        return [Precondition("preferred replica alive and in ISR", False, "nothing to elect")]
    bad = "; ".join(f"{topic}-{n}: {why}" for n, why in skipped)
    return [
        Precondition(
            "preferred replica alive and in ISR",
            not skipped,
            bad or f"{len(eligible)} to move, {len(already)} already preferred",
        )
    ]


def _leaders(info: TopicInfo | None, partitions: list[int]) -> dict[str, int | None]:
    by = {p.partition: p.leader for p in info.partitions} if info else {}
    return {str(n): by.get(n) for n in partitions}  # str keys: the audit log stores JSON


async def execute(plan: ActionPlan, ctx: Context) -> ActionResult:
    gw = await gateway(ctx, plan.cluster)
    topic, pairs = plan.args["topic"], plan.args["partitions"]
    numbers = [n for n, _ in pairs]
    before = _leaders((await _read(gw, topic))[0], numbers)
    try:
        # ElectLeaders as the operator (ALTER on CLUSTER); the reads around it stay the observer's
        results = await (await operator_gateway(ctx, plan.cluster)).elect_preferred_leaders(
            [(topic, n) for n in numbers]
        )
    except Timeout:
        raise  # sent but not answered: the gate reads the cluster back (reconcile)
    except GatewayError as exc:
        return ActionResult(False, f"The election failed: {exc}", {"leaders": before}, {})
    want = {str(n): pref for n, pref in pairs}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    after = _leaders((await _read(gw, topic))[0], numbers)
    while after != want and loop.time() < deadline:
        await asyncio.sleep(0.5)
        after = _leaders((await _read(gw, topic))[0], numbers)
    failed = [r for r in results if r.outcome == "failed"]
    detail = (
        f"{sum(r.outcome == 'elected' for r in results)} elected, "
        f"{sum(r.outcome == 'already_preferred' for r in results)} already preferred, {len(failed)} failed"
        + ("".join(f"; {topic}-{r.partition}: {r.error}" for r in failed[:5]))
    )
    return ActionResult(
        not failed and after == want,
        detail,
        {"leaders": before},
        {"leaders": after, "outcomes": {str(r.partition): r.outcome for r in results}},
    )


async def reconcile(plan: ActionPlan, ctx: Context) -> Reconciled:
    # Partial counts as not done: a preferred election is idempotent, so running it again is safe.
    # The metadata a broker answers with can trail the controller for a moment after an election,
    # so read until it shows the preferred leaders or the settle time is over.
    deadline = asyncio.get_running_loop().time() + SETTLE_S
    while True:
        try:
            gw = await gateway(ctx, plan.cluster)
            info, _ = await _read(gw, plan.args["topic"])
        except Exception:
            return "unknown"
        if info is None:
            return "unknown"
        now = _leaders(info, [n for n, _ in plan.args["partitions"]])
        if all(now[str(n)] == pref for n, pref in plan.args["partitions"]):
            return "done"
        if asyncio.get_running_loop().time() >= deadline:
            return "not_done"
        await asyncio.sleep(0.5)


ACTION = ActionSpec(plan, recheck, execute, reconcile, principal="operator")
COMMAND = Command(SPEC, action=ACTION)
