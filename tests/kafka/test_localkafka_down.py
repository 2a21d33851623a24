"""down() must leave no process behind; the test then brings the session cluster back up, so it
may run at any point of the session."""

import time

import pytest

from localkafka import procs

pytestmark = pytest.mark.kafka


def test_down_leaves_no_process_then_warm_up(kafka_cluster):
    kafka_cluster.faults.pause_broker(103)  # down() must also handle a SIGSTOPped JVM
    pids = {n.node_id: n.pid() for n in kafka_cluster.nodes}
    assert all(pids.values())
    kafka_cluster.down()
    for node_id, pid in pids.items():
        assert procs.is_gone(pid), f"node {node_id} pid {pid} survived down()"
        assert not kafka_cluster.node(node_id).pid_file.exists()
        assert not procs.port_open(kafka_cluster.node(node_id).port)
    st = kafka_cluster.status()
    assert not st["healthy"] and not any(n["pid"] for n in st["nodes"])
    kafka_cluster.down()  # idempotent
    t0 = time.monotonic()
    kafka_cluster.up()
    warm = time.monotonic() - t0
    assert kafka_cluster.status()["healthy"]
    print(f"warm up() after down(): {warm:.1f}s")
