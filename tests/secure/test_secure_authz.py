"""A principal without a right gets one clear answer naming the missing operation and resource -
as an operator would grant it - never a raw exception. Each test makes its own SCRAM user with
exactly the ACLs it wants (conftest.make_principal) and points the bot's clusters.yaml at it."""

from __future__ import annotations

import uuid

import pytest

from bot.render import render_json, render_text
from commands.registry import ROUTER, answer
from kbot_settings import load as load_settings
from localkafka.secure import config_entry
from tests.secure.securekit import skewed_topic, write_clusters_file

pytestmark = pytest.mark.kafka

# What the real config principal and operator hold, minus what a test takes away (localkafka/secure.py GRANTS).
CONFIG_RIGHTS = {
    ("ALTER_CONFIGS", "TOPIC", "*"),
    ("ALTER_CONFIGS", "CLUSTER", "kafka-cluster"),
}
OPERATOR_RIGHTS = {
    ("ALTER", "CLUSTER", "kafka-cluster"),
    ("DESCRIBE", "TOPIC", "*"),
}


@pytest.fixture
def with_principals(secure, tmp_path, kbot_env):
    """with_principals(observer=None, config=None, operator=None) -> (env, user): clusters.yaml whose
    operator (or config principal, or observer) is a new user holding the given rights."""

    def make(make_principal, *, operator=None, observer=None, config=None):
        entry = config_entry(secure)
        user = None
        if config is not None:
            user, password = make_principal(*config)
            entry["config"] = {"sasl_username": user, "sasl_password": password}
        if operator is not None:
            user, password = make_principal(*operator)
            entry["operator"] = {"sasl_username": user, "sasl_password": password}
        if observer is not None:
            user, password = make_principal(*observer)
            entry["sasl_username"], entry["sasl_password"] = user, password
        path = write_clusters_file(tmp_path / f"clusters-{uuid.uuid4().hex[:6]}.yaml", {"secure": entry})
        return {**kbot_env, "KBOT_CLUSTERS_FILE": str(path)}, user

    return make


@pytest.fixture
async def ctx_for(tmp_path):
    from framework.context import Context
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore
    from live.pool import GatewayPool

    made = []

    def make(env):
        state = tmp_path / f"state-{len(made)}"
        audit = AuditLog(state / "audit.jsonl")
        ctx = Context(
            live=GatewayPool(load_settings(env)),
            gate=ConfirmationGate(PendingStore(state / "pending.sqlite3"), audit, router=ROUTER),
        )
        made.append((ctx, audit))
        return ctx

    yield make
    for ctx, audit in made:
        await ctx.live.close()
        audit.close()


def _confirm_token(result) -> str | None:
    return next((a.command.split()[1] for a in result.reply.actions if a.label == "Confirm"), None)


async def test_retention_without_alter_configs_on_the_topic(secure, topic, make_principal, with_principals, ctx_for):
    env, user = with_principals(make_principal, config=CONFIG_RIGHTS - {("ALTER_CONFIGS", "TOPIC", "*")})
    ctx = ctx_for(env)
    preview = await answer(f"retention {topic} 10d", ctx, user="U0ALICE")
    want = (
        f"the config principal needs ALTER_CONFIGS on TOPIC {topic}: incremental_alter_configs topic "
        f"'{topic}' retention.ms was refused for User:{user} on cluster 'secure'"
    )
    dry_run = {e.label: e.value for e in preview.reply.evidence}["validate_only dry run"]
    assert dry_run == want
    assert _confirm_token(preview) is None, "a dry run the operator may not make must not be confirmable"
    assert "Traceback" not in render_text(preview.reply)


async def test_throttle_without_alter_configs_on_the_cluster(secure, make_principal, with_principals, ctx_for):
    env, user = with_principals(make_principal, config=CONFIG_RIGHTS - {("ALTER_CONFIGS", "CLUSTER", "kafka-cluster")})
    preview = await answer("throttle set 20MB/s", ctx_for(env), user="U0ALICE")
    dry_run = {e.label: e.value for e in preview.reply.evidence}["validate_only dry run"]
    first = dry_run.split("; ")[0]
    broker = min(secure.brokers)
    assert first == (
        f"broker {broker} leader.replication.throttled.rate: the config principal needs ALTER_CONFIGS on "
        f"CLUSTER kafka-cluster: incremental_alter_configs broker '{broker}' leader.replication.throttled.rate "
        f"was refused for User:{user} on cluster 'secure'"
    )
    assert _confirm_token(preview) is None


async def test_elect_leaders_without_alter_on_the_cluster(secure, make_principal, with_principals, ctx_for):
    env, user = with_principals(make_principal, operator=OPERATOR_RIGHTS - {("ALTER", "CLUSTER", "kafka-cluster")})
    ctx = ctx_for(env)
    name, _preferred = skewed_topic(secure)
    preview = await answer(f"elect-leaders {name}", ctx, user="U0ALICE")
    token = _confirm_token(preview)
    assert token is not None, preview.reply.verdict
    done = await answer(f"confirm {token}", ctx, user="U0ALICE")
    assert done.reply.verdict == (
        f"The election failed: the operator principal needs ALTER on CLUSTER kafka-cluster: "
        f"elect_leaders (preferred) was refused for User:{user} on cluster 'secure'"
    )
    failed = [r for r in ctx.gate.audit.read() if r["event"] == "execution"]
    assert failed and failed[-1]["cluster"] == "secure" and failed[-1]["ok"] is False


async def test_abort_txn_without_alter_on_the_cluster(secure, make_principal, with_principals, ctx_for):
    env, user = with_principals(make_principal, operator=OPERATOR_RIGHTS - {("ALTER", "CLUSTER", "kafka-cluster")})
    ctx = ctx_for(env)
    name = f"txn-{uuid.uuid4().hex[:6]}"
    secure.faults.hanging_transaction(name, 0, records=2)
    preview = await answer(f"abort-txn {name} 0 --min-age-ms 0", ctx, user="U0ALICE")
    done = await answer(f"confirm {_confirm_token(preview)}", ctx, user="U0BOB")
    assert done.reply.verdict.startswith(
        "The abort failed: the operator principal needs ALTER on CLUSTER kafka-cluster: abort_transaction "
        f"{name}-0 producer "
    ), done.reply.verdict
    assert done.reply.verdict.endswith(f"was refused for User:{user} on cluster 'secure'"), done.reply.verdict


async def test_a_read_without_describe_configs_answers_the_rest_and_names_the_missing_part(
    secure, topic, make_principal, with_principals, ctx_for
):
    env, user = with_principals(
        make_principal, observer=[("DESCRIBE", "TOPIC", "*"), ("DESCRIBE", "CLUSTER", "kafka-cluster")]
    )
    ctx = ctx_for(env)
    missing = (
        f"the topics' configs (min.insync.replicas taken as 1, so a partition at or under a higher floor is "
        f"not flagged): the observer principal (User:{user}) needs DESCRIBE_CONFIGS on TOPIC {topic}"
    )

    described = await answer(f"describe {topic}", ctx, user="U0ALICE")
    assert described.outcome == "answered", described.reply.verdict
    assert described.reply.verdict == f"{topic}: 3 partitions, RF 3, 0 out of sync."  # the metadata part stands
    assert [t.title for t in described.reply.tables] == ["Partitions"]  # no empty configs table
    assert described.reply.missing == [missing]
    assert f"Missing from this answer: {missing}" in render_text(described.reply)
    assert "Traceback" not in render_json(described.reply)

    # at-min-isr cannot place a partition without its floor: unknown, not "none at min ISR"
    floors = await answer(f"at-min-isr {topic}", ctx, user="U0ALICE")
    assert floors.reply.severity == "unknown" and floors.reply.missing == [missing], floors.reply.verdict
