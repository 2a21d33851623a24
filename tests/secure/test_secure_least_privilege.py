"""Issue 29: one principal per privilege level, each refused outside its own actions, and the bot's
audit of its own principals - against the real secured cluster (StandardAuthorizer, no ACL = no
access) and its real principals kbot-observer, kbot-config and kbot-operator."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from waiting import async_wait_until, wait_until

from bot.render import render_text
from commands.registry import answer
from kbot_settings import load as load_settings
from live.config import get_cluster
from live.gateway import AdminGateway, NotAuthorized
from localkafka.secure import CONFIG, OBSERVER, OPERATOR, Grant, acls_of, apply_acls, config_entry
from tests.secure.securekit import skewed_topic, write_clusters_file

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]


def _acl(principal: str, op: str, rtype: str, name: str):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    restype = ResourceType.BROKER if rtype == "CLUSTER" else getattr(ResourceType, rtype)
    return AclBinding(
        restype,
        name,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        getattr(AclOperation, op),
        AclPermissionType.ALLOW,
    )


def _delete_acl(secure, principal: str, op: str, rtype: str, name: str) -> None:
    from confluent_kafka.admin import AclBindingFilter

    b = _acl(principal, op, rtype, name)
    flt = AclBindingFilter(
        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
    )
    secure.admin().delete_acls([flt])[flt].result(30)


def _acls_of(secure, principal: str) -> list:
    return list(secure.admin().describe_acls(acls_of(principal)).result(30))


@pytest.fixture
async def gateways(kbot_env):
    """The bot's own gateways, one per role, on the shared secured cluster's real principals."""
    config = get_cluster("secure", load_settings(kbot_env))
    made = {role: AdminGateway(config.as_role(role), timeout_s=10) for role in ("observer", "config", "operator")}
    assert {r: g.config.sasl_username for r, g in made.items()} == {
        "observer": OBSERVER,
        "config": CONFIG,
        "operator": OPERATOR,
    }
    yield made
    for gw in made.values():
        await gw.close()


async def test_the_config_principal_cannot_elect_leaders_or_create_acls(secure, gateways):
    name, _preferred = skewed_topic(secure)
    with pytest.raises(NotAuthorized) as refused:
        await gateways["config"].elect_preferred_leaders([(name, 0)])
    assert refused.value.role_line() == f"the config principal (User:{CONFIG}) needs ALTER on CLUSTER kafka-cluster"
    # CreateAcls is authorized as ALTER on the CLUSTER, which the config principal does not hold
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    grab = _acl(f"User:{CONFIG}", "ALL", "TOPIC", "*")
    client = AdminClient(secure.client_conf(CONFIG))  # held: a collected client fails its futures
    with pytest.raises(KafkaException) as denied:
        client.create_acls([grab])[grab].result(30)
    assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    assert not [b for b in _acls_of(secure, f"User:{CONFIG}") if b.operation.name == "ALL"]


async def test_the_observer_cannot_alter_configs_and_the_operator_cannot_either(secure, topic, gateways):
    for role in ("observer", "operator"):
        with pytest.raises(NotAuthorized) as refused:
            await gateways[role].alter_topic_config(topic, "retention.ms", "86400000", validate_only=True)
        assert refused.value.role_line() == (
            f"the {role} principal (User:{gateways[role].config.sasl_username}) needs ALTER_CONFIGS on TOPIC {topic}"
        )
        with pytest.raises(NotAuthorized) as refused:
            await gateways[role].alter_broker_config(
                min(secure.brokers), "leader.replication.throttled.rate", "1000000"
            )
        assert refused.value.resource_type == "CLUSTER" and refused.value.operation == "ALTER_CONFIGS"
    with pytest.raises(NotAuthorized):
        name, _ = skewed_topic(secure)
        await gateways["observer"].elect_preferred_leaders([(name, 0)])
    # and the config principal may, which is what retention / throttle use
    await gateways["config"].alter_topic_config(topic, "retention.ms", "86400000", validate_only=True)


async def test_the_operators_cluster_alter_is_the_escalation_path_kafka_documents(secure, gateways):
    """Why the operator is kept apart: with ALTER on the CLUSTER it can create ACLs (here for a
    principal that does not exist; removed again by the super user)."""
    from confluent_kafka.admin import AdminClient

    nobody = f"User:kbot-test-nobody-{uuid.uuid4().hex[:6]}"
    grant = _acl(nobody, "DESCRIBE", "TOPIC", "escalation-proof")
    try:
        client = AdminClient(secure.client_conf(OPERATOR))  # held: a collected client fails its futures
        client.create_acls([grant])[grant].result(30)
        # the ACL reaches the brokers with the metadata: the one asked may not have it yet
        wait_until(lambda: _acls_of(secure, nobody), 30, "the operator's cluster ALTER to create an ACL")
    finally:
        _delete_acl(secure, nobody, "DESCRIBE", "TOPIC", "escalation-proof")


async def test_the_self_audit_is_clean_then_flags_an_over_granted_principal(secure, ctx, kbot_env):
    clean = await answer("audit --principals", ctx, user="U0ALICE")
    assert clean.outcome == "answered", clean.reply.verdict
    # clean but for what a needed right also allows (issue 37: AlterClientQuotas, said as info)
    assert clean.reply.severity == "info", render_text(clean.reply)
    assert clean.reply.verdict.startswith(
        "The bot's principals on cluster 'secure' hold only what their actions need, no escalation path; "
        f"1 needed right allows more than the action: User:{CONFIG} holds ALTER_CONFIGS on CLUSTER kafka-cluster"
    ), clean.reply.verdict
    table = clean.reply.tables[0].records()
    assert {r["principal"] for r in table} == {f"User:{u}" for u in (OBSERVER, CONFIG, OPERATOR)}
    assert {r["verdict"] for r in table} == {
        "needed",
        "needed; also allows AlterClientQuotas for any user or client id",
    }

    # the super user gives the config principal the cluster ALTER (CreateAcls) it must not have
    apply_acls(secure.admin(), (Grant(CONFIG, "ALTER", "CLUSTER", "kafka-cluster", "test: over-granted"),))
    try:

        async def flagged():
            result = await answer("audit --principals", ctx, user="U0ALICE")
            return result if result.reply.severity == "critical" else None

        over = await async_wait_until(flagged, 30, "the audit to see the extra grant", interval=0.5)
        assert over.reply.verdict.startswith(
            f"1 escalation path on cluster 'secure': User:{CONFIG} holds ALTER on CLUSTER: Kafka also accepts it "
            "for CreateAcls/DeleteAcls"
        ), over.reply.verdict
        rows = [r for r in over.reply.tables[0].records() if not r["verdict"].startswith("needed")]
        assert rows == [
            {
                "principal": f"User:{CONFIG}",
                "roles": "config",
                "operation": "ALTER",
                "resource": "CLUSTER kafka-cluster",
                "permission": "ALLOW",
                "verdict": "escalation path",
            }
        ]
        # the same from the terminal, text and JSON (what an operator runs)
        env = {**os.environ, **kbot_env}
        cli = [sys.executable, "-m", "cli.main", "audit", "--principals"]
        text = subprocess.run(cli, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert text.returncode == 0, text.stderr
        print(text.stdout)  # the report quotes it (pytest -s)
        assert "1 escalation path on cluster 'secure'" in text.stdout.splitlines()[1]
        as_json = subprocess.run([*cli, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        doc = json.loads(as_json.stdout)
        assert doc["severity"] == "critical" and doc["verdict"] == over.reply.verdict
        for pw in secure.state.passwords.values():
            assert pw not in text.stdout + as_json.stdout + text.stderr
    finally:
        _delete_acl(secure, f"User:{CONFIG}", "ALTER", "CLUSTER", "kafka-cluster")
    wait_until(
        lambda: not [b for b in _acls_of(secure, f"User:{CONFIG}") if b.operation.name == "ALTER"],
        30,
        "the extra grant removed",
        interval=0.3,
    )


async def test_the_audit_names_a_missing_principal_and_what_it_cannot_read(
    secure, make_principal, tmp_path, kbot_env, ctx_for
):
    # no config principal configured: flagged, and retention/throttle are refused up front
    entry = {k: v for k, v in config_entry(secure).items() if k != "config"}
    path = write_clusters_file(tmp_path / "no-config.yaml", {"secure": entry})
    result = await answer("audit --principals", ctx_for({**kbot_env, "KBOT_CLUSTERS_FILE": str(path)}), user="U0A")
    assert result.reply.severity == "warning", result.reply.verdict
    assert result.reply.verdict.startswith("1 missing principal on cluster 'secure': no config principal is configured")
    assert "KBOT_CONFIG_SASL_USERNAME" in result.reply.verdict

    # an observer without DESCRIBE on the CLUSTER cannot list ACLs: it says so, and the expectation
    user, password = make_principal(("DESCRIBE", "TOPIC", "*"))
    entry = {**config_entry(secure), "sasl_username": user, "sasl_password": password}
    path = write_clusters_file(tmp_path / "blind.yaml", {"secure": entry})
    blind = await answer("audit --principals", ctx_for({**kbot_env, "KBOT_CLUSTERS_FILE": str(path)}), user="U0A")
    assert blind.reply.severity == "unknown", blind.reply.verdict
    assert blind.reply.verdict.startswith(
        f"Cannot read the ACLs of the bot's principals on cluster 'secure': the observer principal (User:{user}) "
        "needs DESCRIBE on CLUSTER kafka-cluster to list ACLs"
    ), blind.reply.verdict
    expectation = next(s for s in blind.reply.sections if s.heading == "Documented expectation")
    assert "operator: ALTER on CLUSTER kafka-cluster - elect-leaders (ElectLeaders) and abort-txn" in "\n".join(
        expectation.lines
    )


@pytest.fixture
async def ctx_for(tmp_path):
    from framework.context import Context
    from live.pool import GatewayPool

    made = []

    def make(env):
        ctx = Context(live=GatewayPool(load_settings(env)))
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        await ctx.live.close()


def test_one_log_line_at_bot_start(secure, kbot_env, caplog, monkeypatch):
    """`kbot run` / `kbot serve` log the self-audit's verdict once when they start (cli/run.py)."""
    import logging

    import bot.app
    from cli.run import audit_principals_once_live
    from cli.startup import Startup
    from framework.context import Context
    from live.pool import GatewayPool

    async def start_twice() -> None:
        settings = load_settings(kbot_env)
        for _ in range(2):  # once per process
            pool = GatewayPool(settings)
            try:
                await audit_principals_once_live(Context(live=pool, settings=settings), Startup(lambda _line: None))
            finally:
                await pool.close()

    monkeypatch.setattr(bot.app, "_PRINCIPALS_LOGGED", False)
    caplog.set_level(logging.INFO, logger="kbot.principals")
    asyncio.run(start_twice())
    lines = [r for r in caplog.records if r.name == "kbot.principals"]
    assert [r.levelname for r in lines] == ["INFO"]
    message = lines[0].getMessage()
    assert message.startswith(
        "principals audit (info): The bot's principals on cluster 'secure' hold only what their actions need, "
        "no escalation path; 1 needed right allows more than the action:"
    ), message
    assert "AlterClientQuotas" in message and message.endswith("`kbot audit --principals` shows the rest.")
