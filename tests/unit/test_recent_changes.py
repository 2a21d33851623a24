"""'Changed recently' (diagnosis/recent_changes.py): which recorded changes touch an answer, the
line that shows them, and the changes that name a cause. The real table and cluster are in
tests/lake/test_lake_changes.py; here a stand-in lake returns fixed events."""

from __future__ import annotations

import asyncio

from diagnosis.entries import diagnosis
from diagnosis.entry_ids import BROKER_LOSS, CLIENT_QUOTA_THROTTLING, HANDLER_SATURATION, LAG_BEYOND_RETENTION
from diagnosis.recent_changes import annotate, causes, changed_recently, touching
from framework.context import Context
from framework.reply import Evidence, Reply
from lake.changes import Change
from runbook_kb import default_kb

NOW = 1_800_000_000.0


def _change(minutes_ago: float, kind: str, resource: str, change: str, before=None, after=None) -> Change:
    return Change(int((NOW - minutes_ago * 60) * 1000), "c", kind, resource, change, before, after, 1)


class StandInLake:
    def __init__(self, events: list[Change] | Exception):
        self.events = events
        self.asked: list[tuple] = []

    async def changes(self, since_ms, kinds=(), name=None, cluster=None):
        self.asked.append((since_ms, cluster))
        if isinstance(self.events, Exception):
            raise self.events
        return [e for e in self.events if e.ts_ms >= since_ms]


MIN_ISR = _change(12, "config", "topic orders", "min.insync.replicas 2 -> 3", "2", "3")
OTHER = _change(5, "config", "topic audit", "retention.ms 604800000 -> 60000", "604800000", "60000")
RESTART = _change(30, "broker", "broker 102", "restarted", "epoch 4", "epoch 9")
LEADERS = _change(29, "leadership", "1,204 partitions", "leaders moved from 102 to 101/103", "102", "101/103")
QUOTA = _change(8, "quota", "client-id=slowapp", "quota producer_byte_rate set to 1024", None, "1024")


def _reply(verdict: str, *evidence: Evidence, severity="warning", diagnoses=()) -> Reply:
    return Reply(title="t", severity=severity, verdict=verdict, evidence=list(evidence), diagnoses=list(diagnoses))


def test_a_change_touches_the_answer_that_names_its_topic_broker_or_group():
    reply = _reply(
        "3 partition(s) of topic(s) orders (3) are under min ISR. Broker(s) 102, 103 are down.",
        Evidence("Under min ISR", "orders-0, orders-1, orders-2", "live"),
    )
    found = touching([MIN_ISR, OTHER, RESTART, LEADERS, QUOTA], reply)
    # audit is not named; the quota is not in play (no client-quota cause ranked)
    assert found == [MIN_ISR, RESTART, LEADERS]
    # a topic named only as a prefix of another name is not that topic
    assert touching([MIN_ISR], _reply("topic orders-eu is fine")) == []
    assert touching([MIN_ISR], _reply("topic orders.eu is fine")) == []
    assert touching([MIN_ISR], _reply("partition orders-7 lags")) == [MIN_ISR]
    assert touching([MIN_ISR], _reply("writes fail on orders.")) == [MIN_ISR]
    # broker ids are read from "broker N" phrases, never from any number in the text
    assert touching([RESTART], _reply("102 messages behind")) == []
    # the question's own words count (the group of `lag billing`)
    billing = _change(3, "group", "group billing", "2 member(s) left: a, b")
    assert touching([billing], _reply("lag is growing"), also=["billing"]) == [billing]


def test_a_quota_change_touches_an_answer_that_ranks_a_client_quota():
    kb = default_kb()
    quota_ranked = _reply(
        "p99 produce latency is high", diagnoses=[diagnosis(kb, kb.failure_modes[CLIENT_QUOTA_THROTTLING])]
    )
    assert touching([QUOTA], quota_ranked) == [QUOTA]
    assert touching([QUOTA], _reply("slowapp is throttled")) == [QUOTA]  # or that names the client


def test_the_line_is_newest_first_with_ages_and_counts_the_rest():
    line = changed_recently([RESTART, MIN_ISR, OTHER, LEADERS, QUOTA], NOW)
    assert line.label == "Changed recently" and line.source == "lake: change events"
    assert line.value.startswith(
        "5 min ago: topic audit retention.ms 604800000 -> 60000; 8 min ago: client-id=slowapp quota"
    ), line.value
    assert line.value.endswith("; and 1 more (`changes --since 1h`)"), line.value


def test_the_changes_that_name_a_cause():
    found = causes([MIN_ISR, OTHER, QUOTA, RESTART], NOW)
    assert [c.entry for c in found] == [LAG_BEYOND_RETENTION, CLIENT_QUOTA_THROTTLING, None]
    assert "min.insync.replicas of topic orders was raised 12 min ago" in found[2].sentence
    # lowering min ISR or raising retention or a quota is not a cause of these problems
    relaxed = [
        _change(1, "config", "topic orders", "min.insync.replicas 3 -> 2", "3", "2"),
        _change(1, "config", "topic audit", "retention.ms 60000 -> 604800000", "60000", "604800000"),
        _change(1, "quota", "client-id=slowapp", "quota producer_byte_rate 1024 -> 4096", "1024", "4096"),
        _change(1, "quota", "client-id=slowapp", "quota producer_byte_rate removed", "1024", None),
    ]
    assert causes(relaxed, NOW) == []


def _ctx(lake) -> Context:
    return Context(kb=default_kb(), lake=lake, clock=lambda: NOW)


def test_annotate_adds_the_line_and_lets_the_cause_lead_only_a_problem():
    kb = default_kb()
    retention = _change(12, "config", "topic orders", "retention.ms set to 60000", None, "60000")
    ctx = _ctx(StandInLake([retention, MIN_ISR, QUOTA, _change(90, "config", "topic orders", "retention.ms set to 1")]))
    problem = _reply(
        "Producers to orders fail with NotEnoughReplicas.",
        Evidence("Brokers registered", "2 of 3", "live"),
        diagnoses=[diagnosis(kb, kb.failure_modes[BROKER_LOSS])],
    )
    out = asyncio.run(annotate(ctx, problem, "c"))
    assert out.evidence[1].label == "Changed recently"
    assert "90 min" not in out.evidence[1].value  # outside the hour
    assert "min.insync.replicas of topic orders was raised 12 min ago (min.insync.replicas 2 -> 3)" in out.verdict
    assert out.diagnoses[0].entry_id == BROKER_LOSS  # min ISR raised has no entry of its own: ranking kept
    assert "Retention" not in out.verdict  # touches orders, but explains no write failure
    assert "retention.ms set to 60000" in out.evidence[1].value

    lagging = _reply("Group billing is 5,000 behind on orders and the lag grows.")
    out = asyncio.run(annotate(ctx, lagging, "c", also=["billing"]))
    assert "Retention of topic orders was lowered 12 min ago (retention.ms set to 60000)" in out.verdict
    assert "min.insync" not in out.verdict
    assert out.diagnoses[0].entry_id == LAG_BEYOND_RETENTION  # from the runbook: the answer had not ranked it

    healthy = _reply("orders is healthy.", severity="ok")
    out = asyncio.run(annotate(ctx, healthy, "c"))
    assert out.verdict == "orders is healthy." and out.severity == "ok"  # a setting, not an incident
    assert out.evidence[0].label == "Changed recently"  # still shown

    throttled = _reply(
        "Produce latency is high on every broker.",
        diagnoses=[diagnosis(kb, kb.failure_modes[e]) for e in (HANDLER_SATURATION, CLIENT_QUOTA_THROTTLING)],
    )
    out = asyncio.run(annotate(ctx, throttled, "c"))
    assert out.diagnoses[0].entry_id == CLIENT_QUOTA_THROTTLING
    assert out.diagnoses[0].why_ranked.startswith("changed recently: A client quota was set 8 min ago")
    assert [d.entry_id for d in out.diagnoses] == [CLIENT_QUOTA_THROTTLING, HANDLER_SATURATION]


def test_no_lake_no_line_and_a_failed_read_is_said():
    plain = _reply("Producers to orders fail.")
    assert asyncio.run(annotate(Context(kb=default_kb(), clock=lambda: NOW), plain, "c")).evidence == []
    out = asyncio.run(annotate(_ctx(StandInLake(OSError("table unreadable"))), _reply("orders fails."), "c"))
    assert out.evidence == [] and out.notes == ["Recent changes not read (table unreadable): `changes` retries."]


class StandInGate:
    def __init__(self, audit):
        self.audit = audit


def test_the_bots_own_confirmed_actions_are_changes_with_who_confirmed(tmp_path):
    from gate.audit import AuditLog

    audit = AuditLog(tmp_path / "audit.jsonl", clock=lambda: NOW - 600)
    fields = {"command": "retention orders 1h", "kind": "retention", "cluster": "c", "user": "U0ALICE"}
    audit.record("execution", state="executed", args={"topic": "orders"}, before="604800000", after="3600000", **fields)
    audit.record("execution", state="failed", args={"topic": "orders"}, **fields)  # not a change
    audit.record("proposal", state="pending", args={"topic": "orders"}, **fields)  # not yet one
    audit.record("execution", state="executed", args={"topic": "orders"}, **{**fields, "cluster": "other"})
    ctx = Context(kb=default_kb(), lake=StandInLake([MIN_ISR]), gate=StandInGate(audit), clock=lambda: NOW)
    lagging = _reply("Group billing is 5,000 behind on orders and the lag grows.")
    out = asyncio.run(annotate(ctx, lagging, "c", also=["billing"]))
    line = out.evidence[0].value
    assert "10 min ago: topic orders `retention orders 1h` run by the bot, confirmed by U0ALICE" in line, line
    assert line.count("run by the bot") == 1, line  # the failed one, the proposal and the other cluster's are not
    assert "12 min ago: topic orders min.insync.replicas 2 -> 3" in line, line
