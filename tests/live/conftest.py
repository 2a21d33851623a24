"""tests/live run on the shared test cluster (tests/conftest.py: one per run, healed after each
test that uses it); these fixtures give it the names the tests use."""

from __future__ import annotations

import uuid

import pytest

from live import ClusterConfig

BROKERS = (101, 102, 103)


@pytest.fixture(scope="session")
def live_cluster(kafka_cluster):
    return kafka_cluster


@pytest.fixture
def live_config(live_cluster) -> ClusterConfig:
    return ClusterConfig(name="live-tests", bootstrap=live_cluster.bootstrap_servers, expected_brokers=BROKERS)


@pytest.fixture
def unique():
    """A per-test suffix for topic/group/transactional ids."""
    return uuid.uuid4().hex[:8]
