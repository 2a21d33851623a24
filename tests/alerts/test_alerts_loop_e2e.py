"""The whole alert loop with the real things: the local Kafka cluster's JMX exporters, Prometheus with
the shipped rules, Alertmanager, the bot's webhook, the Slack stand-in. Kill a broker (a signal from
outside): a thread with the broker-loss diagnosis appears; heal it: the thread is marked resolved.

Prometheus and Alertmanager run as our own processes on free loopback ports (bot/alerts_stack.py),
with intervals of seconds and the rules' `for` shortened to 2 s (the expressions are the shipped ones)."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from waiting import async_wait_until

from bot.alerts_stack import FAST, AlertStack
from kbot_settings import load as load_settings
from live.pool import GatewayPool
from localkafka.cluster import ClusterError
from runbook_kb import default_kb

pytestmark = pytest.mark.kafka

TOKEN = "e2e-alert-token-2f9c41"
CHANNEL = "C0KAFKAALERTS"
VICTIM = 103


def _text(calls) -> str:
    return json.dumps([c.args for c in calls])


async def _prometheus_sees_all_targets(http, stack: AlertStack, n: int) -> bool:
    async with http.get(stack.prometheus_url + "/api/v1/query", params={"query": 'up{job="kafka"}'}) as r:
        result = (await r.json())["data"]["result"]
    return len(result) == n and all(s["value"][1] == "1" for s in result)


def _parent(stand, alertname: str):
    return next(
        (
            c
            for c in stand.called("chat.postMessage")
            if c.result.get("channel") == CHANNEL and not c.args.get("thread_ts") and alertname in _text([c])
        ),
        None,
    )


async def test_broker_kill_opens_a_diagnosed_thread_and_healing_resolves_it(
    harness, kafka_cluster, monkeypatch, tmp_path
):
    if shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None:
        pytest.skip("prometheus / prometheus-alertmanager not installed: run scripts/setup.sh")
    monkeypatch.setenv("KBOT_ALERT_TOKEN", TOKEN)
    monkeypatch.setenv("KBOT_ALERT_CHANNEL", CHANNEL)
    monkeypatch.delenv("KBOT_ALERT_ROUTES", raising=False)
    await harness.start_bot()
    harness.bot.ctx.live = GatewayPool(
        load_settings(
            {
                "KBOT_BOOTSTRAP": kafka_cluster.bootstrap_servers,
                "KBOT_EXPECTED_BROKERS": ",".join(map(str, kafka_cluster.brokers)),
            }
        )
    )
    await asyncio.to_thread(kafka_cluster.faults.create_topic, "alerts-e2e", 3, 3)
    stack = AlertStack(
        tmp_path / "stack",
        kafka_cluster.metrics_urls,
        harness.url.replace("/slack/events", "/alerts/alertmanager"),
        TOKEN,
        timing=FAST,
    )
    await asyncio.to_thread(stack.start, 90)
    stand = harness.stand
    t0 = asyncio.get_running_loop().time()
    phases = {}  # seconds from the start of the stack, printed for the report (pytest -s)

    def mark(name: str) -> None:
        phases[name] = round(asyncio.get_running_loop().time() - t0, 1)

    try:
        await async_wait_until(
            lambda: _prometheus_sees_all_targets(harness.session, stack, len(kafka_cluster.metrics_urls)),
            90,
            "Prometheus scraping every node",
            interval=0.5,
        )
        assert _parent(stand, "KafkaUnderReplicatedPartitions") is None  # healthy: no thread yet
        mark("scraping")

        await asyncio.to_thread(kafka_cluster.faults.kill_broker, VICTIM)  # SIGKILL, from outside

        async def diagnosed():
            parent = _parent(stand, "KafkaUnderReplicatedPartitions")
            if parent is None:
                return None
            replies = {c.result["ts"] for c in stand.thread_replies(parent.result["ts"])}
            answers = [
                c
                for c in stand.called("chat.update")
                if c.args.get("ts") in replies and "Why UnderReplicatedPartitions?" in _text([c])
            ]
            return (parent, answers[-1]) if answers else None

        mark("killed")
        parent, answer = await async_wait_until(
            diagnosed, 150, "a thread for KafkaUnderReplicatedPartitions with its diagnosis", interval=0.5
        )
        mark("diagnosed")
        text = _text([answer])
        first = default_kb().failure_modes["broker-loss"].title
        assert first in text and str(VICTIM) in text, text[:2000]
        assert text.index(first) < min(
            text.index(t.title)
            for t in default_kb().failure_modes.values()
            if t.id != "broker-loss" and t.title in text
        )
        assert "FIRING" in _text([parent])

        try:
            await asyncio.to_thread(kafka_cluster.faults.heal)  # restarts the killed broker
        except ClusterError as exc:
            # heal() also waits for every exporter to answer, which a loaded machine can make slow;
            # what this test needs is the broker back in the ISRs, which the resolution below shows.
            print(f"heal: {exc}")
        mark("healed")

        async def resolved():
            edits = [
                c
                for c in stand.called("chat.update")
                if c.args.get("ts") == parent.result["ts"] and "RESOLVED" in _text([c])
            ]
            closing = [c for c in stand.thread_replies(parent.result["ts"]) if "Resolved after" in _text([c])]
            return edits and closing

        await async_wait_until(resolved, 180, "the URP thread marked resolved after healing", interval=0.5)
        mark("resolved")
        print(f"alert loop phases (s): {phases}")
        results = [r["result"] for r in harness.audit("alert") if "UnderReplicated" in r.get("alertname", "")]
        assert results[0] == "opened" and "resolved" in results
        assert (
            len(
                [
                    c
                    for c in stand.called("chat.postMessage")
                    if c.result.get("channel") == CHANNEL
                    and not c.args.get("thread_ts")
                    and "KafkaUnderReplicatedPartitions" in _text([c])
                ]
            )
            == 1
        ), "one group, one thread"
    finally:
        await asyncio.to_thread(stack.stop)
        await harness.bot.ctx.live.close()
        harness.bot.ctx.live = None
