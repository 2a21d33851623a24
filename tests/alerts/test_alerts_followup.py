"""An alert's thread remembers its incident (issue 28): a follow-up asked there, as a mention,
starts from the topic the alert's diagnosis was scoped to, and says so."""

from __future__ import annotations

import json

import pytest
from slack_stand_in import BOT_USER

ALERT_TOKEN = "alert-bearer-5c0d1e2f3a"
INCIDENTS = "C0INC"


@pytest.fixture
def alert_env(monkeypatch, tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text(
        f"routes:\n  - match: {{severity: critical}}\n    channel: {INCIDENTS}\ndefault_channel: {INCIDENTS}\n"
    )
    monkeypatch.setenv("KBOT_ALERT_TOKEN", ALERT_TOKEN)
    monkeypatch.setenv("KBOT_ALERT_ROUTES", str(routes))
    monkeypatch.delenv("KBOT_ALERT_CHANNEL", raising=False)


async def test_a_follow_up_in_an_alert_thread_starts_from_the_alerts_topic(harness, alert_env):
    await harness.start_bot()
    alert = {
        "status": "firing",
        "labels": {"alertname": "KafkaLSOLag", "severity": "critical", "topic": "orders", "partition": "0"},
        "annotations": {"kbot_symptom": "LastStableOffsetLag"},
        "startsAt": "2026-11-23T02:00:00.000Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": "fpF",
    }
    payload = {
        "version": "4",
        "groupKey": "g-followup",
        "status": "firing",
        "receiver": "kbot",
        "groupLabels": {"alertname": "KafkaLSOLag"},
        "commonLabels": alert["labels"],
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": [alert],
    }
    url = harness.url.replace("/slack/events", "/alerts/alertmanager")
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {ALERT_TOKEN}"}
    async with harness.session.post(url, data=json.dumps(payload).encode(), headers=headers) as r:
        assert r.status == 200
    await harness.stand.wait_for(lambda: len(harness.audit("answer")) >= 2, timeout_s=60)
    await harness.bot.drain(30)
    root = next(c.result["ts"] for c in harness.stand.called("chat.postMessage") if not c.args.get("thread_ts"))
    before = len(harness.stand.calls)
    event = {"type": "app_mention", "user": "U0ALICE", "channel": INCIDENTS, "ts": "1700008888.000001"}
    await harness.event({**event, "thread_ts": root, "text": f"<@{BOT_USER}> at-min-isr it"})
    await harness.stand.wait_for(lambda: any(a.get("command") == "at-min-isr" for a in harness.audit("answer")))
    await harness.bot.drain(30)
    said = json.dumps([c.args for c in harness.stand.calls[before:] if c.method.startswith("chat.")])
    assert "From this thread: topic orders" in said
    asked = next(a for a in harness.audit("answer") if a.get("command") == "at-min-isr")
    assert asked["args"] == {"topic": "orders"}
