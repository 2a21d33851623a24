"""The bot's own health: GET /healthz (does what the bot depends on work?) and GET /metrics.

/healthz probes each component the bot is configured to use, with short timeouts, and caches the
result for a few seconds so a load balancer may call it as often as it likes:

    kafka   the admin gateway of the default cluster answers describe_cluster
    lake    the metric lake's Spark session started (or is starting); a failed start is down
    slack   the Web API answers auth.test with our token

200 with one JSON object per component when every configured one works, 503 when one is down. A
component that is not configured says so and does not count.

Neither has auth, so both answer on KBOT_HEALTH_HOST only (default 127.0.0.1): they share KBOT_PORT
with the Slack endpoint, which listens on every address, and a request that came in on another
address gets 403, as if they were bound to that address alone. 0.0.0.0 exposes them.

/metrics is the Prometheus text format (prometheus_client, one registry per bot so several bots in
one process, as in the tests, do not collide): requests and answer latency by command and outcome,
the delivery queues' depth, posts retried after a 429 and posts that failed, gate decisions, alert
notifications. Requests, latency, failures and gate decisions are read off the audit stream, the one
place where every request, refusal and gate step is already recorded with its outcome.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0  # per component: a load balancer gives /healthz a few seconds at most
CACHE_S = 5.0
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)
# Audit events that are gate decisions (gate/confirmation.py writes them), and the outcome label each gets.
GATE_EVENTS = {
    "preview": "preview",
    "approval": "approval",
    "execution": "execution",
    "cancel": "cancel",
    "expiry": "expiry",
    "reconciled": "reconciled",
}


@dataclass
class Component:
    status: str  # ok | down | not_configured
    detail: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"status": self.status, "detail": self.detail, "seconds": round(self.seconds, 3)}


async def _timed(probe, timeout_s: float) -> Component:
    started = time.monotonic()
    try:
        comp = await asyncio.wait_for(probe(), timeout_s)
    except asyncio.TimeoutError:
        comp = Component("down", f"no answer within {timeout_s:g} s")
    except Exception as exc:  # a probe's failure is the finding, never a 500
        comp = Component("down", f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    comp.seconds = time.monotonic() - started
    return comp


class Health:
    """The probes of one bot, cached ``cache_s``; concurrent callers share one round of probes."""

    def __init__(self, bot, *, timeout_s: float = PROBE_TIMEOUT_S, cache_s: float = CACHE_S):
        self.bot, self.timeout_s, self.cache_s = bot, timeout_s, cache_s
        self._last: tuple[float, dict[str, Component]] | None = None
        self._lock = asyncio.Lock()

    async def _kafka(self) -> Component:
        live = self.bot.ctx.live
        if live is None:
            return Component("not_configured", "no Kafka cluster configured (KBOT_BOOTSTRAP or clusters.yaml)")
        gateway = await live.get(None)
        info = await gateway.describe_cluster()
        brokers = getattr(info, "brokers", None)
        return Component("ok", f"cluster {gateway.name}: {len(brokers) if brokers is not None else '?'} brokers")

    async def _lake(self) -> Component:
        lake = self.bot.ctx.lake
        if lake is None:
            return Component("not_configured", "no metric lake (KBOT_LAKE=0 or not started)")
        state = str(getattr(lake, "state", "unknown"))
        if state in ("ready", "starting", "new"):
            return Component("ok", f"Spark {state}")
        status = lake.status() if hasattr(lake, "status") else {}
        return Component("down", f"Spark {state}: {status.get('error') or 'not available'}")

    async def _slack(self) -> Component:
        if not self.bot.settings.bot_token:
            return Component("not_configured", "no SLACK_BOT_TOKEN")
        resp = await self.bot.client.auth_test()
        return Component("ok", f"team {resp.get('team_id')}")

    async def check(self) -> dict[str, Component]:
        async with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last[0] < self.cache_s:
                return self._last[1]
            names = ("kafka", "lake", "slack")
            results = await asyncio.gather(*(_timed(getattr(self, "_" + n), self.timeout_s) for n in names))
            comps = dict(zip(names, results))
            self._last = (time.monotonic(), comps)
            return comps

    async def handle(self, _request: web.Request) -> web.Response:
        comps = await self.check()
        healthy = all(c.status != "down" for c in comps.values())
        body = {"status": "ok" if healthy else "down", "components": {n: c.as_dict() for n, c in comps.items()}}
        return web.json_response(body, status=200 if healthy else 503)


class Metrics:
    """The bot's Prometheus metrics. Counters fed by the audit stream; gauges read at scrape time."""

    def __init__(self, bot):
        self.bot = bot
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "kbot_requests",
            "Requests answered or refused, by transport, command and outcome",
            ["transport", "command", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "kbot_answer_seconds",
            "Time from a request to its delivered answer",
            ["transport", "command"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.failed = Counter(
            "kbot_posts_failed",
            "Answers that could not be posted after their retries",
            ["step"],
            registry=self.registry,
        )
        self.gate = Counter(
            "kbot_gate_decisions",
            "Confirmation gate steps (preview, approval, execution, refusal ...)",
            ["event", "outcome"],
            registry=self.registry,
        )
        self.alerts = Counter(
            "kbot_alert_notifications",
            "Alertmanager notifications received, by how they were handled",
            ["result"],
            registry=self.registry,
        )
        self.registry.register(_LiveState(bot))

    def observe(self, event: str, fields: dict[str, Any]) -> None:
        """One audit record: count what it says. Never raises (the audit write must not fail on us)."""
        try:
            transport = str(fields.get("transport") or "unknown")
            if event == "answer":
                command, outcome = str(fields.get("command") or "?"), str(fields.get("outcome") or "?")
                self.requests.labels(transport, command, outcome).inc()
                if fields.get("latency_ms") is not None and fields.get("delivered") not in ("failed", "pointer"):
                    self.latency.labels(transport, command).observe(float(fields["latency_ms"]) / 1000.0)
                if fields.get("delivered") == "failed":
                    self.failed.labels(str(fields.get("step") or "answer")).inc()
            elif event == "refusal" and fields.get("step") not in ("confirm", "cancel"):
                self.requests.labels(transport, str(fields.get("command") or "?"), "refused").inc()
            if event in GATE_EVENTS or (event == "refusal" and fields.get("step") in ("confirm", "cancel")):
                outcome = (
                    fields.get("state")
                    or fields.get("outcome")
                    or fields.get("code")
                    or ("complete" if fields.get("complete") else "ok")
                )
                self.gate.labels(event, str(outcome)).inc()
            if event == "alert":
                self.alerts.labels(str(fields.get("result") or "?")).inc()
        except Exception:  # a metric must never break an audit write
            log.debug("metrics: could not count an audit record", exc_info=True)

    async def handle(self, _request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


class _LiveState:
    """Read at scrape time: the delivery queues' depth and the 429s they waited out."""

    def __init__(self, bot):
        self.bot = bot

    def describe(self):
        return []

    def collect(self):
        queues = getattr(self.bot.delivery, "queues", {})
        depth = GaugeMetricFamily("kbot_delivery_queue_depth", "Slack calls waiting in the per-channel delivery queues")
        depth.add_metric([], float(sum(len(q.jobs) for q in queues.values())))
        yield depth
        busiest = GaugeMetricFamily("kbot_delivery_queue_depth_max", "Deepest per-channel delivery queue")
        busiest.add_metric([], float(max((len(q.jobs) for q in queues.values()), default=0)))
        yield busiest
        retried = CounterMetricFamily("kbot_posts_retried", "Slack calls retried after a 429 (Retry-After waited out)")
        retried.add_metric([], float(getattr(self.bot.delivery, "rate_limited", 0)))
        yield retried
        yield GaugeMetricFamily("kbot_requests_in_flight", "Requests being worked on", value=float(len(self.bot.tasks)))


def tap_audit(audit, metrics: Metrics) -> None:
    """Count every audit record as it is written: the audit log is where each request's outcome,
    each refusal and each gate step is recorded, so the metrics cannot disagree with it."""
    write = audit.write
    if getattr(write, "_kbot_metrics", None) is not None:  # already tapped (an audit log shared by two bots)
        write = write._kbot_inner

    async def tapped(event: str, **fields):
        metrics.observe(event, fields)
        return await write(event, **fields)

    tapped._kbot_metrics, tapped._kbot_inner = metrics, write
    audit.write = tapped


def _local_address(request: web.Request) -> IPv4Address | IPv6Address | None:
    """The address of ours the request came in on (not the peer's)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport is not None else None
    try:
        local = ip_address(sockname[0].split("%")[0]) if isinstance(sockname, tuple) else None
    except ValueError:
        return None
    if isinstance(local, IPv6Address) and local.ipv4_mapped is not None:  # a dual-stack socket
        return local.ipv4_mapped
    return local


def answering_on(host: IPv4Address | IPv6Address, handler):
    """``handler`` as if it listened on ``host`` alone (every address when it is 0.0.0.0 or ::)."""
    if host.is_unspecified:
        return handler

    async def guarded(request: web.Request) -> web.StreamResponse:
        if _local_address(request) != host:
            return web.Response(status=403, text=f"{request.path} answers on {host} only (KBOT_HEALTH_HOST)\n")
        return await handler(request)

    return guarded


def install(bot, app: web.Application) -> None:
    """GET /healthz and GET /metrics on the bot's web app, answering on KBOT_HEALTH_HOST only."""
    bot.health = Health(bot)
    bot.metrics = Metrics(bot)
    tap_audit(bot.audit, bot.metrics)
    host = bot.settings.kbot.kbot_health_host
    app.router.add_get("/healthz", answering_on(host, bot.health.handle))
    app.router.add_get("/metrics", answering_on(host, bot.metrics.handle))
