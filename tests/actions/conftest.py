"""tests/actions run on the shared test cluster (tests/conftest.py: one per run, healed after
each test that uses it); these fixtures give it the names the tests use."""

from __future__ import annotations

import pytest

from kbot_settings import load as load_settings


@pytest.fixture(scope="session")
def actions_cluster(kafka_cluster):
    return kafka_cluster


@pytest.fixture
def healed(actions_cluster):
    """The cluster, healed after the test (dead brokers restarted, hanging transactions fenced)."""
    yield actions_cluster
    actions_cluster.faults.heal()


@pytest.fixture
async def ctx(actions_cluster, tmp_path):
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(
        load_settings(
            {
                "KBOT_BOOTSTRAP": actions_cluster.bootstrap_servers,
                "KBOT_EXPECTED_BROKERS": ",".join(map(str, actions_cluster.brokers)),
                "KBOT_ADMIN_TIMEOUT_S": "10",
                "KBOT_HOME": str(tmp_path / "kbot-home"),
            }
        )
    )  # no stray clusters.yaml from ~/.kbot
    yield Context(live=pool)
    await pool.close()
