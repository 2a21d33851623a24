"""The triage state machine and the digest on an in-memory gateway: the walk, questions, state
persistence, and that a failing source stays inside its own digest section."""

import dataclasses
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from action_fakes import FakeGateway, FakePool, producer

from commands import digest, triage
from commands.registry import ROUTER
from commands.registry import answer as dispatch
from framework.context import Context
from framework.router import BadInput
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore
from kbot_settings import load as load_settings
from live.model import HangingTransaction

HEALTHY = {"orders": [(101, [101, 102, 103], [101, 102, 103]), (102, [102, 103, 101], [102, 103, 101])]}
# Broker 103 is gone: it is in no ISR, and partition 2 lost its preferred leader.
BROKER_LOST = {
    "orders": [
        (101, [101, 102, 103], [101, 102]),
        (102, [102, 103, 101], [102, 101]),
        (101, [103, 101, 102], [101, 102]),
    ]
}
# Every broker is up, but broker 102's replicas are out of ISR.
SLOW_102 = {
    "orders": [
        (101, [101, 102, 103], [101, 103]),
        (103, [103, 102, 101], [103, 101]),
        (101, [101, 103, 102], [101, 103]),
    ]
}


def ctx_for(gw) -> Context:
    return Context(live=FakePool(gw) if gw is not None else None)


def gated(ctx: Context, state_dir: Path) -> Context:
    """The context with a real confirmation gate on ``state_dir``, as the terminal and Slack have."""
    gate = ConfirmationGate(
        PendingStore(state_dir / "pending.sqlite3"), AuditLog(state_dir / "audit.jsonl"), router=ROUTER
    )
    return dataclasses.replace(ctx, gate=gate)


def thread_keys(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [r[0] for r in conn.execute("SELECT thread_key FROM triage_threads ORDER BY thread_key")]


def roundtrip(state: triage.TriageState) -> triage.TriageState:
    return triage.TriageState.from_dict(json.loads(json.dumps(state.to_dict())))


async def test_broker_loss_is_answered_from_live_data():
    ctx = ctx_for(FakeGateway(brokers=(101, 102), topics=BROKER_LOST))
    state = await triage.start("URP", ctx)
    first = state.records[0]
    assert first.entry == "broker-loss" and first.source == "live: describe_cluster" and first.status == "bad"
    assert first.answer.startswith("broker 103 not registered")
    assert first.text == ctx.kb.failure_modes["broker-loss"].triage[0]  # the runbook's own step
    assert state.records[1].source.startswith("implied: broker 103 is gone")  # level URP, no lake needed
    assert state.question.kind == "maintenance" and "broker 103" in state.question.text
    reply = triage.to_reply(state)
    assert [a.command for a in reply.actions] == [
        f"triage answer {state.token} q1 {c}" for c in ("yes", "no", "unknown")
    ]
    state = await triage.answer(roundtrip(state), "q1", "no", ctx)
    assert state.done and state.conclusion["entry"] == "broker-loss"
    reply = triage.to_reply(state)
    assert reply.verdict.startswith("Broker loss (broker 103): broker 103 not registered")
    assert reply.diagnoses[0].entry_id == "broker-loss"
    # the walk ends on the engineer's answers: moving the replicas away waits for the confirming evidence
    steps = reply.diagnoses[0].mitigation
    assert steps and not any(s.confirmed_only or "kafka-reassign-partitions" in (s.command or "") for s in steps)
    assert any(n.startswith("Not advised on a triage walk: If the broker will not come back") for n in reply.notes)
    mutating = [a for a in reply.actions if a.mutating]
    assert [a.command for a in mutating] == ["elect-leaders orders", "throttle set 50MB/s"]
    assert mutating[0].label.startswith("After broker 103 is back")


async def test_slow_follower_asks_about_gc_on_the_suspect_broker():
    ctx = ctx_for(FakeGateway(topics=SLOW_102))
    state = await triage.start("URP", ctx)
    assert state.ruled_out == ["broker-loss"] and state.entry == "slow-follower"
    concentration = next(r for r in state.records if r.source == "live: metadata")
    assert concentration.answer == "3 of 3 out-of-sync replicas are on broker 102"
    assert state.question.kind == "gc"
    assert state.question.text == "Did the GC log of broker 102 show long pauses lined up with the ISR shrinks?"
    state = await triage.answer(state, state.question.id, "yes", ctx)
    assert state.entry == "gc-pauses"  # the runbook step says: then follow gc-pauses


async def test_no_cluster_means_every_step_is_a_question():
    ctx = ctx_for(None)
    state = await triage.start("URP", ctx)
    step = ctx.kb.failure_modes["broker-loss"].triage[0]
    assert state.question.text == f"{step} What did you find?" and state.question.choices == [
        "confirms",
        "rules-out",
        "skip",
    ]
    state = await triage.answer(state, "q1", "rules-out", ctx)
    assert state.ruled_out == ["broker-loss"] and state.entry == "slow-follower"
    with pytest.raises(BadInput, match="already answered"):
        await triage.answer(state, "q1", "yes", ctx)
    with pytest.raises(BadInput, match="not an answer"):
        await triage.answer(state, state.question.id, "maybe", ctx)


async def test_without_a_cluster_the_urp_shape_is_asked_as_a_question():
    """The step the runbook binds to the urp_shape probe: no lake and no missing broker to tell the
    shape, so the human is asked exactly that, and the answer picks the entry."""
    ctx = ctx_for(None)
    state = await triage.start("URP", ctx)
    state = await triage.answer(state, "q1", "confirms", ctx)  # broker-loss step 0: it points here
    assert state.question.kind == "urp-shape" and state.question.choices == ["level", "moving", "unknown"]
    state = await triage.answer(state, state.question.id, "moving", ctx)
    assert state.entry == "slow-follower" and state.records[-1].answer.endswith(": Moving up and down")


async def test_healthy_cluster_rules_out_what_the_data_can():
    ctx = ctx_for(FakeGateway(topics=HEALTHY))
    state = await triage.start("URP", ctx)
    assert state.ruled_out[:3] == ["broker-loss", "slow-follower", "network-partition"]
    assert state.question is not None  # gc-pauses: only a GC log can tell


async def test_hanging_transaction_triage_suggests_the_exact_abort():
    gw = FakeGateway(topics=HEALTHY, producers={("orders", 1): [producer(4001, 120)]})
    gw.hanging = [HangingTransaction("pay-tx", 4001, 0, "Ongoing", 90_000, 101, [("orders", 1)])]
    ctx = ctx_for(gw)
    state = await triage.start("hanging transaction", ctx)
    assert state.records[0].answer.startswith(
        "1 open transaction(s) hold a partition's last stable offset back, "
        "e.g. producer 4001 on orders-1 (pay-tx), open 90 s, LSO 880 records behind"
    )
    while state.question is not None:  # the steps only people can check (client symptoms, broker metrics)
        state = await triage.answer(state, state.question.id, state.question.choices[-1], ctx)
    assert state.conclusion["entry"] == "hanging-transaction"
    mutating = [a for a in triage.to_reply(state).actions if a.mutating]
    assert [a.command for a in mutating] == ["abort-txn orders 1 --producer-id 4001"]


async def test_unknown_symptom():
    with pytest.raises(BadInput, match="nothing for"):
        await triage.start("purple elephants", ctx_for(None))


async def test_terminal_commands_keep_state_in_the_gates_database(tmp_path):
    """`triage URP` then `triage answer ...` as two commands: the thread is a row of the gate's
    sqlite file (0600 in a 0700 folder), and a token is only ever a key."""
    ctx = gated(ctx_for(FakeGateway(brokers=(101, 102), topics=BROKER_LOST)), tmp_path / "state")
    first = await dispatch("triage URP", ctx)
    assert first.outcome == "answered", first.reply.verdict
    token = first.reply.actions[0].command.split()[2]
    db = tmp_path / "state" / "pending.sqlite3"
    assert thread_keys(db) == [token]
    assert db.stat().st_mode & 0o777 == 0o600 and db.parent.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "state" / "triage").exists()  # no JSON files any more
    second = await dispatch(f"triage answer {token} q1 yes", ctx)
    assert second.outcome == "answered" and "Planned maintenance" in second.reply.verdict
    bad = await dispatch("triage answer ../../etc q1 yes", ctx)
    assert bad.outcome == "bad_input"
    gone = await dispatch("triage answer 0123456789ab q1 yes", ctx)
    assert gone.outcome == "bad_input" and "No triage" in gone.reply.verdict


async def test_triage_without_symptom_picks_what_the_cluster_shows():
    result = await dispatch("triage", ctx_for(FakeGateway(brokers=(101, 102), topics=BROKER_LOST)))
    assert result.reply.title == "Triage: URP"
    healthy = await dispatch("triage", ctx_for(FakeGateway(topics=HEALTHY)))
    assert healthy.reply.severity == "ok"


# ---- digest ------------------------------------------------------------------------------------


def test_lag_verdicts_and_groups():
    assert digest.lag_verdict("STABLE", 0, 0) == ("caught up", "ok")
    assert digest.lag_verdict("EMPTY", 12, 1)[0] == "12 behind with no members: nobody is consuming"
    assert digest.wanted_groups(None, load_settings({"KBOT_DIGEST_GROUPS": "a, b,a"})) == ["a", "b"]
    assert digest.wanted_groups("x", load_settings({"KBOT_DIGEST_GROUPS": "a"})) == ["x"]
    with pytest.raises(BadInput):
        digest.wanted_groups("bad group!", load_settings({}))


async def test_digest_healthy():
    result = await dispatch("digest --groups pay", ctx_for(FakeGateway(topics=HEALTHY)))
    reply = result.reply
    sections = {s.heading: s.lines for s in reply.sections}
    assert sections["Status"][0] == "Brokers registered: 3 of 3"
    assert sections["Status"][1] == "2 partitions in 1 topic"
    assert sections["Audit"] == ["The 1 topic meets the durability rules."]
    assert sections["Hanging transactions"] == ["No open transaction holds any partition back."]
    assert sections["Consumer lag (now)"] == ["pay (STABLE): 10 behind on 1 partition(s)"]
    assert sections["Trends (metric lake)"] == ["No lake data: no metric lake is configured."]


async def test_digest_reads_metadata_and_topic_configs_once():
    gw = FakeGateway(brokers=(101, 102), topics=BROKER_LOST)
    reads = []
    for name in ("describe_topics", "topic_configs"):
        real = getattr(gw, name)

        async def counted(*a, _real=real, _name=name, **k):
            reads.append(_name)
            return await _real(*a, **k)

        setattr(gw, name, counted)
    reply = (await dispatch("digest", ctx_for(gw))).reply
    sections = {s.heading: s.lines for s in reply.sections}
    assert "missing: 103" in sections["Status"][0] and sections["Audit"]
    assert sorted(reads) == ["describe_topics", "topic_configs"]


class BrokenLake:
    """A lake whose every question fails, in Spark (LakeService.query) and in process (ask_window)."""

    async def query(self, *args, **kwargs):
        raise RuntimeError("lake is on fire")

    ask_window = newest_sample = query


async def test_each_digest_section_fails_on_its_own():
    gw = FakeGateway(brokers=(101, 102), topics=BROKER_LOST, fail={"stable_offsets", "consumer_group_lag"})
    ctx = Context(live=FakePool(gw), lake=BrokenLake())
    reply = (await dispatch("digest --groups pay", ctx)).reply
    sections = {s.heading: s.lines for s in reply.sections}
    assert "missing: 103" in sections["Status"][0]
    assert sections["Hanging transactions"][0].startswith("Could not read: GatewayError: stable_offsets failed")
    assert sections["Consumer lag (now)"][0].startswith("pay: could not read")
    assert sections["Trends (metric lake)"] == ["Could not read: RuntimeError: lake is on fire"]
    assert "Could not read: Hanging transactions, Trends (metric lake)" in reply.verdict
    assert reply.severity == "warning"
