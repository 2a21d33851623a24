"""Shared by the live-command tests: a Context on the shared test cluster (with its exporters, for
the metric-based checks) and the small helpers every fault test needs."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

ADMIN_TIMEOUT_S = 10.0


def cluster_env(cluster) -> dict:
    return {
        "KBOT_BOOTSTRAP": cluster.bootstrap_servers,
        "KBOT_EXPECTED_BROKERS": ",".join(map(str, cluster.brokers)),
        "KBOT_ADMIN_TIMEOUT_S": str(ADMIN_TIMEOUT_S),
        "KBOT_METRICS_TARGETS": ",".join(f"{n}={u}" for n, u in sorted(cluster.metrics_urls.items())),
    }


@pytest.fixture
async def ctx(kafka_cluster):
    from commands.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(env=cluster_env(kafka_cluster))
    yield Context(live=pool)
    await pool.close()


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def wait_until(predicate, timeout: float, what: str, interval: float = 0.3):
    """Poll ``predicate`` until truthy; errors while brokers come and go count as "not yet"."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - metadata moves while brokers come and go
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))
