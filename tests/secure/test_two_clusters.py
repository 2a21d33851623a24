"""One bot, two clusters: a plain one-broker cluster and the secured three-broker one, both in one
clusters.yaml. The terminal picks with --cluster, Slack text with @name or the channel's mapping,
and every answer and audit record is about the cluster asked for."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from waiting import async_wait_until, wait_until

from bot.cluster_routing import Routed, Routing, route
from commands.registry import ROUTER, answer
from framework.dispatch import Answer, run_request
from framework.followup import parse_request
from kbot_settings import load as load_settings
from localkafka.secure import config_entry
from tests.secure.securekit import write_clusters_file

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def two(secure, second_kafka_cluster, kbot_env, tmp_path):
    clusters = {
        "plain": {
            "bootstrap": second_kafka_cluster.bootstrap_servers,
            "expected_brokers": sorted(second_kafka_cluster.brokers),
        },
        "secure": config_entry(secure),
    }
    path = tmp_path / "two.yaml"
    path.write_text("")
    write_clusters_file(path, clusters)
    # no default: with two clusters a command must say which one
    text = path.read_text().replace("default: plain\n", "")
    path.write_text(text + "channels:\n  C0SECURE: secure\n")
    return {**kbot_env, "KBOT_CLUSTERS_FILE": str(path)}


def kbot(env: dict, *args: str) -> tuple[int, str, str]:
    res = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return res.returncode, res.stdout, res.stderr


async def _answer_routed(routed: Routed, ctx, channel: str) -> Answer:
    """As the Slack intake answers a routed request: the cluster bound on the parsed request."""
    request = parse_request(routed.text, None, user="U0ALICE", channel=channel, router=ROUTER, cluster=routed.cluster)
    return request if isinstance(request, Answer) else await run_request(request, ctx)


def _brokers_in(status_json: str) -> str:
    doc = json.loads(status_json)
    return next(e["value"] for e in doc["evidence"] if e["label"].lower().startswith("brokers"))


def test_the_terminal_picks_the_cluster_with_dash_dash_cluster(two):
    rc, out, err = kbot(two, "ask", "--cluster", "plain", "--json", "status")
    assert rc == 0, err
    plain = _brokers_in(out)
    rc, out, err = kbot(two, "ask", "--cluster", "secure", "--json", "status")
    assert rc == 0, err
    secure = _brokers_in(out)
    assert plain.startswith("1 ") and secure.startswith("3 "), (plain, secure)
    rc, _out, err = kbot(two, "ask", "--cluster", "staging", "status")
    assert rc == 2 and "unknown Kafka cluster 'staging'; configured clusters: plain, secure" in err


def test_without_a_cluster_the_terminal_says_which_exist(two):
    rc, out, err = kbot(two, "ask", "status")
    assert rc == 1
    assert "several Kafka clusters are configured but none is the default" in out + err
    assert "plain, secure" in out + err


async def test_slack_text_is_routed_to_the_named_or_mapped_cluster(two, tmp_path):
    from framework.context import Context
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore
    from live.gateway import UnknownTopic
    from live.pool import GatewayPool

    routing = Routing.from_settings(load_settings(two))
    assert routing.clusters == ("plain", "secure") and routing.channels == {"C0SECURE": "secure"}
    asked = route("status", "C0OTHER", routing)
    assert not isinstance(asked, Routed) and asked.title == "Which cluster?"

    audit = AuditLog(tmp_path / "two-state" / "audit.jsonl")
    ctx = Context(
        live=GatewayPool(load_settings(two)),
        gate=ConfirmationGate(PendingStore(tmp_path / "two-state" / "p.sqlite3"), audit, router=ROUTER),
    )
    try:
        by_name = route("@plain status --json", "C0OTHER", routing)
        by_channel = route("status --json", "C0SECURE", routing)
        assert (by_name.cluster, by_channel.cluster) == ("plain", "secure")
        plain = await _answer_routed(by_name, ctx, "C0OTHER")
        secure = await _answer_routed(by_channel, ctx, "C0SECURE")
        assert plain.outcome == secure.outcome == "answered"
        assert ctx.live.connected() == [("plain", "observer"), ("secure", "observer")]

        # the same action on each cluster: the audit log names the cluster of every step
        for cluster, channel in (("plain", "C0OTHER"), ("secure", "C0SECURE")):
            topic = f"audited-{uuid.uuid4().hex[:6]}"
            gw = await ctx.live.get(cluster)
            _create(cluster, topic, two)
            # the bot's own (observer) gateway: the broker it asks may learn about the topic a moment
            # after the one that created it
            await async_wait_until(
                functools.partial(gw.describe_topics, [topic]),
                30,
                f"{topic} to become visible to {gw.name}",
                interval=0.3,
                ignore=(UnknownTopic,),
            )
            preview = await _answer_routed(route(f"@{cluster} retention {topic} 3d", channel, routing), ctx, channel)
            token = next((a.command.split()[1] for a in preview.reply.actions if a.label == "Confirm"), None)
            assert token, (cluster, preview.reply.verdict, [(e.label, e.value) for e in preview.reply.evidence])
            done = await answer(f"confirm {token}", ctx, user="U0ALICE", channel=channel)
            assert done.reply.severity != "error", done.reply.verdict
            assert gw.name == cluster
        lines = [r for r in audit.read() if r.get("kind") == "retention"]
        by_cluster = {}
        for r in lines:
            by_cluster.setdefault(r["cluster"], set()).add(r["event"])
        assert set(by_cluster) == {"plain", "secure"}
        assert all({"preview", "execution"} <= events for events in by_cluster.values()), by_cluster
        # retention is a config change: it runs as the config principal, never the operator
        assert ("plain", "config") in ctx.live.connected() and ("secure", "config") in ctx.live.connected()
        assert ("secure", "operator") not in ctx.live.connected()
    finally:
        await ctx.live.close()
        audit.close()


async def test_the_digest_is_per_cluster(two):
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(two))
    try:
        ctx = Context(live=pool)
        plain = await answer("digest --cluster plain --json", ctx, user="U0ALICE")
        secure = await answer("digest --cluster secure --json", ctx, user="U0ALICE")
        assert plain.outcome == secure.outcome == "answered"
        assert "plain" in json.dumps(plain.reply.to_dict()) and "secure" in json.dumps(secure.reply.to_dict())
    finally:
        await pool.close()


def _create(cluster: str, topic: str, env: dict) -> None:
    """The topic, made from outside the bot with the cluster's own admin settings."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from live.config import get_cluster

    conf = get_cluster(cluster, load_settings(env))
    if conf.uses_sasl:  # the observer may not create topics: make it as the cluster's super user
        from localkafka.testing import secure_test_cluster

        admin = secure_test_cluster().admin()
        rf = 3
    else:
        admin = AdminClient(conf.confluent_conf())
        rf = 1
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)

    def led() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and bool(md.partitions) and md.partitions[0].leader >= 0

    # created on the controller; wait until a broker serves it
    wait_until(led, 30, f"{topic} to have a leader on {cluster}", interval=0.3)
