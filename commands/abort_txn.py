"""abort-txn <topic> <partition> [--producer-id N]: write an ABORT marker for a hanging transaction (KIP-664).

The plan pins the exact producer id, epoch, coordinator epoch and transaction start offset it saw,
so a confirmation minutes later aborts that transaction or nothing: if the producer moved on (new
epoch, new transaction), the re-check fails instead of aborting a healthy transaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from diagnosis.snapshot import config_value
from framework.actions import ActionPlan, ActionResult, ActionSpec, JsonObject, Precondition, Reconciled
from framework.context import Context
from framework.errors import NothingToDo, Unavailable
from framework.gateways import gateway, operator_gateway
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Option, Param
from live.gateway import AdminGateway, GatewayError, Timeout, UnknownTopic
from live.model import ConfigValue, ProducerState, TopicInfo
from runbook_kb import KnowledgeBase
from runbook_kb.schema import Configs

# The default --min-age-ms is the brokers' transaction.max.timeout.ms: no producer may ask for a
# longer transaction timeout, so a transaction idle that long is one its coordinator should already
# have aborted (it checks every few seconds); one still open is hanging rather than slow. When the
# brokers' value cannot be read, Kafka's own default for it (the runbook's config table) stands in.
MAX_TIMEOUT_KEY = "transaction.max.timeout.ms"
AFTER_WAIT_S = 5.0  # the marker is appended before the call returns; allow metadata to settle

SPEC = CommandSpec(
    words=("abort-txn",),
    summary="Abort a hanging transaction on one partition (KIP-664 WriteTxnMarkers), so read_committed consumers move on.",
    params=(Param("topic", "the topic", kind="topic"), Param("partition", "the partition number", kind="int")),
    options=(
        Option("producer-id", "the producer whose transaction to abort (needed when several are open)", kind="int"),
        Option(
            "min-age-ms",
            "only abort a transaction idle at least this long (default: the brokers' transaction.max.timeout.ms, "
            "Kafka's default 900,000 ms when it cannot be read)",
            kind="int",
        ),
    ),
    mutating=True,
    examples=("abort-txn payments 0", "abort-txn payments 0 --producer-id 4001"),
    details="Needs a second approver: aborting a transaction that is still live fails its producer. "
    "Records of the aborted transaction become invisible to read_committed consumers.",
)


def pick_producer(open_txns: list[ProducerState], wanted: int | None, topic: str, partition: int) -> ProducerState:
    """The producer to abort: the one asked for, else the only one with an open transaction."""
    where = f"{topic}-{partition}"
    if wanted is not None:
        for p in open_txns:
            if p.producer_id == wanted:
                return p
        held = ", ".join(str(p.producer_id) for p in open_txns) or "none"
        raise BadInput(f"Producer {wanted} holds no open transaction on {where} (open: {held}).", ["hanging-txns"])
    if not open_txns:
        raise NothingToDo(f"No transaction is open on {where}: nothing to abort.")
    if len(open_txns) > 1:
        listing = "; ".join(
            f"producer {p.producer_id} (epoch {p.producer_epoch}) from offset {p.current_txn_start_offset:,}"
            for p in open_txns
        )
        raise BadInput(
            f"{len(open_txns)} transactions are open on {where}: {listing}. Say which with --producer-id.",
            [f"abort-txn {topic} {partition} --producer-id {p.producer_id}" for p in open_txns[:3]],
        )
    return open_txns[0]


def lso_move(open_txns: list[ProducerState], producer_id: int) -> tuple[int, int | None]:
    """(LSO now, LSO after the abort). The LSO is the first offset of the earliest open transaction;
    ``None`` after means no transaction stays open, so the LSO catches up with the high watermark."""
    now = min(p.current_txn_start_offset for p in open_txns)
    rest = [p.current_txn_start_offset for p in open_txns if p.producer_id != producer_id]
    return now, (min(rest) if rest else None)


def preconditions(
    args: JsonObject, topic: TopicInfo | None, producers: list[ProducerState], now_ms: float, flagged: set[int] | None
) -> list[Precondition]:
    """Pure: the checks the plan and the re-check share. ``flagged``: producer ids the coordinators
    list as hanging (None when that listing could not be read)."""
    where = f"{args['topic']}-{args['partition']}"
    part = next((p for p in topic.partitions if p.partition == args["partition"]), None) if topic else None
    out = [
        Precondition(
            "partition exists",
            part is not None and part.leader is not None,
            f"{where} has leader {part.leader}"
            if part is not None and part.leader is not None
            else f"{where} does not exist"
            if part is None
            else f"{where} has no leader: the marker cannot be written",
        )
    ]
    same = next((p for p in producers if p.producer_id == args["producer_id"]), None)
    holds = (
        same is not None
        and same.has_open_transaction
        and same.producer_epoch == args["producer_epoch"]
        and same.current_txn_start_offset == args["start_offset"]
    )
    if holds:
        detail = f"producer {args['producer_id']} (epoch {args['producer_epoch']}) still holds the transaction open from offset {args['start_offset']:,}"
    elif same is None or not same.has_open_transaction:
        detail = f"producer {args['producer_id']} no longer holds an open transaction on {where}: it ended on its own"
    else:
        detail = (
            f"producer {args['producer_id']} now has epoch {same.producer_epoch}, transaction from offset "
            f"{same.current_txn_start_offset:,} (previewed: epoch {args['producer_epoch']}, offset {args['start_offset']:,}): preview again"
        )
    out.append(Precondition("same open transaction", holds, detail))
    last = same.last_timestamp if same is not None else -1
    idle_ms = now_ms - last if last > 0 else None
    old = idle_ms is not None and idle_ms >= args["min_age_ms"]
    listed = flagged is not None and args["producer_id"] in flagged
    idle = f"last write {idle_ms / 1000:,.0f} s ago" if idle_ms is not None else "last write time unknown"
    why = args.get("min_age_why")
    out.append(
        Precondition(
            "old enough to be hanging",
            old or listed,
            f"{idle}; threshold {args['min_age_ms'] / 1000:,.0f} s"
            + (f" ({why})" if why else "")
            + (
                "; listed as hanging by its coordinator"
                if listed
                else ""
                if flagged is not None
                else "; coordinator listing unreadable"
            ),
        )
    )
    return out


def kafka_default_max_timeout_ms(kb: KnowledgeBase) -> int:
    """Kafka's own default of transaction.max.timeout.ms, from the runbook's config table."""
    configs = kb.reference.get("configs")
    row = next((c for c in configs.configs if c.key == MAX_TIMEOUT_KEY), None) if isinstance(configs, Configs) else None
    if row is None or not row.default.isdigit():
        raise Unavailable(f"The runbook's config table has no default for {MAX_TIMEOUT_KEY}; pass --min-age-ms.")
    return int(row.default)


def default_min_age(
    broker_cfgs: dict[int, dict[str, ConfigValue]] | None, kafka_default_ms: int, unread: str = ""
) -> tuple[int, str]:
    """Pure: the default --min-age-ms and why, from the brokers' describe_configs results (None when
    they could not be read; ``unread`` says why). Brokers that disagree: the largest value, since a
    coordinator on that broker accepts transactions that long."""
    values: dict[int, int] = {}
    for broker, cfg in (broker_cfgs or {}).items():
        raw = config_value(cfg, MAX_TIMEOUT_KEY)
        if raw is not None and raw.strip().isdigit():
            values[broker] = int(raw.strip())
    if not values:
        reason = f"could not be read: {unread}" if unread else "was not reported"
        return kafka_default_ms, (
            f"Kafka's default {MAX_TIMEOUT_KEY}, {kafka_default_ms:,} ms: the brokers' value {reason}"
        )
    cap = max(values.values())
    if len(set(values.values())) > 1:
        spread = ", ".join(f"{b}: {v:,}" for b, v in sorted(values.items()))
        source = f"the largest of the brokers' {MAX_TIMEOUT_KEY} ({spread} ms)"
    else:
        source = f"the brokers' {MAX_TIMEOUT_KEY}, {cap:,} ms"
    return cap, f"{source}: no transaction may run longer, so its coordinator should have aborted one idle that long"


async def _default_min_age(gw: AdminGateway, kb: KnowledgeBase) -> tuple[int, str]:
    """The default --min-age-ms read from the cluster (DescribeConfigs on every broker)."""
    fallback = kafka_default_max_timeout_ms(kb)
    try:
        cfgs = await gw.broker_configs()
    except GatewayError as exc:  # not allowed, timed out, a broker down: Kafka's default stands in
        return default_min_age(None, fallback, " ".join(str(exc).split())[:160])
    return default_min_age(cfgs, fallback)


async def _flagged(gw: AdminGateway, min_age_ms: int) -> set[int] | None:
    try:
        return {h.producer_id for h in await gw.find_hanging_transactions(min_age_ms=min_age_ms)}
    except GatewayError:
        return None  # the idle-time check still stands on its own


async def _topic(gw: AdminGateway, name: str) -> TopicInfo | None:
    try:
        return (await gw.describe_topics([name]))[0]
    except UnknownTopic:
        return None


async def plan(request: CommandRequest, ctx: Context) -> ActionPlan:
    gw = await gateway(ctx, request.cluster)
    topic, partition = str(request.args["topic"]), int(request.args["partition"])
    where = f"{topic}-{partition}"
    asked = request.option_int("min-age-ms")
    if asked is not None and asked < 0:
        raise BadInput("--min-age-ms cannot be negative.")
    info = await _topic(gw, topic)
    if info is None or all(p.partition != partition for p in info.partitions):
        raise BadInput(
            f"{where} does not exist" + (f" ({topic} has {len(info.partitions)} partitions)." if info else "."),
            [f"describe {topic}"],
        )
    await ctx.progress(f"describing the producers on {where}")
    producers = await gw.describe_producers(topic, partition)
    open_txns = [p for p in producers if p.has_open_transaction]
    chosen = pick_producer(open_txns, request.option_int("producer-id"), topic, partition)
    if asked is None:
        await ctx.progress(f"reading the brokers' {MAX_TIMEOUT_KEY}")
        min_age, min_age_why = await _default_min_age(gw, ctx.kb)
    else:
        min_age, min_age_why = asked, "--min-age-ms as given"
    args = {
        "topic": topic,
        "partition": partition,
        "producer_id": chosen.producer_id,
        "producer_epoch": chosen.producer_epoch,
        "coordinator_epoch": chosen.coordinator_epoch,
        "start_offset": chosen.current_txn_start_offset,
        "min_age_ms": min_age,
        "min_age_why": min_age_why,
    }
    flagged = await _flagged(gw, min_age)
    before, after = lso_move(open_txns, chosen.producer_id)
    if after is None:
        move = f"LSO moves from {before:,} to the high watermark (no other transaction stays open)"
    elif after == before:
        move = f"LSO stays at {before:,}: another producer's transaction from that offset is still open"
    else:
        move = f"LSO moves from {before:,} to {after:,} (the next open transaction)"
    return ActionPlan(
        kind=SPEC.name,
        cluster=gw.name,
        args=args,
        summary=f"Abort producer {chosen.producer_id}'s open transaction on {where}.",
        changes=[
            f"write an ABORT marker for producer {chosen.producer_id} (epoch {chosen.producer_epoch}) on {where}; {move}",
            f"the transaction's records from offset {chosen.current_txn_start_offset:,} become invisible to read_committed consumers",
        ],
        validation="Kafka has no dry run for WriteTxnMarkers; the producer's state was read and is re-read right before the abort.",
        preconditions=preconditions(args, info, producers, ctx.clock() * 1000, flagged),
        high_risk=True,
    )


async def recheck(plan: ActionPlan, ctx: Context) -> list[Precondition]:
    gw = await gateway(ctx, plan.cluster)
    a = plan.args
    info = await _topic(gw, a["topic"])
    producers = await gw.describe_producers(a["topic"], a["partition"]) if info else []
    return preconditions(a, info, producers, ctx.clock() * 1000, await _flagged(gw, a["min_age_ms"]))


async def _state(
    gw: AdminGateway, topic: str, partition: int, producers: list[ProducerState] | None = None
) -> JsonObject:
    """The partition as the cluster reports it: its producers, and the last stable offset and high
    watermark read from the leader (not inferred from the producers: the evidence must show what
    read_committed consumers can really read now)."""
    if producers is None:
        producers = await gw.describe_producers(topic, partition)
    open_txns = [p for p in producers if p.has_open_transaction]
    try:
        offsets = (await gw.stable_offsets([(topic, partition)])).get((topic, partition))
    except GatewayError:
        offsets = None
    return {
        "producers": [asdict(p) for p in producers],
        "lso": offsets.last_stable if offsets else None,
        "high_watermark": offsets.high_watermark if offsets else None,
        "lso_lag": offsets.lso_lag if offsets else None,
        "open_transactions": len(open_txns),
    }


def _still_open(producers: list[ProducerState], args: JsonObject) -> bool:
    return any(
        p.producer_id == args["producer_id"] and p.current_txn_start_offset == args["start_offset"] for p in producers
    )


async def execute(plan: ActionPlan, ctx: Context) -> ActionResult:
    gw = await gateway(ctx, plan.cluster)
    a = plan.args
    before = await _state(gw, a["topic"], a["partition"])
    try:
        # WriteTxnMarkers as the operator (ALTER on CLUSTER, KIP-664); every read stays the observer's
        await (await operator_gateway(ctx, plan.cluster)).abort_transaction(
            a["topic"], a["partition"], a["producer_id"], a["producer_epoch"], a["coordinator_epoch"]
        )
    except Timeout:
        raise  # sent but not answered: the gate reads the cluster back (reconcile)
    except GatewayError as exc:
        return ActionResult(False, f"The abort failed: {exc}", before, {})
    producers = await gw.describe_producers(a["topic"], a["partition"])
    deadline = asyncio.get_running_loop().time() + AFTER_WAIT_S
    while _still_open(producers, a) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.5)
        producers = await gw.describe_producers(a["topic"], a["partition"])
    after = await _state(gw, a["topic"], a["partition"], producers)
    if _still_open(producers, a):
        return ActionResult(
            False,
            f"The abort was accepted but producer {a['producer_id']}'s transaction still shows open on "
            f"{a['topic']}-{a['partition']}.",
            before,
            after,
        )
    if after["lso"] is None:
        lso = "not readable right after the abort"
    elif after["lso_lag"] == 0:
        lso = f"{after['lso']:,}, equal to the high watermark: read_committed consumers can read everything"
    else:
        lso = f"{after['lso']:,}, {after['lso_lag']:,} records behind the high watermark {after['high_watermark']:,} (another open transaction)"
    was = f"{before['lso']:,}" if before["lso"] is not None else "?"
    return ActionResult(
        True,
        f"Aborted producer {a['producer_id']}'s transaction on {a['topic']}-{a['partition']}; "
        f"LSO was {was} and is now {lso}.",
        before,
        after,
    )


async def reconcile(plan: ActionPlan, ctx: Context) -> Reconciled:
    try:
        gw = await gateway(ctx, plan.cluster)
        producers = await gw.describe_producers(plan.args["topic"], plan.args["partition"])
    except Exception:  # cannot tell; the gate must not guess
        return "unknown"
    return "not_done" if _still_open(producers, plan.args) else "done"


ACTION = ActionSpec(
    plan,
    recheck,
    execute,
    reconcile,
    principal="operator",
    second_approver="always: aborting a live transaction fails its producer",
)
COMMAND = Command(SPEC, action=ACTION)
