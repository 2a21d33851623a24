"""Fixtures for the metric-lake tests (the SparkSession is the run's shared one, tests/conftest.py):
a small synthetic lake with incidents, a Context whose ``lake`` is a LakeService over it, and a
lake in its first minute."""

from __future__ import annotations

import datetime as dt

import pytest
from lakekit import CLUSTER, START, clock_at, hhmm


@pytest.fixture(scope="session")
def synthetic_lake(spark, tmp_path_factory) -> str:
    """2 h (10:00-12:00 UTC, 2024-05-01), 4 brokers, 4 topics x 5 partitions, 30 s samples.

    Incidents (see tests/spark/test_spark_synthetic.py for the shapes they make):
    broker 2 lost 10:10-10:50 (flat URP 5 on brokers 1, 3, 4); topic-001-2 hot 10:05-10:35;
    broker 3 slow follower 11:00-12:00 (fluctuating URP); rebalance storm of
    topic-003-consumers 11:30-11:40 (REWIND).
    """
    from tools import synthetic as S

    path = str(tmp_path_factory.mktemp("synthetic") / "lake")
    S.generate(
        path,
        cluster=CLUSTER,
        start=START,
        hours=2,
        brokers=4,
        topics=4,
        partitions_per_topic=5,
        resolution_s=30,
        seed=7,
        spark=spark,
        incidents=[
            S.broker_loss(2, hhmm(10, 10), dt.timedelta(minutes=40)),
            S.hot_key("topic-001", 2, hhmm(10, 5), "30m"),
            S.slow_follower(3, hhmm(11, 0), "60m"),
            S.rebalance_storm("topic-003-consumers", hhmm(11, 30), "10m"),
        ],
    )
    return path


@pytest.fixture(scope="session")
def lake_service(spark, synthetic_lake):
    from lake.service import LakeService

    svc = LakeService(synthetic_lake, cluster=None, spark=spark, query_timeout_s=60)
    assert svc.start().wait_ready_sync(120), svc.status()
    yield svc
    svc.stop()  # does not stop a session it was given


@pytest.fixture
def ctx_at(lake_service):
    """Context factory: the synthetic lake, the clock at ``t``, optional live pool."""
    from framework.context import Context

    def make(t: dt.datetime, live=None, lake=lake_service) -> Context:
        return Context(lake=lake, live=live, clock=clock_at(t))

    return make


@pytest.fixture
def lake_in_flight(spark, tmp_path):
    """A LakeService over a lake whose first ingest and first rollup are writing (issue 26):
    ``(raw table path, service)``."""
    from lake.service import LakeService
    from tools.synthetic import first_commits_in_flight

    table = first_commits_in_flight(tmp_path / "lake")
    svc = LakeService(table, spark=spark, warm=False, query_timeout_s=120).start()
    yield table, svc
    svc.stop()
