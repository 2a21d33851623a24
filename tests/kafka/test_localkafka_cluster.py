"""Lifecycle, status, metrics and CLI of the real local cluster."""

import json
import os
import subprocess
import sys
import time

import pytest

from kbot_settings import load_harness
from localkafka import ensure_jars, fetch
from localkafka.cluster import BROKER_IDS, CONTROLLER_ID, metric_value, scrape

pytestmark = pytest.mark.kafka


def test_jars_are_cached_and_complete(kafka_cluster):
    t0 = time.monotonic()
    libs = ensure_jars()
    assert time.monotonic() - t0 < 2, "a complete cache must not run Maven again"
    v = fetch.pom_versions()
    assert (libs / f"kafka_2.13-{v.kafka}.jar").is_file()
    assert (libs / f"kafka-tools-{v.kafka}.jar").is_file()
    assert fetch.agent_jar().is_file()
    assert fetch.is_complete()


def test_up_is_idempotent(kafka_cluster):
    before = {n.node_id: n.pid() for n in kafka_cluster.nodes}
    t0 = time.monotonic()
    kafka_cluster.up()
    assert time.monotonic() - t0 < 15
    assert {n.node_id: n.pid() for n in kafka_cluster.nodes} == before


def test_status_reports_controller_and_three_brokers(kafka_cluster):
    st = kafka_cluster.status()
    assert st["healthy"], st["error"]
    assert st["registered_brokers"] == list(BROKER_IDS)
    roles = {n["id"]: n["role"] for n in st["nodes"]}
    assert roles == {CONTROLLER_ID: "controller", **{b: "broker" for b in BROKER_IDS}}
    for n in st["nodes"]:
        assert n["alive"] and n["pid"] > 0
        assert n["metrics_url"] == f"http://127.0.0.1:{n['ports']['metrics']}/metrics"
    assert st["bootstrap_servers"] == kafka_cluster.bootstrap_servers
    # the test cluster's own ports (KBOT_TEST_PORT_BASE, a step up per xdist worker past the first),
    # never the dev cluster's
    worker = load_harness().test_worker_index
    assert kafka_cluster.port_base == int(os.environ.get("KBOT_TEST_PORT_BASE", "29090")) + 50 * worker
    assert kafka_cluster.port_base != 19090


def test_metrics_endpoints_serve_kafka_gauges(kafka_cluster):
    f = kafka_cluster.faults
    f.create_topic("metrics-probe", 3, 3)
    p = f._producer(acks="all")
    for i in range(30):
        p.produce("metrics-probe", value=b"x", partition=i % 3)
    assert p.flush(10) == 0
    ctl = scrape(kafka_cluster.controller.metrics_url)
    assert metric_value(ctl, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert metric_value(ctl, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert metric_value(ctl, "kafka_controller_kafkacontroller_globalpartitioncount") >= 3
    leo_total = 0
    for bid in BROKER_IDS:
        text = scrape(kafka_cluster.brokers[bid].metrics_url)
        assert metric_value(text, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert metric_value(text, "kafka_server_replicamanager_partitioncount") >= 3
        for name in (
            "kafka_server_replicamanager_atminisrpartitioncount",
            "kafka_server_replicamanager_underminisrpartitioncount",
            "kafka_server_replicamanager_offlinereplicacount",
            "kafka_server_replicamanager_leadercount",
            "kafka_server_replicamanager_isrshrinkspersec_total",
            "kafka_server_replicamanager_isrexpandspersec_total",
            "kafka_server_replicamanager_partitionswithlatetransactionscount",
            "kafka_log_logmanager_offlinelogdirectorycount",
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
        ):
            assert metric_value(text, name) is not None, name
        assert (
            metric_value(text, "kafka_network_requestmetrics_totaltimems", request="Fetch", quantile="0.99") is not None
        )
        assert metric_value(text, "kafka_network_requestmetrics_requestqueuetimems_mean", request="Fetch") is not None
        assert metric_value(text, "kafka_cluster_partition_underreplicated", topic="metrics-probe") == 0
        leo_total += metric_value(text, "kafka_log_log_logendoffset", topic="metrics-probe")
    # every broker holds every partition (RF=3): 3 copies of 30 records
    assert leo_total == 90
    # the produce went to the leaders; BrokerTopicMetrics is per topic
    msgs = sum(
        metric_value(
            scrape(kafka_cluster.brokers[b].metrics_url),
            "kafka_server_brokertopicmetrics_messagesinpersec_total",
            topic="metrics-probe",
        )
        or 0
        for b in BROKER_IDS
    )
    assert msgs == 30


def _cli(cluster, *args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "localkafka",
            *args,
            "--name",
            cluster.name,
            "--base-dir",
            str(cluster.base_dir),
            "--port-base",
            str(cluster.port_base),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_status_json_and_human(kafka_cluster):
    res = _cli(kafka_cluster, "status", "--json")
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["healthy"] and st["registered_brokers"] == list(BROKER_IDS)
    res = _cli(kafka_cluster, "status")
    assert res.returncode == 0
    assert "healthy" in res.stdout and str(kafka_cluster.brokers[101].metrics_port) in res.stdout
    res = _cli(kafka_cluster, "up")  # idempotent through the CLI too
    assert res.returncode == 0, res.stderr


def test_cli_errors_are_one_line_without_traceback(kafka_cluster, tmp_path):
    # a base dir formatted for other ports is refused with a clear message
    (tmp_path / "cluster.json").write_text(json.dumps({"port_base": 12345, "cluster_id": "x"}))
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "localkafka",
            "up",
            "--name",
            "other",
            "--base-dir",
            str(tmp_path),
            "--port-base",
            "29190",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr and "port_base 12345" in res.stderr
    # status of a cluster that is not running: exit 1, still a report
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "localkafka",
            "status",
            "--name",
            "other",
            "--base-dir",
            str(tmp_path / "none"),
            "--port-base",
            "29190",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1 and "NOT healthy" in res.stdout and "Traceback" not in res.stderr
