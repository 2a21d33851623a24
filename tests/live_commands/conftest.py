"""Shared by the live-command tests: a Context on the shared test cluster (with its exporters, for
the metric-based checks). The helpers every fault test needs are in commandkit.py and tests/waiting.py."""

from __future__ import annotations

import pytest
from commandkit import cluster_env

from kbot_settings import load as load_settings


@pytest.fixture
async def ctx(kafka_cluster):
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(cluster_env(kafka_cluster)))
    yield Context(live=pool)
    await pool.close()
