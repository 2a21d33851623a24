"""pytest support: one real test cluster per test session, healed after each test.

Reuse from any conftest.py::

    from localkafka.testing import kafka_cluster, kafka_autoheal  # noqa: F401

``kafka_cluster`` (session scope) formats and starts a fresh cluster named
"pytest" on port_base 29090 (env ``KBOT_TEST_PORT_BASE``) in
``<cache root>/clusters/pytest`` (env ``KBOT_TEST_CLUSTER_DIR``), so it never
clashes with a running "dev" cluster on 19090, and deletes it at the end. Under pytest-xdist each
worker past the first (``gw1``, ``gw2`` ...) gets a cluster of its own, WORKER_PORT_STEP ports up
per worker and in a folder suffixed with the worker id: two workers never start clusters on the
same ports (a second group on a cluster of its own was tried, and on 2 cores two clusters beside
two Spark sessions overloaded the machine: tests/conftest.py keeps one group).
``KBOT_TEST_KEEP_CLUSTER=1`` keeps the cluster and its data between runs
(faster iteration; it is then reused, not re-formatted).

``kafka_autoheal`` (autouse) runs ``cluster.faults.heal()`` after every test
that used ``kafka_cluster``, so a test that kills or pauses brokers leaves a
healthy cluster behind.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kbot_settings import load_harness
from localkafka.cluster import LocalCluster
from localkafka.common import ClusterError
from localkafka.fetch import cache_root
from localkafka.secure import SecureCluster

TEST_NAME = "pytest"


def _keep() -> bool:
    return load_harness().keep_test_cluster


class TestCluster(LocalCluster):
    """The shared test cluster. One test setting on top of the dev cluster's: the controller does
    not rebalance leaders on its own, so a test that moves leaders (restart, preferred election)
    sees the result of its own action, not a race with the 10 s imbalance check."""

    __test__ = False

    def _render(self, node) -> None:
        super()._render(node)
        if node.role == "controller":
            with node.props_file.open("a") as f:
                f.write(
                    "\n# test setting: leaders stay where a restart left them\nauto.leader.rebalance.enable=false\n"
                )


WORKER_PORT_STEP = 50  # a cluster takes P..P+15 (localkafka/cluster.py); 50 leaves room to spare


def test_port_base() -> int:
    """KBOT_TEST_PORT_BASE, moved up WORKER_PORT_STEP for each xdist worker past the first."""
    h = load_harness()
    return h.kbot_test_port_base + WORKER_PORT_STEP * h.test_worker_index


def test_cluster() -> LocalCluster:
    h = load_harness()
    base = Path(h.kbot_test_cluster_dir or cache_root() / "clusters" / TEST_NAME)
    if h.test_worker_index:
        base = base.with_name(f"{base.name}-gw{h.test_worker_index}")
    return TestCluster(name=TEST_NAME, base_dir=base, port_base=test_port_base())


test_cluster.__test__ = False  # not tests, despite the names
test_port_base.__test__ = False


def start_test_cluster(timeout: float = 180) -> LocalCluster:
    """Fresh (or, with KBOT_TEST_KEEP_CLUSTER, reused) running test cluster."""
    if shutil.which("java") is None:
        pytest.skip("java is not installed: the local Kafka cluster needs a JDK 17+")
    cluster = test_cluster()
    if not _keep():
        cluster.destroy()  # leftovers of an interrupted run: stop them, wipe data
    return cluster.up(timeout=timeout)


def stop_test_cluster(cluster: LocalCluster) -> None:
    cluster.faults.stop_background()
    if not _keep():
        cluster.destroy()


@pytest.fixture(scope="session")
def kafka_cluster():
    cluster = start_test_cluster()
    yield cluster
    stop_test_cluster(cluster)


class SecureTestCluster(SecureCluster, TestCluster):
    """The shared secured test cluster (localkafka/secure.py) with the test cluster's settings."""

    __test__ = False


def secure_test_cluster() -> LocalCluster:
    """SASL_SSL + ACLs, 1 controller + 3 brokers: port base ``KBOT_TEST_SECURE_PORT_BASE``
    (default 28090), folder ``KBOT_TEST_SECURE_CLUSTER_DIR``."""
    h = load_harness()
    base = h.kbot_test_secure_cluster_dir or cache_root() / "clusters" / "pytest-secure"
    return SecureTestCluster(name="pytest-secure", base_dir=base, port_base=h.kbot_test_secure_port_base)


# A one-broker cluster's internal topics and defaults cannot ask for three replicas.
ONE_BROKER = {
    "controller": {"default.replication.factor": "1", "min.insync.replicas": "1"},
    "broker": {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "min.insync.replicas": "1",
    },
}


def second_test_cluster() -> LocalCluster:
    """A second, plain cluster of 1 controller + 1 broker (two-cluster tests): port base
    ``KBOT_TEST_SECOND_PORT_BASE`` (default 23090), folder ``KBOT_TEST_SECOND_CLUSTER_DIR``."""
    h = load_harness()
    base = h.kbot_test_second_cluster_dir or cache_root() / "clusters" / "pytest-second"
    return TestCluster(
        name="pytest-second",
        base_dir=base,
        brokers=1,
        overrides=ONE_BROKER,
        port_base=h.kbot_test_second_port_base,
    )


def _start(cluster: LocalCluster, timeout: float = 180) -> LocalCluster:
    if shutil.which("java") is None:
        pytest.skip("java is not installed: the local Kafka cluster needs a JDK 17+")
    if shutil.which("openssl") is None and getattr(cluster, "secure", False):
        pytest.skip("openssl is not installed: the secured cluster makes its certificates with it")
    if not _keep():
        cluster.destroy()
    return cluster.up(timeout=timeout)


@pytest.fixture(autouse=True)
def kafka_autoheal(request):
    yield
    for name in ("kafka_cluster", "secure_kafka_cluster"):
        if name in request.fixturenames:
            request.getfixturevalue(name).faults.heal()


def produce_one(bootstrap: str, topic: str, partition: int, value: str) -> None:
    """One acks=all record, flushed (tests write a marker behind a hung transaction this way)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, value=value.encode(), partition=partition)
    if p.flush(15) != 0:
        raise AssertionError(f"could not produce to {topic}-{partition}")


def read_committed(
    bootstrap: str, topic: str, partition: int, seconds: float = 30, want: str | None = None, **conf
) -> list[str]:
    """Values a read_committed consumer gets from the start of the partition within ``seconds``
    (returning early once ``want`` arrived). ``conf``: extra client settings (SASL/TLS)."""
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            **conf,
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and (want is None or want not in values):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
    finally:
        c.close()
    return values


def drop_other_topics(cluster: LocalCluster, timeout: float = 90) -> list[str]:
    """Delete every topic of the shared test cluster but Kafka's own: for a test whose answer reads
    the whole cluster (a broker lost takes every topic's replicas with it, a thread's "it" counts
    every topic named), so the topics other tests left behind are not part of what it judges. Best
    effort: a topic a lingering client keeps re-creating (brokers auto-create on produce) stays.
    Returns what there was to delete."""
    first = [t for t in cluster.admin().list_topics(timeout=10).topics if not t.startswith("__")]
    try:
        cluster.faults.delete_topics(first, timeout)
    except ClusterError as exc:  # said, so a test that then judges a crowded cluster shows why
        print(f"drop_other_topics: {exc}", file=sys.stderr, flush=True)
    return sorted(first)
