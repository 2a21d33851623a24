"""The timeline's chart (issue 37): the metric lake's history of the thread's metric over the
incident window, on the synthetic lake (broker 2 lost 10:10-10:50: URP 5 on brokers 1, 3, 4), drawn
as the PNG a Slack thread gets; and a note instead of a chart when the lake cannot give one."""

from __future__ import annotations

import asyncio
import dataclasses

from lakekit import hhmm

from bot.charts import chart_png
from commands.registry import ROUTER
from framework.dispatch import run_request
from framework.followup import IncidentMemory, ThreadMemories
from framework.spec import CommandRequest
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore

CH, ROOT = "C0INC", "1714558200.000100"


def _thread(tmp_path, metric: str | None):
    """A thread's audit records (an alert at 10:10, `why URP` answered at 10:12 and 10:20) and its
    memory, as the Slack app writes them; the gate they are read through."""
    now = [0.0]
    audit = AuditLog(tmp_path / "audit.jsonl", clock=lambda: now[0])
    t0 = hhmm(10, 10).timestamp()
    for ts, event, fields in (
        (
            t0 + 20,
            "alert",
            {"status": "firing", "result": "opened", "alertname": "KafkaURP", "starts_at": "2024-05-01T10:10:00+00:00"},
        ),
        (
            t0 + 120,
            "answer",
            {"command": "why", "args": {"symptom": "URP"}, "outcome": "answered", "verdict": "Broker 2 is gone."},
        ),
        (t0 + 600, "answer", {"command": "status", "outcome": "answered", "verdict": "Not healthy."}),
    ):
        now[0] = ts
        audit.record(event, channel=CH, thread_root=ROOT, user="U0ALICE", **fields)
    gate = ConfirmationGate(PendingStore(tmp_path / "pending.sqlite3"), audit, router=ROUTER)
    memory = IncidentMemory(cluster=None, cause=("broker-loss", "Broker loss"), metric=metric, updated_at=t0)
    ThreadMemories(gate.state_db.connect, clock=lambda: t0).put((CH, ROOT), memory)
    return gate


def _timeline(ctx):
    request = CommandRequest(ROUTER.find("timeline"), args={"thread": f"{CH}/{ROOT}"}, raw="timeline", router=ROUTER)
    return asyncio.run(run_request(request, ctx))


def test_the_timeline_carries_the_lakes_chart_of_the_incident_window(ctx_at, tmp_path):
    ctx = dataclasses.replace(ctx_at(hhmm(10, 40)), gate=_thread(tmp_path, "URP"))
    reply = _timeline(ctx).reply
    assert reply.series, reply.notes
    by_label = {s.label: s.points for s in reply.series}
    assert {"broker 1", "broker 3", "broker 4"} <= set(by_label), by_label.keys()
    assert max(v for _t, v in by_label["broker 1"]) == 5  # broker 2's replicas out of sync
    points = sorted(p for s in reply.series for p in s.points)
    assert "2024-05-01T10:05:00+00:00" <= points[0][0] and points[-1][0] <= "2024-05-01T10:25:00+00:00"  # 5 min margins
    assert reply.series[0].window == ("2024-05-01T10:10:00Z", "2024-05-01T10:20:00Z")  # the incident, shaded
    assert any(n.startswith("Chart: UnderReplicatedPartitions from the metric lake") for n in reply.notes)
    assert chart_png(reply.series, reply.title)[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_a_chart_the_timeline_says_why(ctx_at, tmp_path):
    no_lake = dataclasses.replace(ctx_at(hhmm(10, 40)), gate=_thread(tmp_path / "a", "URP"), lake=None)
    reply = _timeline(no_lake).reply
    assert reply.series == [] and any("no metric lake is configured here" in n for n in reply.notes)
    no_metric = dataclasses.replace(ctx_at(hhmm(10, 40)), gate=_thread(tmp_path / "b", None))
    reply = _timeline(no_metric).reply
    assert reply.series == [] and any("no `why` in this thread named a metric" in n for n in reply.notes)
    unknown = dataclasses.replace(ctx_at(hhmm(10, 40)), gate=_thread(tmp_path / "c", "NoSuchGauge"))
    reply = _timeline(unknown).reply
    assert any(n.startswith("No chart of NoSuchGauge: the metric lake holds no sample") for n in reply.notes)
