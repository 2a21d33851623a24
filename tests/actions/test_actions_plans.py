"""Plans and preconditions of the mutating commands, on an in-memory gateway (no Kafka)."""

import dataclasses
import json

import pytest
from action_fakes import FakeGateway, FakePool, cv, producer

from bot.render import render_text
from commands import abort_txn, elect_leaders, retention, throttle
from commands.registry import ROUTER, answer
from framework.actions import ActionPlan
from framework.context import Context
from framework.errors import NothingToDo
from framework.router import BadInput
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore
from live.model import PartitionInfo, Reassignment, TopicInfo
from runbook_kb import default_kb

NOW_S = 10_000.0


def ctx_for(gw) -> Context:
    return Context(live=FakePool(gw), clock=lambda: NOW_S)


def roundtrip(plan: ActionPlan) -> ActionPlan:
    """What the gate does: store the plan as JSON and read it back before executing."""
    return ActionPlan.from_dict(json.loads(json.dumps(plan.to_dict())))


# ---- abort-txn ---------------------------------------------------------------------------------


def test_pick_producer_rules():
    a, b = producer(1, 10), producer(2, 40)
    assert abort_txn.pick_producer([a], None, "t", 0) is a
    assert abort_txn.pick_producer([a, b], 2, "t", 0) is b
    with pytest.raises(BadInput, match="2 transactions are open on t-0: producer 1 .* producer 2") as err:
        abort_txn.pick_producer([a, b], None, "t", 0)
    assert err.value.suggestions[0] == "abort-txn t 0 --producer-id 1"
    with pytest.raises(NothingToDo, match="No transaction is open"):
        abort_txn.pick_producer([], None, "t", 0)
    with pytest.raises(BadInput, match="Producer 9 holds no open transaction"):
        abort_txn.pick_producer([a], 9, "t", 0)


def test_lso_move():
    assert abort_txn.lso_move([producer(1, 10)], 1) == (10, None)
    assert abort_txn.lso_move([producer(1, 10), producer(2, 40)], 1) == (10, 40)
    assert abort_txn.lso_move([producer(1, 10), producer(2, 5)], 1) == (5, 5)  # the other one pins it


ARGS = {
    "topic": "t",
    "partition": 0,
    "producer_id": 1,
    "producer_epoch": 0,
    "coordinator_epoch": 3,
    "start_offset": 10,
    "min_age_ms": 60_000,
}
TOPIC = TopicInfo("t", [PartitionInfo("t", 0, 101, [101, 102], [101, 102])])


def test_abort_preconditions_hold_for_an_old_open_transaction():
    pre = abort_txn.preconditions(ARGS, TOPIC, [producer(1, 10, last_ts=1_000)], now_ms=100_000, flagged=set())
    assert [p.ok for p in pre] == [True, True, True]
    assert "last write 99 s ago; threshold 60 s" in pre[2].detail


@pytest.mark.parametrize(
    "producers,name,says",
    [
        ([producer(1, 10, epoch=1)], "same open transaction", "now has epoch 1"),  # the producer moved on
        ([producer(1, 55)], "same open transaction", "transaction from offset 55"),  # a new transaction
        ([producer(1, -1)], "same open transaction", "ended on its own"),
        ([], "same open transaction", "ended on its own"),
        ([producer(1, 10, last_ts=90_000)], "old enough to be hanging", "last write 10 s ago"),  # too fresh
    ],
)
def test_abort_preconditions_fail(producers, name, says):
    pre = {p.name: p for p in abort_txn.preconditions(ARGS, TOPIC, producers, now_ms=100_000, flagged=set())}
    assert not pre[name].ok and says in pre[name].detail


def test_abort_flagged_by_coordinator_counts_as_old_enough():
    pre = abort_txn.preconditions(ARGS, TOPIC, [producer(1, 10, last_ts=99_000)], now_ms=100_000, flagged={1})
    assert pre[2].ok and "listed as hanging" in pre[2].detail


def test_abort_partition_must_exist_and_have_a_leader():
    leaderless = TopicInfo("t", [PartitionInfo("t", 0, None, [101], [])])
    assert not abort_txn.preconditions(ARGS, leaderless, [], 0, None)[0].ok
    assert not abort_txn.preconditions(ARGS, None, [], 0, None)[0].ok


async def test_abort_plan_with_several_open_transactions_asks_which():
    gw = FakeGateway(
        topics={"t": [(101, [101, 102], [101, 102])]}, producers={("t", 0): [producer(7, 10), producer(8, 30)]}
    )
    with pytest.raises(BadInput, match="--producer-id"):
        await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0"), ctx_for(gw))
    plan = roundtrip(
        await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0 --producer-id 8 --min-age-ms 1000"), ctx_for(gw))
    )
    assert plan.high_risk and plan.kind == "abort-txn" and plan.ready
    assert plan.args["producer_id"] == 8 and plan.args["start_offset"] == 30
    assert "producer 8 (epoch 0) on t-0; LSO stays at 10" in plan.changes[0]
    with pytest.raises(BadInput, match="t-5 does not exist"):
        await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 5"), ctx_for(gw))


def test_default_min_age_is_the_brokers_transaction_max_timeout():
    assert abort_txn.kafka_default_max_timeout_ms(default_kb()) == 900_000  # from the runbook's config table
    same = {b: {"transaction.max.timeout.ms": cv("600000", "STATIC_BROKER_CONFIG")} for b in (101, 102)}
    ms, why = abort_txn.default_min_age(same, 900_000)
    assert ms == 600_000 and "the brokers' transaction.max.timeout.ms, 600,000 ms" in why
    assert "should have aborted" in why
    # brokers that disagree: the largest cap, since a coordinator there accepts transactions that long
    split = {101: {"transaction.max.timeout.ms": cv("600000")}, 102: {"transaction.max.timeout.ms": cv("1200000")}}
    ms, why = abort_txn.default_min_age(split, 900_000)
    assert ms == 1_200_000 and "largest" in why and "101: 600,000" in why
    # not readable, or not reported: Kafka's default, saying so
    ms, why = abort_txn.default_min_age(None, 900_000, "not authorized")
    assert ms == 900_000 and "Kafka's default transaction.max.timeout.ms, 900,000 ms" in why and "not authorized" in why
    ms, why = abort_txn.default_min_age({101: {}}, 900_000)
    assert ms == 900_000 and "was not reported" in why


def _hanging_gw(idle_ms: int, **kw) -> FakeGateway:
    """One open transaction on t-0 whose producer last wrote ``idle_ms`` before NOW_S."""
    last = int(NOW_S * 1000) - idle_ms
    return FakeGateway(
        topics={"t": [(101, [101, 102], [101, 102])]},
        producers={("t", 0): [producer(7, 10, last_ts=last)]},
        **kw,
    )


async def test_abort_plan_defaults_min_age_to_the_brokers_cap_and_says_why():
    # idle 1,000 s: past the default 900 s cap, short of the old fixed default (1,200 s)
    gw = _hanging_gw(1_000_000)
    plan = roundtrip(await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0"), ctx_for(gw)))
    assert plan.args["min_age_ms"] == 900_000 and plan.ready
    detail = {p.name: p.detail for p in plan.preconditions}["old enough to be hanging"]
    assert "threshold 900 s (Kafka's default transaction.max.timeout.ms, 900,000 ms" in detail
    # the brokers' own value, read with DescribeConfigs, wins over Kafka's default
    gw = _hanging_gw(400_000)
    for b in gw.brokers:
        gw.broker_cfg[b]["transaction.max.timeout.ms"] = cv("300000", "STATIC_BROKER_CONFIG")
    plan = roundtrip(await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0"), ctx_for(gw)))
    assert plan.args["min_age_ms"] == 300_000 and plan.ready
    detail = {p.name: p.detail for p in plan.preconditions}["old enough to be hanging"]
    assert "threshold 300 s (the brokers' transaction.max.timeout.ms, 300,000 ms" in detail
    # the re-check before the abort uses the same threshold and still says why
    recheck = {p.name: p for p in await abort_txn.ACTION.recheck(plan, ctx_for(gw))}
    assert recheck["old enough to be hanging"].ok and "300,000 ms" in recheck["old enough to be hanging"].detail
    # younger than the cap: refused, with the threshold named
    gw = _hanging_gw(200_000)
    for b in gw.brokers:
        gw.broker_cfg[b]["transaction.max.timeout.ms"] = cv("300000", "STATIC_BROKER_CONFIG")
    plan = await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0"), ctx_for(gw))
    assert not plan.ready


async def test_abort_plan_falls_back_to_kafkas_default_when_broker_configs_fail():
    gw = _hanging_gw(1_000_000, fail={"broker_configs"})
    plan = await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0"), ctx_for(gw))
    assert plan.args["min_age_ms"] == 900_000 and plan.ready
    detail = {p.name: p.detail for p in plan.preconditions}["old enough to be hanging"]
    assert "the brokers' value could not be read: broker_configs failed on purpose" in detail


async def test_abort_plan_min_age_given_is_used_as_given():
    gw = _hanging_gw(1_000_000, fail={"broker_configs"})  # not even read
    plan = await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0 --min-age-ms 5000"), ctx_for(gw))
    assert plan.args["min_age_ms"] == 5_000
    assert "(--min-age-ms as given)" in {p.name: p.detail for p in plan.preconditions}["old enough to be hanging"]
    with pytest.raises(BadInput, match="cannot be negative"):
        await abort_txn.ACTION.plan(ROUTER.parse("abort-txn t 0 --min-age-ms -1"), ctx_for(gw))


# ---- elect-leaders ---------------------------------------------------------------------------


def _topic(*parts):
    return TopicInfo(
        "o", [PartitionInfo("o", i, leader, list(r), list(isr)) for i, (leader, r, isr) in enumerate(parts)]
    )


def test_election_plan_sorts_partitions_into_eligible_skipped_already():
    topic = _topic(
        (102, [101, 102, 103], [101, 102, 103]),  # 0: eligible
        (101, [101, 102, 103], [101, 102, 103]),  # 1: already preferred
        (102, [103, 102, 101], [102, 101]),  # 2: preferred 103 out of ISR
        (101, [104, 101], [101]),
    )  # 3: preferred 104 not registered
    eligible, skipped, already = elect_leaders.election_plan(topic, {101, 102, 103}, None)
    assert eligible == [(0, 101, 102)]
    assert already == [1]
    assert skipped == [
        (2, "preferred replica 103 is not in the ISR [102, 101]"),
        (3, "preferred replica 104 is not a registered broker"),
    ]
    with pytest.raises(BadInput, match="no partition 9"):
        elect_leaders.election_plan(topic, {101}, [0, 9])


async def test_elect_plan_and_recheck():
    gw = FakeGateway(topics={"o": [(102, [101, 102, 103], [101, 102, 103]), (101, [101, 102, 103], [101, 102, 103])]})
    plan = roundtrip(await elect_leaders.ACTION.plan(ROUTER.parse("elect-leaders o"), ctx_for(gw)))
    assert plan.ready and plan.args["partitions"] == [[0, 101]]
    assert plan.changes == ["o-0: leader 102 -> 101 (preferred)"]
    # The preferred replica fell out of the ISR between preview and confirmation.
    gw.layout["o"][0] = (102, [101, 102, 103], [102, 103])
    [check] = await elect_leaders.ACTION.recheck(plan, ctx_for(gw))
    assert not check.ok and "not in the ISR" in check.detail


async def test_elect_with_every_leader_preferred_is_nothing_to_do():
    gw = FakeGateway(topics={"o": [(101, [101, 102], [101, 102])]})
    with pytest.raises(NothingToDo, match="already led by its preferred replica"):
        await elect_leaders.ACTION.plan(ROUTER.parse("elect-leaders o"), ctx_for(gw))
    with pytest.raises(BadInput, match="does not exist"):
        await elect_leaders.ACTION.plan(ROUTER.parse("elect-leaders nope"), ctx_for(gw))


async def test_elect_with_no_preferred_replica_in_isr_is_a_failed_precondition():
    gw = FakeGateway(topics={"o": [(102, [101, 102], [102])]})
    plan = await elect_leaders.ACTION.plan(ROUTER.parse("elect-leaders o"), ctx_for(gw))
    assert not plan.ready and "o-0" in plan.preconditions[0].detail


@pytest.mark.parametrize(
    "text,gw,needle",
    [
        ("elect-leaders o", FakeGateway(topics={"o": [(101, [101, 102], [101, 102])]}), "already led by its preferred"),
        ("throttle clear", FakeGateway(topics={"o": [(101, [101, 102], [101, 102])]}), "nothing to clear"),
    ],
)
async def test_a_change_already_in_place_is_an_ok_answer_with_nothing_to_confirm(tmp_path, text, gw, needle):
    """Not an [ERROR] preview with a Cancel button: the cluster is already as asked."""
    gate = ConfirmationGate(
        PendingStore(tmp_path / "pending.sqlite3"), AuditLog(tmp_path / "audit.jsonl"), router=ROUTER
    )
    result = await answer(text, dataclasses.replace(ctx_for(gw), gate=gate), user="U0ALICE")
    assert result.outcome == "answered" and result.reply.severity == "ok", result.reply.verdict
    assert needle in result.reply.verdict and not result.reply.actions
    assert "Token" not in render_text(result.reply)


# ---- throttle ----------------------------------------------------------------------------------


def test_replica_lists_throttle_exactly_the_moving_replicas():
    moves = [
        Reassignment("a", 0, [101, 102, 103], adding=[103], removing=[101]),
        Reassignment("a", 2, [102, 101], adding=[], removing=[]),
        Reassignment("b", 1, [101, 104], adding=[104], removing=[]),
    ]
    assert throttle.replica_lists(moves) == {
        "a": {
            "leader.replication.throttled.replicas": "0:101,0:102,2:102,2:101",
            "follower.replication.throttled.replicas": "0:103",
        },
        "b": {"leader.replication.throttled.replicas": "1:101", "follower.replication.throttled.replicas": "1:104"},
    }


async def test_throttle_set_dry_runs_then_executes_and_reconciles():
    gw = FakeGateway(
        brokers=(101, 102), reassignments=[Reassignment("orders", 0, [101, 102], adding=[102], removing=[])]
    )
    ctx = ctx_for(gw)
    plan = roundtrip(await throttle.SET_ACTION.plan(ROUTER.parse("throttle set 10MB/s"), ctx))
    assert plan.ready and plan.kind == "throttle set"
    assert all(c[-1] is True for c in gw.calls)  # planning only validates
    assert "broker 101 leader.replication.throttled.rate: (not set) -> 10000000" in plan.changes
    assert "topic orders follower.replication.throttled.replicas: (not set) -> 0:102" in plan.changes
    assert await throttle.SET_ACTION.reconcile(plan, ctx) == "not_done"
    result = await throttle.SET_ACTION.execute(plan, ctx)
    assert result.ok, result.detail
    assert result.before["brokers"]["101"]["leader.replication.throttled.rate"] is None
    assert result.after["brokers"]["102"]["follower.replication.throttled.rate"] == "10000000"
    assert await throttle.SET_ACTION.reconcile(plan, ctx) == "done"
    clear = roundtrip(await throttle.CLEAR_ACTION.plan(ROUTER.parse("throttle clear"), ctx))
    assert clear.ready and len(clear.changes) == 6  # 2 keys x 2 brokers + 2 topic keys
    assert (await throttle.CLEAR_ACTION.execute(clear, ctx)).ok
    assert await throttle.CLEAR_ACTION.reconcile(clear, ctx) == "done"
    with pytest.raises(NothingToDo, match="nothing to clear"):  # cleared: a second clear has nothing to do
        await throttle.CLEAR_ACTION.plan(ROUTER.parse("throttle clear"), ctx)


async def test_throttle_refused_by_dry_run_is_not_ready():
    gw = FakeGateway(fail={"alter_broker_config"})
    plan = await throttle.SET_ACTION.plan(ROUTER.parse("throttle set 1GB/s"), ctx_for(gw))
    assert not plan.ready and "failed on purpose" in plan.validation


async def test_throttle_recheck_notices_a_new_broker():
    gw = FakeGateway(brokers=(101, 102))
    plan = await throttle.SET_ACTION.plan(ROUTER.parse("throttle set 1GB/s"), ctx_for(gw))
    gw.brokers.append(103)
    gw.broker_cfg[103] = {}
    checks = {p.name: p for p in await throttle.SET_ACTION.recheck(plan, ctx_for(gw))}
    assert not checks["same brokers as previewed"].ok


# ---- retention ---------------------------------------------------------------------------------


async def test_retention_lowering_and_forever_are_high_risk_raising_is_not():
    gw = FakeGateway()
    ctx = ctx_for(gw)
    lower = roundtrip(await retention.ACTION.plan(ROUTER.parse("retention orders 1d"), ctx))
    assert lower.high_risk and lower.ready
    assert lower.changes[0] == "orders retention.ms: 7 d (604,800,000 ms) -> 1 d (86,400,000 ms)"
    assert "eligible for deletion" in lower.changes[1]
    assert gw.calls == [("topic", "orders", "retention.ms", "86400000", True)]
    # -1 keeps everything: the disk grows without bound (issue 37), so a second approver too
    forever = await retention.ACTION.plan(ROUTER.parse("retention orders -1"), ctx)
    assert forever.high_risk and forever.summary.startswith("Raise orders retention.ms to forever (-1).")
    assert "disk use grows without bound" in forever.summary
    longer = await retention.ACTION.plan(ROUTER.parse("retention orders 14d"), ctx)
    assert not longer.high_risk
    same = await retention.ACTION.plan(ROUTER.parse("retention orders 7d"), ctx)
    assert not same.ready


async def test_retention_execute_reconcile_and_recheck_after_a_concurrent_change():
    gw = FakeGateway()
    ctx = ctx_for(gw)
    plan = roundtrip(await retention.ACTION.plan(ROUTER.parse("retention orders 2d"), ctx))
    assert await retention.ACTION.reconcile(plan, ctx) == "not_done"
    gw.topic_cfg["orders"]["retention.ms"] = cv("3600000")  # someone else changed it meanwhile
    checks = {p.name: p for p in await retention.ACTION.recheck(plan, ctx)}
    assert not checks["unchanged since the preview"].ok
    assert await retention.ACTION.reconcile(plan, ctx) == "unknown"
    gw.topic_cfg["orders"]["retention.ms"] = cv("604800000")
    result = await retention.ACTION.execute(plan, ctx)
    assert (
        result.ok and result.before == {"retention.ms": 604_800_000} and result.after == {"retention.ms": 172_800_000}
    )
    assert await retention.ACTION.reconcile(plan, ctx) == "done"


async def test_retention_on_a_compacted_topic_says_nothing_is_deleted():
    gw = FakeGateway()
    gw.topic_cfg["orders"]["cleanup.policy"] = cv("compact")
    plan = await retention.ACTION.plan(ROUTER.parse("retention orders 1d"), ctx_for(gw))
    assert any("deletes nothing on this topic" in c for c in plan.changes)
