"""Every gated action against the secured cluster, end to end through the confirmation gate:
preview (reads as the observer, validate_only as the operator) -> confirm -> execute as the
operator -> the change read back by the super user from outside the bot -> the audit log names
the cluster of every step."""

from __future__ import annotations

import uuid

import pytest
from waiting import wait_until

from bot.render import render_json
from commands.registry import ROUTER, answer
from kbot_settings import load as load_settings
from localkafka.secure import CONFIG, OPERATOR
from localkafka.testing import read_committed
from tests.secure.securekit import skewed_topic

pytestmark = pytest.mark.kafka


def _token(result) -> str:
    for action in result.reply.actions:
        if action.label == "Confirm":
            return action.command.split()[1]
    raise AssertionError(
        f"no Confirm in the preview: {result.reply.verdict} {[e.value for e in result.reply.evidence]}"
    )


async def preview_and_confirm(ctx, text: str, requester: str = "U0ALICE", approver: str = "U0ALICE"):
    preview = await answer(text, ctx, user=requester)
    assert preview.outcome == "answered", preview.reply.verdict
    done = await answer(f"confirm {_token(preview)}", ctx, user=approver)
    return preview, done


def _audit(ctx) -> list[dict]:
    return ctx.gate.audit.read()


def _assert_audited(ctx, kind: str):
    lines = [r for r in _audit(ctx) if r.get("kind") == kind]
    events = [r["event"] for r in lines]
    assert "preview" in events and "execution" in events, events
    assert {r["cluster"] for r in lines} == {"secure"}, lines


def _topic_config(secure, topic: str, key: str) -> str | None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = secure.admin().describe_configs([res])[res].result(30)
    return entries[key].value if key in entries else None


async def test_retention_runs_as_the_operator_after_confirmation(ctx, secure, topic):
    before = _topic_config(secure, topic, "retention.ms")
    assert before != str(14 * 86_400_000)
    preview = await answer(f"retention {topic} 14d", ctx, user="U0ALICE")
    assert preview.outcome == "answered" and "accepted by the broker" in render_json(preview.reply)
    assert _topic_config(secure, topic, "retention.ms") == before  # nothing changed yet
    done = await answer(f"confirm {_token(preview)}", ctx, user="U0ALICE")
    assert done.reply.severity != "error", done.reply.verdict
    wait_until(
        lambda: _topic_config(secure, topic, "retention.ms") == str(14 * 86_400_000),
        30,
        "retention.ms read back",
        interval=0.5,
    )
    changed_by = await ctx.live.config("secure")
    assert changed_by.config.sasl_username == CONFIG and ("secure", "config") in ctx.live.connected()
    assert ("secure", "operator") not in ctx.live.connected(), "a config change must not use the cluster ALTER"
    _assert_audited(ctx, "retention")


async def test_throttle_set_and_clear_as_the_operator(ctx, secure):
    _, done = await preview_and_confirm(ctx, "throttle set 50MB/s")
    assert done.reply.severity != "error", done.reply.verdict
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    def rate(b: int) -> str | None:
        res = ConfigResource(ResourceType.BROKER, str(b))
        e = secure.admin().describe_configs([res])[res].result(30).get("leader.replication.throttled.rate")
        return e.value if e is not None and e.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value else None

    wait_until(lambda: all(rate(b) == "50000000" for b in secure.brokers), 30, "the rate on every broker", interval=0.5)
    _, cleared = await preview_and_confirm(ctx, "throttle clear")
    assert cleared.reply.severity != "error", cleared.reply.verdict
    wait_until(lambda: all(rate(b) is None for b in secure.brokers), 30, "the rates removed", interval=0.5)
    _assert_audited(ctx, "throttle set")
    _assert_audited(ctx, "throttle clear")


async def test_elect_leaders_moves_leadership_back_as_the_operator(ctx, secure):
    name, preferred = skewed_topic(secure)
    _, done = await preview_and_confirm(ctx, f"elect-leaders {name}")
    assert done.reply.severity != "error", done.reply.verdict
    wait_until(
        lambda: secure.admin().list_topics(name, timeout=10).topics[name].partitions[0].leader == preferred,
        30,
        "the preferred replica to lead",
        interval=0.5,
    )
    _assert_audited(ctx, "elect-leaders")
    op = await ctx.live.operator("secure")
    assert op.config.sasl_username == OPERATOR and ("secure", "operator") in ctx.live.connected()


async def test_abort_txn_as_the_operator_with_a_second_approver(ctx, secure):
    name = f"txn-{uuid.uuid4().hex[:6]}"
    txn = secure.faults.hanging_transaction(name, 0, records=3)
    from confluent_kafka import Producer

    p = Producer({**secure.client_conf(), "acks": "all"})
    p.produce(name, value=b"after-the-hang", partition=0)
    assert p.flush(30) == 0
    preview, done = await preview_and_confirm(
        ctx, f"abort-txn {name} 0 --min-age-ms 0", requester="U0ALICE", approver="U0BOB"
    )
    assert done.reply.severity != "error", done.reply.verdict
    conf = {k: v for k, v in secure.client_conf().items() if k != "bootstrap.servers"}
    assert read_committed(secure.bootstrap_servers, name, 0, 30, want="after-the-hang", **conf) == ["after-the-hang"]
    assert txn["first_offset"] == 0
    _assert_audited(ctx, "abort-txn")


@pytest.mark.parametrize(
    "dropped, text, setting",
    [
        ("config", "retention {topic} 9d", "KBOT_CONFIG_SASL_USERNAME"),
        ("operator", "elect-leaders {topic}", "KBOT_OPERATOR_SASL_USERNAME"),
    ],
)
async def test_an_action_whose_principal_is_not_configured_is_refused_up_front(
    secure, topic, tmp_path, dropped, text, setting
):
    """The clusters file names no principal for the action's privilege level: the action is refused
    before its preview, saying what to set, and the cluster is untouched (nothing was tried with
    another principal's credentials - not the observer's, and not the other acting principal's)."""
    from framework.context import Context
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore
    from live.pool import GatewayPool
    from localkafka.secure import config_entry
    from tests.secure.securekit import write_clusters_file

    entry = {k: v for k, v in config_entry(secure).items() if k != dropped}
    clusters = write_clusters_file(tmp_path / "clusters.yaml", {"secure": entry})
    pool = GatewayPool(load_settings({"KBOT_CLUSTERS_FILE": str(clusters), "KBOT_ADMIN_TIMEOUT_S": "20"}))
    audit = AuditLog(tmp_path / "audit.jsonl")
    ctx = Context(live=pool, gate=ConfirmationGate(PendingStore(tmp_path / "pending.sqlite3"), audit, router=ROUTER))
    before = _topic_config(secure, topic, "retention.ms")
    try:
        result = await answer(text.format(topic=topic), ctx, user="U0ALICE")
        connected = pool.connected()
    finally:
        await pool.close()
        audit.close()
    assert result.outcome == "unavailable", result.reply.verdict
    assert f"no {dropped} principal is configured" in result.reply.verdict
    assert setting in result.reply.verdict and "refused for" not in result.reply.verdict
    assert not any(a.label == "Confirm" for a in result.reply.actions)
    assert _topic_config(secure, topic, "retention.ms") == before
    assert not any(role != "observer" for _cluster, role in connected), connected
