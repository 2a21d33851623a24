"""GET /healthz says whether Kafka, the lake and Slack work (200 / 503, per component, fast and
cached); GET /metrics counts requests, latency, queue depth, retried and failed posts, gate steps."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kbot_settings import load as load_settings
from live.pool import GatewayPool


def _closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _get(h, path: str):
    url = h.url.replace("/slack/events", path)
    started = time.monotonic()
    async with h.session.get(url) as r:
        body = await r.json() if r.content_type == "application/json" else await r.text()
        return r.status, body, time.monotonic() - started


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_healthz_is_ok_when_what_is_configured_works(harness):
    await harness.start_bot()
    status, body, _ = await _get(harness, "/healthz")
    assert status == 200 and body["status"] == "ok"
    assert body["components"]["slack"]["status"] == "ok"
    assert body["components"]["kafka"]["status"] == "not_configured"  # the harness has no cluster: not counted
    assert body["components"]["lake"]["status"] == "not_configured"


async def test_healthz_is_503_when_slack_refuses_the_token_and_caches_for_a_few_seconds(harness):
    await harness.start_bot()
    harness.stand.fail("auth.test", "invalid_auth", times=50)
    status, body, _ = await _get(harness, "/healthz")
    assert status == 503 and body["components"]["slack"]["status"] == "down"
    assert "invalid_auth" in body["components"]["slack"]["detail"]
    calls = len([c for c in harness.stand.calls if c.method == "auth.test"])
    for _ in range(5):  # a load balancer polling: answered from the cache
        assert (await _get(harness, "/healthz"))[0] == 503
    assert len([c for c in harness.stand.calls if c.method == "auth.test"]) == calls


async def test_healthz_is_503_and_fast_when_the_configured_kafka_is_unreachable(harness):
    await harness.start_bot()
    harness.bot.ctx.live = GatewayPool(load_settings({"KBOT_BOOTSTRAP": f"127.0.0.1:{_closed_port()}"}), timeout_s=5)
    status, body, seconds = await _get(harness, "/healthz")
    assert status == 503 and body["components"]["kafka"]["status"] == "down"
    assert seconds < 5, f"/healthz took {seconds:.1f} s"  # bounded by the probe timeout, not the admin one
    await harness.bot.ctx.live.close()
    harness.bot.ctx.live = None


@pytest.mark.kafka
async def test_healthz_sees_the_real_cluster(harness, kafka_cluster):
    await harness.start_bot()
    harness.bot.ctx.live = GatewayPool(load_settings({"KBOT_BOOTSTRAP": kafka_cluster.bootstrap_servers}))
    try:
        status, body, _ = await _get(harness, "/healthz")
        assert status == 200 and body["components"]["kafka"]["status"] == "ok"
        assert f"{len(kafka_cluster.brokers)} brokers" in body["components"]["kafka"]["detail"]
    finally:
        await harness.bot.ctx.live.close()
        harness.bot.ctx.live = None


async def test_metrics_count_requests_latency_gate_steps_and_retried_posts(harness):
    await harness.start_bot()
    harness.stand.rate_limit("chat.postMessage", retry_after=1, times=1)
    assert (await harness.slash("help"))[0] == 200
    await harness.stand.wait_for(lambda: harness.stand.called("chat.update"), timeout_s=30)
    await harness.bot.drain(30)
    await harness.preview("fake-bump orders")
    status, text, _ = await _get(harness, "/metrics")
    assert status == 200
    s = _samples(text)
    assert _value(s, "kbot_requests_total", transport="slack", command="help", outcome="answered") == 1
    assert _value(s, "kbot_answer_seconds_count", transport="slack", command="help") == 1
    assert _value(s, "kbot_answer_seconds_sum", transport="slack", command="help") > 0
    assert _value(s, "kbot_gate_decisions_total", event="preview", outcome="ok") == 1
    assert _value(s, "kbot_posts_retried_total") == 1  # the 429 the queue waited out
    assert ("kbot_delivery_queue_depth", ()) in s


async def test_metrics_count_a_post_that_failed(harness, monkeypatch):
    import bot.delivery as delivery

    monkeypatch.setattr(delivery, "MAX_RATE_LIMITED", 2)
    await harness.start_bot()
    # the working message outlasts its retries, then the private answer is refused too: a mention
    # has no response_url to fall back to, so the answer is lost and must be counted
    harness.stand.rate_limit("chat.postMessage", retry_after=0, times=3)
    harness.stand.fail("chat.postEphemeral", "channel_not_found")
    mention = {"type": "app_mention", "user": "U0ALICE", "channel": "C0OPS", "ts": "1700000029.000001"}
    assert (await harness.event({**mention, "text": "<@U0BOT> help"}))[0] == 200
    await harness.stand.wait_for(lambda: harness.audit("answer"), timeout_s=60)
    await harness.bot.drain(60)
    s = _samples((await _get(harness, "/metrics"))[1])
    assert _value(s, "kbot_posts_failed_total", step="working message and private answer") == 1
    assert _value(s, "kbot_requests_total", transport="slack", command="help", outcome="failed") == 1


async def test_a_working_message_that_fails_is_answered_privately_and_not_counted_lost(harness, monkeypatch):
    import bot.delivery as delivery

    monkeypatch.setattr(delivery, "MAX_RATE_LIMITED", 2)
    await harness.start_bot()
    harness.stand.rate_limit("chat.postMessage", retry_after=0, times=3)
    assert (await harness.slash("help"))[0] == 200
    await harness.stand.wait_for(
        lambda: harness.stand.called("response_url") or harness.stand.called("chat.postEphemeral"), timeout_s=60
    )
    await harness.bot.drain(60)
    s = _samples((await _get(harness, "/metrics"))[1])
    assert _value(s, "kbot_posts_failed_total", step="working message") == 0
    assert _value(s, "kbot_requests_total", transport="slack", command="help", outcome="answered") == 1


async def test_healthz_probes_run_concurrently_with_requests(harness):
    """Many callers at once share one round of probes."""
    await harness.start_bot()
    results = await asyncio.gather(*(_get(harness, "/healthz") for _ in range(10)))
    assert {r[0] for r in results} == {200}
    assert len([c for c in harness.stand.calls if c.method == "auth.test"]) == 1


async def test_healthz_is_503_when_the_metric_lake_failed_to_start(harness):
    from lake.service import LakeService

    await harness.start_bot()
    lake = LakeService.from_settings(load_settings({}), master=f"sc://127.0.0.1:{_closed_port()}", warm=False)
    try:
        # the lake's Connect sessions fail fast (lake/spark.py fail_fast): a closed port is down in seconds
        assert not await lake.wait_ready(120) and lake.state == "failed", lake.status()
        harness.bot.ctx.lake = lake
        status, body, _ = await _get(harness, "/healthz")
        assert status == 503 and body["components"]["lake"]["status"] == "down"
        assert "Spark Connect" in body["components"]["lake"]["detail"]
    finally:
        harness.bot.ctx.lake = None
        lake.stop()
