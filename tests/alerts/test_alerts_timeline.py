"""The thread is the postmortem timeline (issue 28), end to end: an Alertmanager notification opens
a thread, people ask in it (mentions over signed HTTP to the real Bolt app), a retention cut needs a
second approver (the requester's own Confirm is refused, another engineer's executes it on the
local Kafka cluster), the alert resolves, and `timeline` in the thread posts the incident in order
as Markdown and JSON files through the Slack Web API stand-in. A fresh `kbot incident timeline`
process then reads the same timeline from the state folder alone: it survives a restart."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from slack_stand_in import BOT_USER

from kbot_settings import load as load_settings
from live.pool import GatewayPool

pytestmark = pytest.mark.kafka

ALERT_TOKEN = "alert-bearer-7a1c0e55d2"
INCIDENTS = "C0INC"
GROUP = "g-timeline"
VICTIM = 103
POLICY = {
    "channels": [INCIDENTS],
    "read_only": "open",
    "grants": [{"name": "sre", "users": ["U0ALICE", "U0BOB"], "commands": ["retention"]}],
}


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _notification(status: str, topic: str, starts: float, ends: float | None) -> dict:
    labels = {"alertname": "KafkaUnderReplicatedPartitions", "severity": "critical", "topic": topic}
    alert = {
        "status": status,
        "labels": labels,
        "annotations": {"kbot_symptom": "UnderReplicatedPartitions", "summary": f"URP on {topic}"},
        "startsAt": _iso(starts),
        "endsAt": _iso(ends) if ends else "0001-01-01T00:00:00Z",
        "fingerprint": "fpTimeline",
    }
    return {
        "version": "4",
        "groupKey": GROUP,
        "status": status,
        "receiver": "kbot",
        "groupLabels": {"alertname": labels["alertname"]},
        "commonLabels": labels,
        "commonAnnotations": alert["annotations"],
        "externalURL": "http://alertmanager",
        "alerts": [alert],
    }


def _preview(stand, root: str) -> tuple[dict, dict] | None:
    """The message in the thread that carries the preview's buttons: in a thread the answer is an
    edit of the working message (chat.update), not a new post."""
    for c in reversed(stand.called("chat.update") + stand.called("chat.postMessage")):
        buttons = {
            e["text"]["text"]: e for b in c.args.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]
        }
        if "Confirm" in buttons:
            ts = c.args.get("ts") or c.result["ts"]
            message = {"ts": ts, "thread_ts": root, "text": c.args.get("text"), "blocks": c.args["blocks"]}
            return {**message, "type": "message"}, buttons
    return None


@pytest.fixture
def alert_env(monkeypatch, tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text(f"routes:\n  - match: {{severity: critical}}\n    channel: {INCIDENTS}\n")
    monkeypatch.setenv("KBOT_ALERT_TOKEN", ALERT_TOKEN)
    monkeypatch.setenv("KBOT_ALERT_ROUTES", str(routes))
    monkeypatch.delenv("KBOT_ALERT_CHANNEL", raising=False)


async def test_an_incident_thread_becomes_its_timeline(harness, alert_env, kafka_cluster, tmp_path):
    topic = f"timeline-{uuid.uuid4().hex[:6]}"
    faults = kafka_cluster.faults
    await asyncio.to_thread(faults.create_topic, topic, 3, 3)
    await asyncio.to_thread(faults.kill_broker, VICTIM)  # the incident: a broker is lost (SIGKILL, from outside)
    await asyncio.to_thread(
        faults.wait_for,
        lambda: all(VICTIM not in p["isr"] for p in faults.describe([topic])[topic]),
        90,
        "the ISRs to shrink",
    )
    harness.router = None  # the real command registry: why, status, retention, timeline ...
    await harness.start_bot(policy=POLICY)
    pool = GatewayPool(
        load_settings(
            {
                "KBOT_BOOTSTRAP": kafka_cluster.bootstrap_servers,
                "KBOT_CLUSTER_NAME": "local",
                "KBOT_EXPECTED_BROKERS": ",".join(map(str, kafka_cluster.brokers)),
            }
        )
    )
    harness.bot.ctx.live = pool
    stand, bot = harness.stand, harness.bot
    url = harness.url.replace("/slack/events", "/alerts/alertmanager")
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {ALERT_TOKEN}"}

    async def notify(payload: dict) -> None:
        async with harness.session.post(url, data=json.dumps(payload).encode(), headers=headers) as r:
            assert r.status == 200

    seq = iter(range(1, 100))

    async def mention(user: str, text: str, done) -> None:
        ts = f"{int(time.time())}.{next(seq):06d}"
        event = {"type": "app_mention", "user": user, "channel": INCIDENTS, "ts": ts, "thread_ts": root}
        status, _, _ = await harness.event({**event, "text": f"<@{BOT_USER}> {text}"})
        assert status == 200
        await stand.wait_for(done, timeout_s=90)
        await bot.drain(60)

    def answered(command: str, n: int = 1):
        return lambda: len([a for a in harness.audit("answer") if a.get("command") == command]) >= n

    try:
        # 1. the alert opens the thread; its diagnosis (why + describe of the topic) goes in it
        fired = time.time() - 5
        await notify(_notification("firing", topic, fired, None))
        await stand.wait_for(answered("describe"), timeout_s=90)
        await bot.drain(60)
        root = next(c.result["ts"] for c in stand.called("chat.postMessage") if not c.args.get("thread_ts"))

        # 2. questions in the thread, as mentions
        await mention("U0ALICE", "status", answered("status"))
        # the topic by name: with a broker lost, every topic of the shared cluster is in the answers
        # and "it" asks which (tests/slack/test_slack_plain_followups.py)
        await mention("U0BOB", f"at-min-isr {topic}", answered("at-min-isr"))

        # 3. a gated action: Alice cuts retention (lowering it needs a second approver)
        await mention("U0ALICE", f"retention {topic} 1h", lambda: _preview(stand, root))
        message, buttons = _preview(stand, root)
        await harness.click(buttons["Confirm"], message, user="U0ALICE", channel=INCIDENTS)
        await stand.wait_for(lambda: harness.audit("refusal"), timeout_s=30)
        await harness.click(buttons["Confirm"], message, user="U0BOB", channel=INCIDENTS)
        await stand.wait_for(lambda: harness.audit("execution"), timeout_s=90)
        await bot.drain(60)
        (execution,) = harness.audit("execution")
        assert execution["ok"] is True and execution["user"] == "U0BOB", execution

        # 4. the broker comes back, the ISRs fill, the alert resolves
        await asyncio.to_thread(faults.restart_broker, VICTIM)
        await asyncio.to_thread(
            faults.wait_for,
            lambda: all(VICTIM in p["isr"] for p in faults.describe([topic])[topic]),
            120,
            "the ISRs to fill",
        )
        await notify(_notification("resolved", topic, fired, time.time()))
        await stand.wait_for(lambda: [a for a in harness.audit("alert") if a.get("result") == "resolved"], 30)
        await bot.drain(30)

        # 5. `timeline` in the thread: a summary answer and the exports as files in the thread
        uploads_before = len(stand.uploads())
        await mention("U0ALICE", "timeline", lambda: len(stand.uploads()) > uploads_before)
        (upload,) = stand.uploads()[uploads_before:]
        assert upload.args.get("thread_ts") == root and upload.args.get("channel_id") == INCIDENTS
        sent = {c.args["file_id"]: c.args["content"].decode() for c in stand.calls if c.method == "file_upload"}
        files = {f["title"].rsplit("(", 1)[1].rstrip(")"): sent[f["id"]] for f in upload.result["files"]}
        markdown, exported = files["Markdown"], json.loads(files["JSON"])
        said = json.dumps([c.args for c in stand.called("chat.update")][-3:])  # the working message, answered
        assert "Incident timeline: KafkaUnderReplicatedPartitions (critical)" in said
    finally:
        await pool.close()

    # The Markdown: the events in order, who asked and approved, the durations
    (tmp_path / "timeline.md").write_text(markdown)  # kept for the README's excerpt (pytest's tmp folder)
    rows = [line.split(" | ") for line in markdown.splitlines() if line.startswith("| ") and line[2:3].isdigit()]
    kinds = [r[2] for r in rows]
    assert kinds == [
        "alert",
        "question",  # why UnderReplicatedPartitions, asked by Alertmanager
        "question",  # describe <topic>
        "question",  # status
        "question",  # at-min-isr <topic>
        "action proposed",
        "refusal",  # Alice's own Confirm: a second approver is needed
        "approval",
        "action executed",
        "resolved",
    ], markdown
    who = [r[3] for r in rows]
    assert who[3] == "U0ALICE" and who[4] == "U0BOB" and who[5] == "U0ALICE" and who[7:9] == ["U0BOB", "U0BOB"]
    assert f"`at-min-isr {topic}`" in rows[4][4]
    assert f"retention.ms of {topic}" in markdown or f"retention of {topic}" in markdown or topic in rows[5][4]
    assert "- Requested by U0ALICE at " in markdown
    assert "- Approved by: U0BOB (a second approver was required)" in markdown
    assert "- Refused: U0ALICE (self_approval)" in markdown
    assert "- After (read back from the cluster): " in markdown and "3600000" in markdown
    assert "| Time to mitigation | " in markdown and "(retention executed, confirmed by U0BOB)" in markdown
    assert "(alert resolved) |" in markdown
    assert "## Evidence snapshots" in markdown
    assert f"Broker {VICTIM} is gone" in rows[1][4], rows[1]  # the alert's diagnosis, as the bot saw it then

    # The JSON: the same events, in time order, and the durations as numbers
    events = exported["events"]
    assert [e["kind"] for e in events] == kinds
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    d = exported["durations"]
    assert 0 < d["time_to_first_answer_s"] < d["time_to_mitigation_s"] < d["time_to_resolution_s"]
    assert d["resolution"] == "alert resolved"
    (action,) = exported["actions"]
    assert action["requester"] == "U0ALICE" and action["approvers"] == ["U0BOB"] and action["outcome"] == "executed"
    assert any("3600000" in json.dumps(v) for v in action["after"].values())
    status_q = next(e for e in events if e.get("command") == "status")
    assert status_q["evidence"] and status_q["severity"]  # the snapshot of what the bot saw then

    # A restart: a fresh process reads the same timeline from the state folder alone
    env = {**os.environ, "KBOT_STATE_DIR": str(harness.state_dir), "KBOT_HOME": str(tmp_path / "home")}
    for key in ("KBOT_ALERT_TOKEN", "KBOT_ALERT_ROUTES", "SLACK_BOT_TOKEN", "KBOT_BOOTSTRAP"):
        env.pop(key, None)
    cli = [sys.executable, "-m", "cli.main", "incident", "timeline", f"{INCIDENTS}/{root}"]
    out = await asyncio.to_thread(
        subprocess.run, [*cli, "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    again = json.loads(out.stdout)["timeline"]
    assert [e["kind"] for e in again["events"]] == kinds and again["durations"] == d
    out = await asyncio.to_thread(
        subprocess.run, [*cli, "--markdown"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0 and out.stdout == markdown, out.stderr
    unknown = await asyncio.to_thread(
        subprocess.run,
        [*cli[:-1], f"{INCIDENTS}/1111111111.000001"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert unknown.returncode == 2 and "knows no incident thread" in unknown.stdout
    assert "Traceback" not in unknown.stdout + unknown.stderr
