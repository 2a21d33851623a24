"""TLS verification is on by default, and each credential or certificate mistake gives one clear
line - through the bot's own answer path and through the `kbot` command line - with no password in
it. The expired certificate is served by a separate `openssl s_server` process (a TLS endpoint the
gateway handshakes with, signed by the cluster's CA but expired), started and stopped from outside."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

from commands.registry import answer
from kbot_settings import load as load_settings
from localkafka.secure import OBSERVER, config_entry, make_ca, sign_cert
from tests.secure.securekit import write_clusters_file

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]


def _env(kbot_env, tmp_path, name: str, entry: dict) -> dict:
    path = write_clusters_file(tmp_path / f"{name}.yaml", {name: entry})
    return {**kbot_env, "KBOT_CLUSTERS_FILE": str(path)}


async def _status_line(env) -> str:
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(env))
    try:
        result = await answer("status", Context(live=pool), user="U0ALICE")
    finally:
        await pool.close()
    assert result.outcome == "unavailable"
    return result.reply.verdict


def _first(secure) -> str:
    return secure.bootstrap_servers.split(",")[0]


async def test_wrong_ca(secure, kbot_env, tmp_path):
    other_ca, _ = make_ca(tmp_path / "other-ca", cn="not-the-cluster-ca")
    entry = {**config_entry(secure), "ssl_ca": str(other_ca)}
    line = await _status_line(_env(kbot_env, tmp_path, "secure", entry))
    assert line == (
        f"TLS verification of Kafka cluster 'secure' failed: the broker certificate of {_first(secure)} "
        f"is not signed by the CA in {other_ca} (ssl_ca) (self-signed certificate in certificate chain); "
        f"point ssl_ca at the CA that signed the brokers' certificates"
    )


async def test_verification_is_on_without_a_ca_setting(secure, kbot_env, tmp_path):
    entry = config_entry(secure)
    del entry["ssl_ca"]  # the system CA store does not know the local CA: refused, not trusted blindly
    line = await _status_line(_env(kbot_env, tmp_path, "secure", entry))
    assert line.startswith(
        f"TLS verification of Kafka cluster 'secure' failed: the broker certificate of "
        f"{_first(secure)} is not signed by the system CA store (no ssl_ca set)"
    ), line


async def test_wrong_password(secure, kbot_env, tmp_path):
    entry = {**config_entry(secure), "sasl_password": "not-the-password"}
    line = await _status_line(_env(kbot_env, tmp_path, "secure", entry))
    assert line == (
        f"SASL authentication to Kafka cluster 'secure' failed for User:{OBSERVER} (SCRAM-SHA-512): "
        f"wrong user name or password, or no such SCRAM user (the observer's sasl_username / sasl_password)"
    )
    assert "not-the-password" not in line


@pytest.fixture
def expired_endpoint(secure, tmp_path):
    """``openssl s_server`` on a port of this suite's range, with a certificate signed by the
    cluster's CA that expired in 2020."""
    folder = tmp_path / "expired"
    folder.mkdir()
    ca = secure.state
    pem, key = sign_cert(folder, "expired", ca.ca, ca.folder / "ca.key", start="20200101000000Z", end="20200102000000Z")
    port = secure.port_base + 100
    proc = subprocess.Popen(
        ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(pem), "-key", str(key), "-quiet"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True

        def running() -> None:  # the wait's check: a server that exited will never listen
            assert proc.poll() is None, f"openssl s_server exited ({proc.returncode}) before it listened on {port}"

        wait_until(
            listening, 30, f"openssl s_server to listen on {port}", interval=0.2, ignore=(OSError,), check=running
        )
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_expired_certificate(secure, kbot_env, tmp_path, expired_endpoint):
    entry = {**config_entry(secure), "bootstrap": expired_endpoint, "expected_brokers": []}
    line = await _status_line(_env(kbot_env, tmp_path, "expired", entry))
    assert line == (
        f"TLS verification of Kafka cluster 'expired' failed: the broker certificate of {expired_endpoint} "
        f"has expired (certificate has expired); renew it on the broker"
    )


def test_the_command_line_prints_one_line_without_the_password(secure, kbot_env, tmp_path):
    entry = {**config_entry(secure), "sasl_password": "wrong-secret-4711"}
    env = {**os.environ, **_env(kbot_env, tmp_path, "secure", entry)}
    res = subprocess.run(
        [sys.executable, "-m", "cli.main", "ask", "status"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    out = res.stdout + res.stderr
    assert "Traceback" not in out and "wrong-secret-4711" not in out
    assert (
        f"SASL authentication to Kafka cluster 'secure' failed for User:{OBSERVER} (SCRAM-SHA-512): wrong user "
        f"name or password"
    ) in out, out
