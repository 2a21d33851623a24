"""POST /alerts/alertmanager through the real app: bearer token, one thread per alert group in the
routed channel, the diagnosis in it, repeats edit instead of posting, resolved closes the thread."""

from __future__ import annotations

import json
import logging

import pytest

from bot.alertmanager import AlertConfig, AlertConfigError
from kbot_settings import load as load_settings
from runbook_kb import default_kb

ALERT_TOKEN = "alert-bearer-6b1f0c2e9d"
DEFAULT, INCIDENTS = "C0KAFKAALERTS", "C0INC"
ROUTES = f"""
routes:
  - match: {{severity: critical}}
    channel: {INCIDENTS}
  - match_re: {{topic: "payments-.*"}}
    channel: C0PAYMENTS
default_channel: {DEFAULT}
"""


def _alert(
    name: str,
    fp: str,
    status: str = "firing",
    *,
    symptom: str | None = None,
    severity: str = "warning",
    starts: str = "2026-11-23T02:00:00.000Z",
    ends: str = "0001-01-01T00:00:00Z",
    **labels,
) -> dict:
    annotations = {"summary": f"{name} on {labels.get('node_id', '?')}"}
    if symptom:
        annotations["kbot_symptom"] = symptom
    return {
        "status": status,
        "labels": {"alertname": name, "severity": severity, "cluster": "local", **labels},
        "annotations": annotations,
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prom/graph",
        "fingerprint": fp,
    }


def _notification(group: str, alerts: list[dict], status: str | None = None) -> dict:
    common = {k: v for k, v in alerts[0]["labels"].items() if all(a["labels"].get(k) == v for a in alerts)}
    return {
        "version": "4",
        "groupKey": group,
        "truncatedAlerts": 0,
        "status": status or ("firing" if any(a["status"] == "firing" for a in alerts) else "resolved"),
        "receiver": "kbot",
        "groupLabels": {"alertname": alerts[0]["labels"]["alertname"]},
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": alerts,
    }


@pytest.fixture
def alert_env(monkeypatch, tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES)
    monkeypatch.setenv("KBOT_ALERT_TOKEN", ALERT_TOKEN)
    monkeypatch.setenv("KBOT_ALERT_ROUTES", str(routes))
    monkeypatch.delenv("KBOT_ALERT_CHANNEL", raising=False)
    return routes


async def _send(h, payload, *, token: str | None = ALERT_TOKEN, raw: bytes | None = None):
    url = h.url.replace("/slack/events", "/alerts/alertmanager")
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    async with h.session.post(url, data=raw if raw is not None else json.dumps(payload).encode(), headers=headers) as r:
        return r.status, await r.text()


def _posts(stand, channel=None, thread_ts=None, top=False):
    return [
        c
        for c in stand.called("chat.postMessage")
        if (channel is None or c.result.get("channel") == channel)
        and (thread_ts is None or c.args.get("thread_ts") == thread_ts)
        and (not top or not c.args.get("thread_ts"))
    ]


def _text(calls) -> str:
    return json.dumps([c.args for c in calls])


async def _settled(h):
    await h.bot.drain(30)


async def test_firing_group_opens_one_thread_with_the_diagnosis_then_repeats_edit_it(harness, alert_env):
    await harness.start_bot()
    urp = [
        _alert("KafkaUnderReplicatedPartitions", "fp101", symptom="UnderReplicatedPartitions", node_id="101"),
        _alert("KafkaUnderReplicatedPartitions", "fp102", symptom="UnderReplicatedPartitions", node_id="102"),
    ]
    assert (await _send(harness, _notification('{}:{alertname="URP"}', urp)))[0] == 200
    await _settled(harness)
    parents = _posts(harness.stand, DEFAULT, top=True)
    assert len(parents) == 1, "one alert group, one parent message"
    parent = parents[0]
    assert "FIRING" in _text([parent]) and "broker 101; broker 102" in _text([parent])
    thread = _posts(harness.stand, thread_ts=parent.result["ts"])
    assert len(thread) == 1, "two alerts of one symptom: one diagnosis"
    answer = [c for c in harness.stand.called("chat.update") if c.args.get("ts") == thread[0].result["ts"]][-1]
    assert "Why UnderReplicatedPartitions?" in _text([answer])
    assert default_kb().failure_modes["broker-loss"].title in _text([answer])
    assert "Asked by Alertmanager for KafkaUnderReplicatedPartitions" in _text([answer])

    posts_before, updates_before = (
        len(harness.stand.called("chat.postMessage")),
        len(harness.stand.called("chat.update")),
    )
    assert (await _send(harness, _notification('{}:{alertname="URP"}', urp)))[0] == 200  # the repeat
    await _settled(harness)
    assert len(harness.stand.called("chat.postMessage")) == posts_before, "a repeat posted again"
    edits = [c for c in harness.stand.called("chat.update")[updates_before:] if c.args.get("ts") == parent.result["ts"]]
    assert len(edits) == 1 and "last notified" in _text(edits)
    assert [r["result"] for r in harness.audit("alert")] == ["opened", "updated"]


async def test_resolved_edits_the_parent_and_posts_a_closing_summary(harness, alert_env):
    await harness.start_bot()
    firing = [
        _alert(
            "KafkaUnderMinIsrPartitions", "fpA", symptom="UnderMinIsrPartitionCount", severity="critical", node_id="101"
        )
    ]
    await _send(harness, _notification("g-minisr", firing))
    await _settled(harness)
    parent = _posts(harness.stand, INCIDENTS, top=True)[0]  # critical routes to the incident channel
    resolved = [
        _alert(
            "KafkaUnderMinIsrPartitions",
            "fpA",
            "resolved",
            symptom="UnderMinIsrPartitionCount",
            severity="critical",
            node_id="101",
            ends="2026-11-23T02:03:12.000Z",
        )
    ]
    await _send(harness, _notification("g-minisr", resolved))
    await _settled(harness)
    edit = [c for c in harness.stand.called("chat.update") if c.args.get("ts") == parent.result["ts"]][-1]
    assert "RESOLVED" in _text([edit]) and "fired for 3m12s" in _text([edit])
    closing = _posts(harness.stand, thread_ts=parent.result["ts"])[-1]
    assert "Resolved after 3m12s" in closing.args["text"] and "broker 101" in closing.args["text"]
    # The same group firing again later is a new incident: a new thread.
    await _send(harness, _notification("g-minisr", firing))
    await _settled(harness)
    assert len(_posts(harness.stand, INCIDENTS, top=True)) == 2


async def test_unknown_alert_gets_a_thread_with_its_labels(harness, alert_env):
    await harness.start_bot()
    odd = [_alert("CoffeeMachineEmpty", "fpX", floor="3", node_id="none")]
    await _send(harness, _notification("g-coffee", odd))
    await _settled(harness)
    parent = _posts(harness.stand, DEFAULT, top=True)[0]
    reply = _posts(harness.stand, thread_ts=parent.result["ts"])[0]
    answer = [c for c in harness.stand.called("chat.update") if c.args.get("ts") == reply.result["ts"]][-1]
    assert "No runbook entry for CoffeeMachineEmpty" in _text([answer]) and "floor = 3" in _text([answer])


async def test_labels_scope_the_diagnosis_and_route_the_thread(harness, alert_env):
    await harness.start_bot()
    lso = [
        _alert(
            "KafkaLastStableOffsetLagGrowing",
            "fpL",
            symptom="LastStableOffsetLag",
            topic="payments-eu",
            partition="0",
            node_id="102",
        )
    ]
    await _send(harness, _notification("g-lso", lso))
    await _settled(harness)
    assert _posts(harness.stand, "C0PAYMENTS", top=True), "the topic route was not used"
    answered = {
        (r["command"], json.dumps(r["args"], sort_keys=True))
        for r in harness.audit("answer")
        if r.get("transport") == "alertmanager"
    }
    assert ("why", json.dumps({"symptom": "LastStableOffsetLag"})) in answered
    assert ("describe", json.dumps({"topic": "payments-eu"})) in answered


async def test_hostile_labels_are_escaped_and_never_become_command_text(harness, alert_env):
    await harness.start_bot()
    bad = [
        _alert(
            "KafkaUnderReplicatedPartitions",
            "fpH",
            symptom="UnderReplicatedPartitions",
            node_id="<!channel>",
            topic="x; rm -rf / --cluster prod",
        )
    ]
    await _send(harness, _notification("g-hostile", bad))
    await _settled(harness)
    everything = _text(harness.stand.called("chat.postMessage") + harness.stand.called("chat.update"))
    assert "<!channel>" not in everything and "&lt;!channel&gt;" in everything
    commands = [r["command"] for r in harness.audit("answer") if r.get("transport") == "alertmanager"]
    assert commands == ["why"]  # the invalid topic name scoped nothing


async def test_wrong_token_and_malformed_bodies_are_refused_with_one_log_line(harness, alert_env, caplog):
    await harness.start_bot()
    ok = _notification("g", [_alert("KafkaUnderReplicatedPartitions", "fp1")])
    caplog.set_level(logging.WARNING, logger="bot.alerts")
    assert (await _send(harness, ok, token=None))[0] == 401
    assert (await _send(harness, ok, token="not-the-token"))[0] == 401
    for raw in (
        b"{not json",
        b"[]",
        json.dumps({**ok, "version": "3"}).encode(),
        json.dumps({**ok, "alerts": []}).encode(),
    ):
        status, body = await _send(harness, None, raw=raw)
        assert status == 400 and "malformed notification" in body
    lines = [r.getMessage() for r in caplog.records if r.name == "bot.alerts"]
    assert len(lines) == 6 and all("\n" not in line for line in lines)
    assert not any(ALERT_TOKEN in line or "not-the-token" in line for line in lines)
    assert not harness.stand.called("chat.postMessage")


async def test_webhook_is_not_served_without_a_token(harness, monkeypatch):
    monkeypatch.delenv("KBOT_ALERT_TOKEN", raising=False)
    monkeypatch.delenv("KBOT_ALERT_ROUTES", raising=False)
    monkeypatch.delenv("KBOT_ALERT_CHANNEL", raising=False)
    await harness.start_bot()
    status, _ = await _send(harness, _notification("g", [_alert("A", "f")]))
    assert status in (404, 405)


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("routes: [{match: {severity: critical}}]", "routes[0].channel: must be a channel id"),
        ("routes: [{channel: C0X, when: {a: b}}]", "routes[0]: unknown key(s) when"),
        ("routes: [{channel: C0X, match_re: {topic: '('}}]", "routes[0].match_re.topic: not a regular expression"),
        ("routes: {channel: C0X}", "routes must be a list"),
        ("routes: [\n  - channel: [", "not valid YAML"),
    ],
)
def test_route_file_errors_are_one_clear_line(tmp_path, text, complaint):
    path = tmp_path / "routes.yaml"
    path.write_text(text)
    with pytest.raises(AlertConfigError) as err:
        AlertConfig.from_settings(load_settings({"KBOT_ALERT_TOKEN": "t", "KBOT_ALERT_ROUTES": str(path)}))
    assert complaint in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_config_needs_a_token_and_somewhere_to_post(tmp_path):
    assert AlertConfig.from_settings(load_settings({})) is None
    with pytest.raises(AlertConfigError, match="KBOT_ALERT_TOKEN is not set"):
        AlertConfig.from_settings(load_settings({"KBOT_ALERT_CHANNEL": "C0X"}))
    with pytest.raises(AlertConfigError, match="nowhere to go"):
        AlertConfig.from_settings(load_settings({"KBOT_ALERT_TOKEN": "t"}))
    cfg = AlertConfig.from_settings(load_settings({"KBOT_ALERT_TOKEN": "t", "KBOT_ALERT_CHANNEL": "#kafka-alerts"}))
    assert cfg.route({"alertname": "x"}).channel == "#kafka-alerts"
    assert "token=" not in repr(cfg)  # a config object is safe to log


async def test_a_new_scope_in_an_open_group_adds_one_diagnosis(harness, alert_env):
    await harness.start_bot()
    first = [
        _alert("KafkaLastStableOffsetLagGrowing", "fp-a", symptom="LastStableOffsetLag", topic="orders", partition="0")
    ]
    await _send(harness, _notification("g-lso2", first))
    await _settled(harness)
    parent = _posts(harness.stand, DEFAULT, top=True)[0]
    replies = len(_posts(harness.stand, thread_ts=parent.result["ts"]))
    both = first + [
        _alert(
            "KafkaLastStableOffsetLagGrowing", "fp-b", symptom="LastStableOffsetLag", topic="invoices", partition="2"
        )
    ]
    await _send(harness, _notification("g-lso2", both))
    await _settled(harness)
    assert len(_posts(harness.stand, DEFAULT, top=True)) == 1, "the group's thread is reused"
    new = _posts(harness.stand, thread_ts=parent.result["ts"])[replies:]
    assert len(new) == replies, "the new topic gets its own diagnosis (why + describe), once"
    topics = [r["args"].get("topic") for r in harness.audit("answer") if r.get("command") == "describe"]
    assert topics == ["orders", "invoices"]
    edit = [c for c in harness.stand.called("chat.update") if c.args.get("ts") == parent.result["ts"]][-1]
    assert "2 alerts firing" in _text([edit]) and "topic invoices" in _text([edit])


async def test_threads_survive_a_restart_of_the_bot(harness, alert_env):
    await harness.start_bot()
    alert = _alert("KafkaUnderMinIsrPartitions", "fp-r", symptom="UnderMinIsrPartitionCount", node_id="102")
    await _send(harness, _notification("g-restart", [alert]))
    await _settled(harness)
    parent = _posts(harness.stand, DEFAULT, top=True)[0]
    await harness.start_bot()  # a new process on the same state dir
    resolved = {**alert, "status": "resolved", "endsAt": "2026-11-23T02:10:00.000Z"}
    await _send(harness, _notification("g-restart", [resolved]))
    await _settled(harness)
    assert len(_posts(harness.stand, DEFAULT, top=True)) == 1
    edit = [c for c in harness.stand.called("chat.update") if c.args.get("ts") == parent.result["ts"]][-1]
    assert "RESOLVED" in _text([edit]) and "fired for 10m00s" in _text([edit])


async def test_notifications_are_counted_in_the_metrics(harness, alert_env):
    from prometheus_client.parser import text_string_to_metric_families

    await harness.start_bot()
    alert = [_alert("KafkaUnderReplicatedPartitions", "fp-m", symptom="UnderReplicatedPartitions", node_id="101")]
    for _ in range(2):
        await _send(harness, _notification("g-metrics", alert))
        await _settled(harness)
    async with harness.session.get(harness.url.replace("/slack/events", "/metrics")) as r:
        text = await r.text()
    counted = {
        s.labels["result"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "kbot_alert_notifications_total"
    }
    assert counted == {"opened": 1.0, "updated": 1.0}


def test_alert_threads_live_in_the_state_database_and_an_old_store_is_imported_once(tmp_path):
    import sqlite3
    from contextlib import closing

    from bot.alerts import Thread, ThreadStore
    from gate.state_db import state_db

    old = tmp_path / ThreadStore.OLD_FILE
    kept = Thread("prod/URP", "C1", "1700000000.000100", 1700000000.0, diagnosed=["why URP"])
    with closing(sqlite3.connect(old)) as conn:
        conn.execute("CREATE TABLE threads (group_key TEXT PRIMARY KEY, data TEXT NOT NULL)")
        conn.execute("INSERT INTO threads VALUES (?, ?)", (kept.group_key, json.dumps(kept.__dict__)))
        conn.commit()

    db = state_db(tmp_path)
    store = ThreadStore(db)
    assert store.get("prod/URP") == kept  # the thread an earlier version opened is still updated
    assert not old.exists() and (tmp_path / (ThreadStore.OLD_FILE + ".imported")).exists()

    newer = Thread("prod/URP", "C1", "1700000000.000100", 1700000000.0, diagnosed=["why URP", "why offline"])
    store.put(newer)
    assert ThreadStore(db).get("prod/URP") == newer  # a second start imports nothing over it
    with closing(db.connect()) as conn:
        assert conn.execute("SELECT count(*) FROM alert_threads").fetchone() == (1,)
