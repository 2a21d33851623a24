"""Issue 37 item 8 on the real secured cluster (StandardAuthorizer, the bot's real principals):
what a right allows is shown by doing it as that principal, and `audit --principals` must say it;
a garbage TLS file gives one line naming the bot's setting and the file."""

from __future__ import annotations

import uuid

import pytest
from waiting import wait_until

from bot.render import render_text
from commands.registry import answer
from kbot_settings import load as load_settings
from localkafka.secure import CONFIG, OBSERVER, Grant, acls_of, apply_acls, config_entry
from tests.secure.securekit import write_clusters_file

pytestmark = pytest.mark.kafka

CLUSTER_AUTHORIZATION_FAILED = 31


def _alter_quota(secure, as_user: str, entity_user: str, rate: float | None) -> int:
    """AlterClientQuotas (KIP-546) as ``as_user``: set ``producer_byte_rate`` of ``entity_user``
    (None removes it). Returns the entry's error code (0: the broker allowed it). kafka-python
    has the request but no helper for it, so it is sent through the client's own connection."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest

    client = KafkaAdminClient(**secure.kafka_python_conf(as_user))
    try:
        op = ("producer_byte_rate", rate if rate is not None else 0.0, rate is None)
        request = AlterClientQuotasRequest(entries=[([("user", entity_user)], [op])], validate_only=False)

        async def send():
            return await client._manager.send(request)

        response = client._manager.run(send)
        return int(response.entries[0].error_code)
    finally:
        client.close()


async def test_the_config_principal_may_alter_any_client_quota_and_the_audit_says_so(secure, ctx):
    victim = f"someone-{uuid.uuid4().hex[:6]}"  # not one of the bot's principals
    assert _alter_quota(secure, OBSERVER, victim, 1024.0) == CLUSTER_AUTHORIZATION_FAILED
    assert _alter_quota(secure, CONFIG, victim, 1024.0) == 0  # the broker allows it: ALTER_CONFIGS on CLUSTER
    assert _alter_quota(secure, CONFIG, victim, None) == 0
    result = await answer("audit --principals", ctx, user="U0ALICE")
    text = render_text(result.reply)
    assert result.outcome == "answered", text
    assert result.reply.severity == "info", text
    assert f"User:{CONFIG} holds ALTER_CONFIGS on CLUSTER kafka-cluster" in text
    assert "AlterClientQuotas for any user or client id" in result.reply.verdict
    row = next(
        r
        for r in result.reply.tables[0].records()
        if r["principal"] == f"User:{CONFIG}" and r["operation"] == "ALTER_CONFIGS" and "CLUSTER" in r["resource"]
    )
    assert row["verdict"] == "needed; also allows AlterClientQuotas for any user or client id"


async def test_create_on_the_cluster_lets_the_observer_create_any_topic_and_the_audit_flags_it(secure, ctx):
    from confluent_kafka.admin import AclBindingFilter, AdminClient, NewTopic

    apply_acls(secure.admin(), (Grant(OBSERVER, "CREATE", "CLUSTER", "kafka-cluster", "test: over-granted"),))
    name = f"made-by-observer-{uuid.uuid4().hex[:6]}"
    try:
        observer = AdminClient(secure.client_conf(OBSERVER))
        wait_until(  # what the right allows, done as the observer: a topic of any name
            lambda: observer.create_topics([NewTopic(name, 1, 1)])[name].result(30) is None,
            30,
            "the observer to create a topic",
            interval=0.5,
            ignore=(Exception,),
        )

        async def flagged():
            result = await answer("audit --principals", ctx, user="U0ALICE")
            return result if result.reply.severity == "critical" else None

        from waiting import async_wait_until

        over = await async_wait_until(flagged, 30, "the audit to see the grant", interval=0.5)
        assert over.reply.verdict.startswith(
            f"1 escalation path on cluster 'secure': User:{OBSERVER} holds CREATE on CLUSTER kafka-cluster, "
            "which allows CreateTopics for any topic name"
        ), over.reply.verdict
        rows = [r for r in over.reply.tables[0].records() if r["operation"] == "CREATE"]
        assert [r["verdict"] for r in rows] == ["escalation path"]
    finally:
        flt = [
            f
            for f in secure.admin().describe_acls(acls_of(f"User:{OBSERVER}")).result(30)
            if f.operation.name == "CREATE"
        ]
        for b in flt:
            match = AclBindingFilter(
                b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
            )
            secure.admin().delete_acls([match])[match].result(30)
        secure.admin().delete_topics([name])
    wait_until(
        lambda: (
            not [
                b
                for b in secure.admin().describe_acls(acls_of(f"User:{OBSERVER}")).result(30)
                if b.operation.name == "CREATE"
            ]
        ),
        30,
        "the extra grant removed",
        interval=0.3,
    )


async def _status_line(env) -> str:
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(env))
    try:
        result = await answer("status", Context(live=pool), user="U0ALICE")
    finally:
        await pool.close()
    assert result.outcome == "unavailable", result.reply.verdict
    return result.reply.verdict


@pytest.mark.parametrize("garbage", [b"not a certificate at all\n", b"\x00\x01\x02" * 40], ids=["text", "binary"])
async def test_a_garbage_ca_file_is_named_with_its_setting(secure, kbot_env, tmp_path, garbage):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(garbage)
    clusters = write_clusters_file(
        tmp_path / "garbage-ca.yaml", {"secure": {**config_entry(secure), "ssl_ca": str(ca)}}
    )
    line = await _status_line({**kbot_env, "KBOT_CLUSTERS_FILE": str(clusters)})
    assert line.startswith(
        f"cannot connect to cluster 'secure': ssl_ca (in {clusters}) {ca} (not a PEM certificate bundle"
    ), line
    assert "Point the setting at the PEM file" in line and "ssl.ca.location" not in line


async def test_a_garbage_client_certificate_is_named_with_its_setting(secure, kbot_env, tmp_path):
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    cert.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
    entry = {**config_entry(secure), "ssl_cert": str(cert), "ssl_key": str(key)}
    clusters = write_clusters_file(tmp_path / "garbage-cert.yaml", {"secure": entry})
    line = await _status_line({**kbot_env, "KBOT_CLUSTERS_FILE": str(clusters)})
    assert f"ssl_cert (in {clusters}) {cert} with ssl_key (in {clusters}) {key} (OpenSSL cannot load the pair" in line
    assert "ssl.certificate.location" not in line and "ssl.key.location" not in line
