"""AdminGateway behaviour that needs no running cluster: an unreachable
bootstrap never hangs, argument guards, close(), secrets in logs."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from waiting import async_wait_until

from kbot_settings import load as load_settings
from live import AdminGateway, ClusterConfig, ClusterUnreachable, GatewayError

TIMEOUT = 3.0


def closed_port() -> ClusterConfig:
    return ClusterConfig(name="dev", bootstrap="127.0.0.1:1")


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


@pytest.mark.parametrize(
    "call",
    [
        "describe_cluster",  # confluent admin future
        "describe_topics",  # confluent list_topics in a thread
        "consumer_group_lag",  # coordinator retries must stop at the timeout too
        "metadata_quorum",  # kafka-python: its constructor's bootstrap
    ],
)
async def test_unreachable_cluster_raises_within_the_timeout(call):
    args = {"consumer_group_lag": ("g",), "topic_configs": (["t"],)}.get(call, ())
    gw = AdminGateway(closed_port(), timeout_s=TIMEOUT)
    t0 = time.monotonic()
    try:
        with pytest.raises(ClusterUnreachable) as ei:
            await getattr(gw, call)(*args)
    finally:
        await gw.close()
    elapsed = time.monotonic() - t0
    assert elapsed < TIMEOUT + 2, f"{call} took {elapsed:.1f}s"
    msg = str(ei.value)
    assert msg.startswith("cannot reach the Kafka cluster 'dev' at 127.0.0.1:1 within 3s (")
    assert "Connection refused" in msg or "refused" in msg.lower() or "timed out" in msg.lower()
    assert "kbot cluster status" in msg
    assert ei.value.cluster == "dev"


async def test_unreachable_does_not_block_the_event_loop():
    """While a call waits for the dead cluster, other coroutines keep running."""
    gw = AdminGateway(closed_port(), timeout_s=TIMEOUT)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)  # the scenario: a coroutine ticking beside the calls, counting its turns
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(ClusterUnreachable):
            await asyncio.gather(gw.describe_cluster(), gw.topics(), gw.metadata_quorum())
    finally:
        task.cancel()
        await gw.close()
    # ~60 ticks on an idle machine, fewer on a busy one; a loop the calls blocked would tick only between them
    assert ticks >= 10, ticks


async def test_elect_preferred_leaders_needs_an_explicit_list():
    gw = AdminGateway(closed_port(), timeout_s=TIMEOUT)
    try:
        with pytest.raises(ValueError, match="explicit list"):
            await gw.elect_preferred_leaders(None)
        with pytest.raises(ValueError, match="at least one"):
            await gw.elect_preferred_leaders([])
        with pytest.raises(TypeError):
            await gw.elect_preferred_leaders(["orders"])
    finally:
        await gw.close()


async def test_close_is_idempotent_and_stops_threads():
    before = _threads()
    gw = AdminGateway(closed_port(), timeout_s=1)
    with pytest.raises(ClusterUnreachable):
        await gw.metadata_quorum()  # kafka-python bootstrap fails: its IO thread must not leak
    await gw.close()
    await gw.close()
    with pytest.raises(GatewayError, match="closed"):
        await gw.describe_cluster()

    def leaked() -> set[str]:
        return {n for n in _threads() - before if "kafka" in n or "live-rdkafka" in n}

    await async_wait_until(
        lambda: not leaked(), 5, "the clients' threads to end", interval=0.1, detail=lambda: f"left: {leaked()}"
    )


async def test_secrets_stay_out_of_client_logs(caplog):
    """Both client libraries get the password; neither the gateway's nor
    kafka-python's (debug: 'Starting KafkaAdminClient with configuration')
    log lines may show it."""
    password = "Very-Secret-42"
    cfg = ClusterConfig(
        name="sasl",
        bootstrap="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="kbot",
        sasl_password=password,
    )
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="kafka")  # the gateway quiets "kafka" only if unset
    gw = AdminGateway(cfg, timeout_s=1)
    logging.getLogger("kbot.test").info("using %r", gw.config)
    try:
        with pytest.raises(ClusterUnreachable):
            await gw.metadata_quorum()
    finally:
        await gw.close()
    assert "sasl_plain_password" in caplog.text  # the kafka-python config dump was logged ...
    assert password not in caplog.text  # ... masked
    assert password not in repr(gw) and password not in str(gw.config)


def test_gateway_takes_a_cluster_name(tmp_path, monkeypatch):
    f = tmp_path / "clusters.yaml"
    f.write_text("default: a\nclusters:\n  a: {bootstrap: '127.0.0.1:1'}\n  b: {bootstrap: '127.0.0.1:2'}\n")
    monkeypatch.setenv("KBOT_CLUSTERS_FILE", str(f))
    for var in ("KBOT_BOOTSTRAP", "KBOT_CLUSTER"):
        monkeypatch.delenv(var, raising=False)
    gw_b = AdminGateway("b", timeout_s=1, settings=load_settings())
    gw_default = AdminGateway(timeout_s=1, settings=load_settings())
    assert gw_b.config.bootstrap == "127.0.0.1:2" and gw_default.name == "a"
    asyncio.run(gw_b.close())
    asyncio.run(gw_default.close())


def test_a_missing_ca_file_is_named_not_an_openssl_error(tmp_path):
    cfg = ClusterConfig(name="tls", bootstrap="127.0.0.1:1", security_protocol="SSL", ssl_ca=str(tmp_path / "ca.pem"))
    with pytest.raises(GatewayError) as caught:
        AdminGateway(cfg, timeout_s=1)
    message = str(caught.value)
    assert f"ssl_ca {tmp_path / 'ca.pem'} (no such file)" in message and "BIO" not in message
    (tmp_path / "ca.pem").mkdir()  # a directory where the file should be
    with pytest.raises(GatewayError, match="not a readable file"):
        AdminGateway(cfg, timeout_s=1)
