"""The actions, triage and digest against a real local Kafka cluster (this folder's own, see
conftest.py). Actions are driven through their ActionSpec the way the gate drives them:
plan -> (stored as JSON) -> recheck -> execute -> reconcile. Tests that kill brokers come last."""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest
from waiting import wait_until

from commands import abort_txn, elect_leaders, retention, throttle, triage
from commands.registry import ROUTER
from commands.registry import answer as dispatch
from framework.actions import ActionPlan
from framework.errors import NothingToDo
from localkafka.testing import produce_one, read_committed

pytestmark = pytest.mark.kafka


def _name(prefix: str) -> str:
    return f"act-{prefix}-{uuid.uuid4().hex[:6]}"


def stored(plan: ActionPlan) -> ActionPlan:
    """What the gate does between preview and confirmation: keep the plan as JSON."""
    return ActionPlan.from_dict(json.loads(json.dumps(plan.to_dict())))


# ---- abort-txn --------------------------------------------------------------------------------


async def test_abort_txn_lets_read_committed_consumers_past_the_hung_transaction(ctx, healed):
    bs = healed.bootstrap_servers
    topic = _name("txn")
    txn = healed.faults.hanging_transaction(topic, 0, records=5)
    produce_one(bs, topic, 0, "after-the-hang")
    # Before: read_committed is stuck at the LSO, the first offset of the open transaction.
    assert read_committed(bs, topic, 0, seconds=4) == []

    # The default threshold (timeout cap + 5 min) says this young transaction is not hanging yet.
    young = await abort_txn.ACTION.plan(ROUTER.parse(f"abort-txn {topic} 0"), ctx)
    assert not young.ready and not {p.name: p for p in young.preconditions}["old enough to be hanging"].ok

    plan = stored(await abort_txn.ACTION.plan(ROUTER.parse(f"abort-txn {topic} 0 --min-age-ms 0"), ctx))
    assert plan.ready and plan.high_risk, plan.preconditions
    assert plan.args["start_offset"] == txn["first_offset"]
    assert f"LSO moves from {txn['first_offset']:,} to the high watermark" in plan.changes[0]
    assert all(p.ok for p in await abort_txn.ACTION.recheck(plan, ctx))
    assert await abort_txn.ACTION.reconcile(plan, ctx) == "not_done"

    result = await abort_txn.ACTION.execute(plan, ctx)
    assert result.ok, result.detail
    assert result.before["lso"] == txn["first_offset"] and result.before["open_transactions"] == 1
    assert result.after["open_transactions"] == 0
    assert result.after["lso"] == result.after["high_watermark"] and result.after["lso_lag"] == 0
    assert await abort_txn.ACTION.reconcile(plan, ctx) == "done"
    # The same plan confirmed twice must not abort anything else: the re-check now fails.
    assert not all(p.ok for p in await abort_txn.ACTION.recheck(plan, ctx))

    # After: the committed record behind the aborted transaction is readable; the aborted ones are not.
    values = read_committed(bs, topic, 0, 20, want="after-the-hang")
    assert values == ["after-the-hang"]


# ---- throttle ------------------------------------------------------------------------------------


async def test_throttle_set_then_clear_round_trips_the_broker_configs(ctx, actions_cluster):
    brokers = [str(b) for b in actions_cluster.brokers]
    plan = stored(await throttle.SET_ACTION.plan(ROUTER.parse("throttle set 10MiB/s"), ctx))
    assert plan.ready, plan.preconditions
    assert plan.validation == "IncrementalAlterConfigs validate_only: accepted"
    assert sorted(plan.args["target_brokers"]) == brokers
    assert any("No reassignment is in progress" in c for c in plan.changes)
    assert all(p.ok for p in await throttle.SET_ACTION.recheck(plan, ctx))

    result = await throttle.SET_ACTION.execute(plan, ctx)
    assert result.ok, result.detail
    for b in brokers:
        assert result.before["brokers"][b] == {k: None for k in throttle.RATE_KEYS}
        assert result.after["brokers"][b] == {k: "10485760" for k in throttle.RATE_KEYS}
    assert await throttle.SET_ACTION.reconcile(plan, ctx) == "done"
    gw = await ctx.live.get()
    cfg = await gw.broker_configs([101])
    assert cfg[101]["leader.replication.throttled.rate"].value == "10485760"

    clear = stored(await throttle.CLEAR_ACTION.plan(ROUTER.parse("throttle clear"), ctx))
    assert clear.ready and sorted(clear.args["target_brokers"]) == brokers
    assert await throttle.CLEAR_ACTION.reconcile(clear, ctx) == "not_done"
    result = await throttle.CLEAR_ACTION.execute(clear, ctx)
    assert result.ok, result.detail
    assert all(result.after["brokers"][b] == {k: None for k in throttle.RATE_KEYS} for b in brokers)
    assert await throttle.CLEAR_ACTION.reconcile(clear, ctx) == "done"
    with pytest.raises(NothingToDo, match="nothing to clear"):  # nothing left
        await throttle.CLEAR_ACTION.plan(ROUTER.parse("throttle clear"), ctx)


# ---- retention -------------------------------------------------------------------------------------


async def test_retention_dry_run_execute_reconcile(ctx, actions_cluster):
    topic = _name("ret")
    actions_cluster.faults.create_topic(topic, partitions=1, replication_factor=3)
    gw = await ctx.live.get()
    # This cluster's brokers set log.retention.hours=24, so a new topic starts at 1 day.
    assert (await gw.topic_configs([topic]))[topic]["retention.ms"].value == "86400000"
    lower = stored(await retention.ACTION.plan(ROUTER.parse(f"retention {topic} 12h"), ctx))
    assert lower.ready and lower.high_risk
    assert lower.validation == "IncrementalAlterConfigs validate_only: accepted by the broker"
    assert lower.changes[0] == f"{topic} retention.ms: 1 d (86,400,000 ms) -> 12 h (43,200,000 ms)"
    assert "eligible for deletion" in lower.changes[1]
    # validate_only changed nothing
    assert (await gw.topic_configs([topic]))[topic]["retention.ms"].value == "86400000"
    assert await retention.ACTION.reconcile(lower, ctx) == "not_done"
    assert all(p.ok for p in await retention.ACTION.recheck(lower, ctx))

    result = await retention.ACTION.execute(lower, ctx)
    assert result.ok and result.before == {"retention.ms": 86_400_000} and result.after == {"retention.ms": 43_200_000}
    assert await retention.ACTION.reconcile(lower, ctx) == "done"
    assert (await gw.topic_configs([topic]))[topic]["retention.ms"].value == "43200000"

    # "forever" deletes nothing but lets the log grow without bound: said, and a second approver's call
    forever = await retention.ACTION.plan(ROUTER.parse(f"retention {topic} -1"), ctx)
    assert forever.ready and forever.high_risk
    assert forever.changes[0] == f"{topic} retention.ms: 12 h (43,200,000 ms) -> forever (-1)"
    assert forever.changes[1].startswith(f"WARNING: unbounded disk growth: no record of {topic} is deleted by age")
    assert "disk use grows without bound" in forever.summary


# ---- elect-leaders (restarts a broker) ---------------------------------------------------------------


async def test_elect_leaders_after_a_broker_restart(ctx, healed):
    topic = _name("elect")
    healed.faults.create_topic(topic, replica_assignment=[[101, 102, 103], [102, 103, 101], [103, 101, 102]])
    healed.faults.restart_broker(101)  # controlled shutdown moves partition 0's leadership away
    wait_until(
        lambda: (lambda p: 101 in p["isr"] and p["leader"] != 101)(healed.faults.describe([topic])[topic][0]),
        60,
        "broker 101 back in partition 0's ISR, not leading it",
        interval=0.5,
        ignore=(Exception,),
    )

    plan = stored(await elect_leaders.ACTION.plan(ROUTER.parse(f"elect-leaders {topic}"), ctx))
    assert plan.ready and plan.args["partitions"] == [[0, 101]]
    assert plan.changes[0].startswith(f"{topic}-0: leader ") and plan.changes[0].endswith("-> 101 (preferred)")
    explicit = await elect_leaders.ACTION.plan(ROUTER.parse(f"elect-leaders {topic} 0-2"), ctx)
    assert explicit.changes[-1] == f"already led by the preferred replica: {topic}-1, {topic}-2"
    assert all(p.ok for p in await elect_leaders.ACTION.recheck(plan, ctx))
    assert await elect_leaders.ACTION.reconcile(plan, ctx) == "not_done"

    result = await elect_leaders.ACTION.execute(plan, ctx)
    assert result.ok, result.detail
    assert result.before["leaders"]["0"] != 101 and result.after["leaders"] == {"0": 101}
    assert result.after["outcomes"] == {"0": "elected"}
    assert await elect_leaders.ACTION.reconcile(plan, ctx) == "done"
    assert healed.faults.describe([topic])[topic][0]["leader"] == 101


# ---- digest and triage (kill a broker) ------------------------------------------------------------------


async def test_digest_healthy_then_degraded(ctx, healed):
    topic = _name("dig")
    group = _name("grp")
    lagging = healed.faults.lagging_consumer_group(group, topic, initial=30, rate=5)
    try:
        wait_until(
            lambda: sum(lagging.lag().values()) > 0, 30, "the group to fall behind", interval=0.5, ignore=(Exception,)
        )
        healthy = (await dispatch(f"digest --groups {group}", ctx)).reply
    finally:
        lagging.stop()
    sections = {s.heading: s.lines for s in healthy.sections}
    assert sections["Status"][0] == "Brokers registered: 3 of 3"
    # "At min ISR" is left out: on the shared cluster other tests' RF=1 topics are at min ISR for good.
    status = sections["Status"]
    assert "Under-replicated: 0" in status and "Under min ISR: 0" in status and "Offline: 0" in status
    assert sections["Hanging transactions"] == ["No open transaction holds any partition back."]
    assert (
        sections["Consumer lag (now)"][0].startswith(f"{group} (EMPTY): ")
        and "nobody is consuming" in sections["Consumer lag (now)"][0]
    )
    assert sections["Trends (metric lake)"] == ["No lake data: no metric lake is configured."]
    assert "Status" not in healthy.verdict

    healed.faults.kill_broker(102)
    wait_until(
        lambda: 102 not in healed.registered_brokers(), 60, "broker 102 to be fenced", interval=0.5, ignore=(Exception,)
    )
    wait_until(lambda: healed.faults.under_replicated(), 60, "ISRs to shrink", interval=0.5, ignore=(Exception,))
    degraded = (await dispatch("digest", ctx)).reply
    sections = {s.heading: s.lines for s in degraded.sections}
    assert sections["Status"][0] == "Brokers registered: 2 of 3 (missing: 102)"
    assert not sections["Status"][2].startswith("Under-replicated: 0")
    assert degraded.severity in ("warning", "critical") and "Status" in degraded.verdict
    lag_lines = sections["Consumer lag (now)"]
    assert lag_lines and not any("No groups named" in line for line in lag_lines)
    assert any(a.command == "triage URP" for a in degraded.actions)


async def test_triage_on_a_killed_broker_ends_at_broker_loss(ctx, healed, tmp_path):
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore

    # The terminal's context: a confirmation gate, whose sqlite file keeps the triage thread too.
    gate = ConfirmationGate(
        PendingStore(tmp_path / "pending.sqlite3"), AuditLog(tmp_path / "audit.jsonl"), router=ROUTER
    )
    ctx = dataclasses.replace(ctx, gate=gate)
    topic = _name("tri")
    healed.faults.create_topic(topic, partitions=3, replication_factor=3)
    healed.faults.kill_broker(103)
    wait_until(
        lambda: 103 not in healed.registered_brokers(), 60, "broker 103 to be fenced", interval=0.5, ignore=(Exception,)
    )
    wait_until(
        lambda: all(103 not in p["isr"] for p in healed.faults.describe([topic])[topic]),
        60,
        "ISRs to lose 103",
        interval=0.5,
        ignore=(Exception,),
    )

    state = await triage.start("URP", ctx)
    first = state.records[0]
    assert first.entry == "broker-loss" and first.source == "live: describe_cluster"
    assert first.answer.startswith("broker 103 not registered")
    assert state.question is not None and state.question.kind == "maintenance"

    # The same walk through the terminal commands, with the thread kept in the state database between answers.
    started = await dispatch("triage URP", ctx)
    assert started.outcome == "answered"
    button = next(a for a in started.reply.actions if a.label == "No")
    done = await dispatch(button.command, ctx)
    assert done.outcome == "answered", done.reply.verdict
    reply = done.reply
    assert reply.verdict.startswith("Broker loss (broker 103): broker 103 not registered")
    assert reply.diagnoses[0].entry_id == "broker-loss"
    assert any(a.mutating and a.command.startswith("elect-leaders ") for a in reply.actions)
