"""The incident timeline (issue 28) built from audit records and a thread's memory: which records
belong to a thread, their order, the durations, and the Markdown and JSON exports."""

from __future__ import annotations

import asyncio
import json

import pytest
from block_limits import violations

from bot.render_slack import render_blocks
from commands.registry import ROUTER
from commands.timeline import answer_summary, build, parse_thread, render_markdown, select
from framework.context import Context
from framework.dispatch import run_request
from framework.followup import IncidentMemory, ThreadMemories
from framework.reply import Diagnosis, Evidence, Reply
from framework.router import BadInput
from framework.spec import CommandRequest
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore
from runbook_kb import default_kb

CH, ROOT = "C0INC", "1750000000.000100"
T0 = 1_750_000_000.0  # the alert's startsAt
TOKEN = "a1b2c3d4e5f6"


def _records() -> list[dict]:
    """An incident as the bot writes it: alert, diagnosis, a question, a gated action approved by a
    second person after a refused self-approval, the resolution; with other threads' records around."""
    other = {"channel": CH, "thread_root": "1750000999.000100"}
    return [
        {"ts": T0 - 50, "event": "answer", "command": "status", "user": "U0EVE", **other, "outcome": "answered"},
        {
            "ts": T0 + 30,
            "event": "alert",
            "transport": "alertmanager",
            "status": "firing",
            "result": "opened",
            "alertname": "KafkaUnderReplicatedPartitions",
            "severity": "critical",
            "entities": ["broker 103"],
            "starts_at": "2025-06-15T15:06:40+00:00",  # T0
            "channel": CH,
            "thread_root": ROOT,
        },
        {
            "ts": T0 + 42,
            "event": "answer",
            "transport": "alertmanager",
            "user": "alertmanager",
            "channel": CH,
            "thread_ts": ROOT,
            "thread_root": ROOT,
            "command": "why",
            "args": {"symptom": "URP"},
            "outcome": "answered",
            "latency_ms": 4000.0,
            "severity": "warning",
            "verdict": "Broker 103 is gone: 18 partitions are under-replicated.",
            "cause": {"entry_id": "broker-loss", "title": "Broker loss"},
            "evidence": [
                {"label": "Brokers registered", "value": "2 of 3 (missing: 103)", "status": "bad", "source": "live"}
            ],
        },
        {
            "ts": T0 + 60,
            "event": "request",
            "transport": "slack",
            "source": "mention",
            "user": "U0ALICE",
            "channel": CH,
            "text": "status",
            "request_id": "r1",
            "thread_ts": ROOT,
        },
        {"ts": T0 + 61, "event": "request", "user": "U0EVE", "channel": CH, "text": "lag", "request_id": "r9"},
        {
            "ts": T0 + 65,
            "event": "answer",
            "transport": "slack",
            "user": "U0ALICE",
            "channel": CH,
            "command": "status",
            "outcome": "answered",
            "request_id": "r1",
            "thread_ts": "1750000065.000200",
            "thread_root": ROOT,
            "severity": "warning",
            "verdict": "18 partitions under-replicated.",
            "evidence": [{"label": "Under-replicated partitions", "value": "18", "status": "bad", "source": "live"}],
        },
        {
            "ts": T0 + 90,
            "event": "request",
            "user": "U0ALICE",
            "channel": CH,
            "text": "retention orders 1h",
            "request_id": "r2",
            "thread_ts": ROOT,
        },
        {
            "ts": T0 + 91,
            "event": "preview",
            "token_id": TOKEN,
            "command": "retention",
            "kind": "retention",
            "cluster": "local",
            "requester": "U0ALICE",
            "user": "U0ALICE",
            "summary": "retention.ms of orders: 604800000 -> 3600000",
            "needs_second_approver": True,
            "ready": True,
        },
        {
            "ts": T0 + 92,
            "event": "answer",
            "user": "U0ALICE",
            "channel": CH,
            "command": "retention",
            "request_id": "r2",
            "thread_root": ROOT,
            "action_token_id": TOKEN,
            "outcome": "answered",
        },
        {
            "ts": T0 + 100,
            "event": "refusal",
            "token_id": TOKEN,
            "user": "U0ALICE",
            "requester": "U0ALICE",
            "step": "confirm",
            "code": "self_approval",
            "reason": "Self-approval is refused.",
        },
        {
            "ts": T0 + 120,
            "event": "approval",
            "token_id": TOKEN,
            "user": "U0BOB",
            "requester": "U0ALICE",
            "complete": True,
            "reason": "Approved by U0BOB (requested by U0ALICE).",
        },
        {
            "ts": T0 + 125,
            "event": "execution",
            "token_id": TOKEN,
            "user": "U0BOB",
            "requester": "U0ALICE",
            "state": "executed",
            "ok": True,
            "detail": "retention.ms of orders is 3600000",
            "before": {"retention.ms": "604800000"},
            "after": {"retention.ms": "3600000"},
        },
        {
            "ts": T0 + 126,
            "event": "answer",
            "user": "U0BOB",
            "channel": CH,
            "command": "confirm",
            "args": {"token_id": TOKEN},
            "thread_root": ROOT,
        },
        {
            "ts": T0 + 127,
            "event": "execution",
            "token_id": "someoneelse",
            "user": "U0EVE",
            "ok": True,
            "state": "executed",
        },
        {
            "ts": T0 + 300,
            "event": "alert",
            "status": "resolved",
            "result": "resolved",
            "alertname": "KafkaUnderReplicatedPartitions",
            "starts_at": "2025-06-15T15:06:40+00:00",
            "ends_at": "2025-06-15T15:11:30+00:00",  # T0 + 290
            "channel": CH,
            "thread_root": ROOT,
        },
    ]


MEMORY = {"cluster": "local", "cause": ["broker-loss", "Broker loss"], "named": {"topic": ["orders"]}}


def test_a_threads_records_are_chosen_by_thread_request_and_token():
    chosen = select(_records(), (CH, ROOT))
    assert all(r.get("user") != "U0EVE" for r in chosen), "other threads' records stay out"
    assert {r["event"] for r in chosen} == {"alert", "answer", "request", "preview", "refusal", "approval", "execution"}


def test_events_in_order_with_durations():
    doc = build(_records(), (CH, ROOT), MEMORY)
    kinds = [e["kind"] for e in doc["events"]]
    assert kinds == [
        "alert",
        "question",  # the alert's diagnosis (asked 4 s before its answer)
        "question",
        "action proposed",
        "refusal",
        "approval",
        "action executed",
        "resolved",
    ]
    assert [e["ts"] for e in doc["events"]] == sorted(e["ts"] for e in doc["events"])
    assert doc["started_at"] == "2025-06-15T15:06:40Z" and doc["started_by"] == "alert fired"
    d = doc["durations"]
    assert d["time_to_first_answer_s"] == 42.0
    assert d["time_to_mitigation_s"] == 125.0
    assert d["time_to_resolution_s"] == 290.0 and d["resolution"] == "alert resolved"
    assert doc["cluster"] == "local" and doc["leading_cause"] == {"entry_id": "broker-loss", "title": "Broker loss"}
    (action,) = doc["actions"]
    assert action["requester"] == "U0ALICE" and action["approvers"] == ["U0BOB"]
    assert action["confirmed_by"] == "U0BOB" and action["outcome"] == "executed"
    assert action["after"] == {"retention.ms": "3600000"}
    assert action["refusals"] == [{"user": "U0ALICE", "at": "2025-06-15T15:08:20Z", "code": "self_approval"}]
    assert "reason" not in action, "the gate's standard confirm reason is not repeated"
    json.dumps(doc)  # a JSON document


def test_without_a_resolved_alert_resolution_is_the_last_answer_or_event_never_before_mitigation():
    """Issue 37: "Time to mitigation 5m22s" beside "Time to resolution 2m35s (last answer)": the
    answers after the last question (a preview, a confirm, the execution) are not questions, yet the
    incident went on until them."""
    records = [r for r in _records() if r.get("status") != "resolved"]
    doc = build(records, (CH, ROOT))
    d = doc["durations"]
    assert d["time_to_mitigation_s"] == 125.0
    assert d["time_to_resolution_s"] == 125.0 and d["resolution"] == "last event"
    assert d["time_to_resolution_s"] >= max(e["offset_s"] for e in doc["events"])
    markdown = render_markdown(doc)
    assert "| Time to resolution | 2m05s (last event) |" in markdown
    # a question after the mitigation: the last answer is the end
    later = {**records[2], "ts": T0 + 400, "latency_ms": 1000.0}
    d = build([*records, later], (CH, ROOT))["durations"]
    assert d["time_to_resolution_s"] == 400.0 and d["resolution"] == "last answer"


def test_a_thread_a_slash_command_started_is_found_by_its_request_id():
    records = [
        {"ts": 10.0, "event": "request", "user": "U1", "channel": CH, "text": "why URP", "request_id": "rq"},
        {
            "ts": 13.5,
            "event": "answer",
            "user": "U1",
            "channel": CH,
            "command": "why",
            "request_id": "rq",
            "thread_root": "11.000001",
            "verdict": "v",
        },
    ]
    doc = build(records, (CH, "11.000001"))
    (q,) = doc["events"]
    assert q["text"] == "why URP" and q["answer_s"] == 3.5 and doc["durations"]["time_to_first_answer_s"] == 3.5
    assert doc["started_by"] == "first event" and doc["durations"]["time_to_mitigation_s"] is None


def test_markdown_has_the_summary_the_events_the_action_and_the_evidence():
    md = render_markdown(build(_records(), (CH, ROOT), MEMORY))
    assert md.startswith("# Incident timeline: KafkaUnderReplicatedPartitions (critical)\n")
    assert "| Time to first answer | 42s |" in md
    assert "| Time to mitigation | 2m05s (retention executed, confirmed by U0BOB) |" in md
    assert "| Time to resolution | 4m50s (alert resolved) |" in md
    rows = [line for line in md.splitlines() if line.startswith("| 15:")]
    assert [r.split(" | ")[2] for r in rows] == [
        "alert",
        "question",
        "question",
        "action proposed",
        "refusal",
        "approval",
        "action executed",
        "resolved",
    ]
    assert "- Requested by U0ALICE at 15:08:11 UTC" in md
    assert "- Approved by: U0BOB (a second approver was required)" in md
    assert "- After (read back from the cluster): retention.ms = 3600000" in md
    assert "- ! Brokers registered: 2 of 3 (missing: 103) (live)" in md


def test_a_break_glass_confirm_shows_its_reason():
    records = _records()
    for r in records:
        if r["event"] == "approval":
            r.update(
                user="U0ALICE",
                approvals=["U0ALICE"],
                break_glass="oncall-alone",  # as gate/confirmation.py's break-glass writes it
                break_glass_reason="03:00, no approver reachable; disk 95% full",
                reason="Confirmed alone by U0ALICE under oncall-alone.",
            )
    doc = build(records, (CH, ROOT))
    (action,) = doc["actions"]
    assert action["break_glass"] == "oncall-alone" and action["reason"].startswith("03:00")
    md = render_markdown(doc)
    assert (
        "- Break-glass: confirmed alone under oncall-alone; reason: 03:00, no approver reachable; disk 95% full" in md
    )
    assert "BREAK-GLASS confirmed by the requester; reason: 03:00" in md


@pytest.mark.parametrize(
    "text, ref",
    [
        ("C0INC/1750000000.000100", (CH, ROOT)),
        ("C0INC:1750000000.000100", (CH, ROOT)),
        ("https://acme.slack.com/archives/C0INC/p1750000000000100", (CH, ROOT)),
        ("<https://acme.slack.com/archives/C0INC/p1750000077000300?thread_ts=1750000000.000100&cid=C0INC>", (CH, ROOT)),
    ],
)
def test_thread_forms(text, ref):
    assert parse_thread(text) == ref


@pytest.mark.parametrize("text", ["orders", "C0INC", "C0INC/17", "https://example.com/x"])
def test_a_malformed_thread_is_bad_input_naming_the_form(text):
    with pytest.raises(BadInput, match="C0INC/1700000000.000100"):
        parse_thread(text)


def test_answer_summary_keeps_verdict_cause_and_evidence():
    reply = Reply(
        "Why URP?",
        "warning",
        "x" * 1000,
        evidence=[Evidence(f"e{i}", "v", "live") for i in range(20)],
        diagnoses=[Diagnosis("broker-loss", "Broker loss", "cause")],
    )
    s = answer_summary(reply)
    assert s["cause"] == {"entry_id": "broker-loss", "title": "Broker loss"}
    assert len(s["verdict"]) == 400 and len(s["evidence"]) == 12 and s["severity"] == "warning"


def _run(tmp_path, text: str, records: list[dict] | None = None, memory: dict | None = None, lake=None):
    now = [0.0]
    audit = AuditLog(tmp_path / "audit.jsonl", clock=lambda: now[0])
    for r in records or []:
        now[0] = r["ts"]
        audit.record(r["event"], **{k: v for k, v in r.items() if k not in ("ts", "event")})
    gate = ConfirmationGate(PendingStore(tmp_path / "pending.sqlite3"), audit, router=ROUTER)
    if memory is not None:  # the thread's memory, as the Slack app stores it
        memories = ThreadMemories(gate.state_db.connect, clock=lambda: T0)
        memories.put((CH, ROOT), IncidentMemory.from_dict({**memory, "updated_at": T0}))
    cmd = ROUTER.find("timeline")
    request = CommandRequest(cmd, args={"thread": text} if text else {}, raw=f"timeline {text}", router=ROUTER)
    return asyncio.run(run_request(request, Context(kb=default_kb(), gate=gate, lake=lake, clock=lambda: T0 + 3600)))


def test_the_command_refuses_an_unknown_thread_and_a_missing_one_with_what_to_do(tmp_path):
    unknown = _run(tmp_path, "C0INC/1750000000.000100")
    assert (
        unknown.outcome == "bad_input" and "knows no incident thread C0INC/1750000000.000100" in unknown.reply.verdict
    )
    missing = _run(tmp_path, "")
    assert missing.outcome == "bad_input" and "inside the incident's thread" in missing.reply.verdict


def test_the_command_answers_from_the_audit_log_with_its_exports(tmp_path):
    result = _run(tmp_path, f"{CH}/{ROOT}", _records())
    assert result.outcome == "answered", result.reply.verdict
    reply = result.reply
    assert reply.title == "Incident timeline: KafkaUnderReplicatedPartitions (critical)"
    assert reply.tables[0].rows[0][2] == "alert" and len(reply.tables[0].rows) == 8
    files = dict((name, text) for name, _title, text in reply.attachments())
    assert set(files) == {"incident-timeline-1750000000-000100.md", "incident-timeline-1750000000-000100.json"}
    assert json.loads(files["incident-timeline-1750000000-000100.json"])["thread"] == f"{CH}/{ROOT}"
    assert reply.to_dict()["timeline"]["durations"]["time_to_mitigation_s"] is not None


def test_the_threads_memory_comes_from_the_state_database_and_the_answer_fits_slack(tmp_path):
    result = _run(tmp_path, f"{CH}/{ROOT}", _records(), MEMORY)
    doc = result.reply.timeline
    assert doc["cluster"] == "local" and doc["leading_cause"]["entry_id"] == "broker-loss"
    assert doc["named"] == {"topic": ["orders"]}
    for full in (False, True):
        for message in render_blocks(result.reply, full=full):
            assert violations(message) == []


def test_a_known_thread_without_events_says_to_ask_there_first(tmp_path):
    result = _run(tmp_path, f"{CH}/{ROOT}", [], MEMORY)
    assert result.outcome == "bad_input" and "no recorded events yet" in result.reply.verdict


class ChangeTable:
    """The lake's change table as LakeService.changes answers it (the real one: tests/lake/test_lake_changes.py)."""

    def __init__(self, rows):
        self.rows = rows

    async def changes(self, since_ms, kinds=(), name=None, cluster=None):
        return sorted((r for r in self.rows if r.ts_ms >= since_ms), key=lambda r: -r.ts_ms)


def test_the_clusters_changes_in_and_just_before_the_incident_are_events(tmp_path):
    from lake.changes import Change

    def change(at: float, resource: str, what: str) -> Change:
        return Change(int(at * 1000), "prod", "config", resource, what, "2", "3", 1)

    rows = [
        change(T0 - 7200, "topic old", "retention.ms set to 1"),  # long before: not this incident's
        change(T0 - 300, "topic orders", "min.insync.replicas 2 -> 3"),
        change(T0 + 35, "broker 102", "restarted"),
    ]
    result = _run(tmp_path, f"{CH}/{ROOT}", _records(), lake=ChangeTable(rows))
    assert result.outcome == "answered", result.reply.verdict
    events = result.reply.timeline["events"]
    changes = [(e["offset_s"], e["summary"]) for e in events if e["kind"] == "cluster change"]
    assert changes == [(-300.0, "topic orders min.insync.replicas 2 -> 3"), (35.0, "broker 102 restarted")]
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)  # in time order with the rest
    table = result.reply.tables[0].rows
    assert ["-5m00s", "cluster change", "cluster"] == table[0][1:4], table[0]
    assert any("and 2 recorded change(s) of the cluster" in n for n in result.reply.notes), result.reply.notes
    markdown = dict((n, t) for n, _title, t in result.reply.attachments())["incident-timeline-1750000000-000100.md"]
    assert "| -5m00s | cluster change | cluster | topic orders min.insync.replicas 2 -> 3 |" in markdown
