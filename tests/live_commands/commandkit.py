"""Helpers of the live-command tests (a module of its own: "conftest" is not importable by name when
several test folders run together): the shared cluster's environment for a Context, unique names."""

from __future__ import annotations

import uuid

ADMIN_TIMEOUT_S = 10.0


def cluster_env(cluster) -> dict:
    return {
        "KBOT_BOOTSTRAP": cluster.bootstrap_servers,
        "KBOT_EXPECTED_BROKERS": ",".join(map(str, cluster.brokers)),
        "KBOT_ADMIN_TIMEOUT_S": str(ADMIN_TIMEOUT_S),
        "KBOT_METRICS_TARGETS": ",".join(f"{n}={u}" for n, u in sorted(cluster.metrics_urls.items())),
    }


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
