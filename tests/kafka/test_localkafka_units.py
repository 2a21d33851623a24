"""No-cluster checks of localkafka's pure parts (fast, no marker)."""

import re
import string

import yaml

from localkafka import cluster, fetch, metrics

SAMPLE = """# HELP x
kafka_log_log_logendoffset{partition="0",topic="orders"} 12.0
kafka_log_log_logendoffset{partition="1",topic="orders"} 30.0
kafka_log_log_logendoffset{partition="0",topic="payments"} 5.0
kafka_server_replicamanager_underreplicatedpartitions 2.0
kafka_server_replicamanager_underreplicatedpartitions_other 9.0
"""


def test_metric_value_filters_by_labels():
    assert metrics.metric_value(SAMPLE, metrics.LOG_END_OFFSET, topic="orders") == 42
    assert metrics.metric_value(SAMPLE, metrics.LOG_END_OFFSET, topic="orders", partition=1) == 30
    assert metrics.metric_value(SAMPLE, metrics.LOG_END_OFFSET, topic="nope") is None
    assert metrics.metric_value(SAMPLE, metrics.UNDER_REPLICATED) == 2


def test_port_layout_and_ephemeral_range_warning():
    c = cluster.LocalCluster(name="unit", base_dir="/nonexistent/unit", port_base=29090)
    assert c.bootstrap_servers == "127.0.0.1:29091,127.0.0.1:29092,127.0.0.1:29093"
    assert c.controller_bootstrap == "127.0.0.1:29090"
    assert c.metrics_urls == {
        1: "http://127.0.0.1:29100/metrics",
        101: "http://127.0.0.1:29101/metrics",
        102: "http://127.0.0.1:29102/metrics",
        103: "http://127.0.0.1:29103/metrics",
    }
    assert c.port_warning is None
    lo, _ = cluster.ephemeral_port_range()
    assert cluster.port_layout_warning(lo + 100) is not None


def test_cluster_id_format():
    for _ in range(50):
        cid = cluster.new_cluster_id()
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", cid)


def test_templates_render_and_document_test_settings():
    for role in ("controller", "broker"):
        text = (cluster.CONFIG_DIR / f"{role}.properties").read_text()
        assert "test settings" in text
        out = string.Template(text).substitute(node_id=7, port=1, data_dir="/d", voters="1@h:1")
        assert "node.id=7" in out
    broker = (cluster.CONFIG_DIR / "broker.properties").read_text()
    for setting in (
        "replica.lag.time.max.ms=5000",
        "transaction.state.log.min.isr=2",
        "offsets.topic.replication.factor=3",
        "broker.heartbeat.interval.ms=500",
    ):
        assert setting in broker
    assert "broker.session.timeout.ms=4000" in (cluster.CONFIG_DIR / "controller.properties").read_text()


def test_jmx_rules_yaml_is_valid_and_ordered():
    rules = yaml.safe_load((cluster.CONFIG_DIR / "jmx_rules.yaml").read_text())
    assert rules["lowercaseOutputName"] is True
    pats = [r["pattern"] for r in rules["rules"]]
    assert all(p.endswith(":") for p in pats), "attribute names must be anchored"
    # beans with more tags must be matched before the generic ones
    tags = [p.count("([^,=]+)=") for p in pats[1:]]
    assert tags == sorted(tags, reverse=True)


def test_pom_versions_single_kafka_version():
    v = fetch.pom_versions()
    assert v.kafka.startswith("4.") and v.jmx_exporter and v.log4j
    pom = fetch.POM.read_text()
    assert pom.count("${kafka.version}") >= 3 and "<version>4." not in pom


def test_cluster_commands_use_the_port_base_the_named_cluster_was_created_with(tmp_path):
    """`kbot cluster status --name judge` without --port-base reads the cluster's own layout."""
    import json

    from localkafka.cli import recorded_port_base
    from localkafka.cluster import DEFAULT_PORT_BASE

    folder = tmp_path / "judge"
    assert recorded_port_base("judge", str(folder)) == DEFAULT_PORT_BASE  # no cluster made yet
    folder.mkdir()
    (folder / "cluster.json").write_text(json.dumps({"port_base": 25090, "controllers": 1}))
    assert recorded_port_base("judge", str(folder)) == 25090
    (folder / "cluster.json").write_text("{not json")
    assert recorded_port_base("judge", str(folder)) == DEFAULT_PORT_BASE


def test_a_cluster_keeps_the_controller_count_it_was_created_with(tmp_path):
    """`kbot cluster up --controllers 3` once; `kbot cluster status`, `kbot run` (which name no
    count) then see all three voters instead of refusing a cluster made with a different quorum."""
    import argparse
    import json

    from localkafka.cli import add_arguments
    from localkafka.cluster import LocalCluster

    folder = tmp_path / "q"
    assert list(LocalCluster(name="q", base_dir=folder).controllers) == [1]  # nothing recorded: one
    folder.mkdir()
    (folder / "cluster.json").write_text(json.dumps({"port_base": 25090, "controllers": 3}))
    assert list(LocalCluster(name="q", base_dir=folder, port_base=25090).controllers) == [1, 2, 3]
    assert list(LocalCluster(name="q", base_dir=folder, port_base=25090, controllers=1).controllers) == [1]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["up", "--controllers", "3"]).controllers == 3
    assert parser.parse_args(["status"]).controllers is None  # as recorded


def test_waiting_for_the_cluster_says_what_it_waits_for(tmp_path, monkeypatch):
    """`kbot run` on a busy machine waited minutes in silence after the brokers registered (issue
    28): every wait over 2 s says what it is waiting for, when that changes and at intervals."""
    import time

    from localkafka.cluster import LocalCluster, Node

    c = LocalCluster(name="w", base_dir=tmp_path / "w", port_base=29090)
    monkeypatch.setattr(Node, "pid", lambda self: 4242)
    start = time.monotonic()
    monkeypatch.setattr(
        c, "registered_brokers", lambda timeout=5.0: [] if time.monotonic() - start < 3 else [101, 102, 103]
    )
    monkeypatch.setattr(c, "_metrics_up", lambda: time.monotonic() - start > 5)
    # every broker answers (the check itself probes real ports: nothing of this unit's listens there)
    monkeypatch.setattr(c, "serves", lambda broker_id, *a, **k: True)
    heard: list[str] = []
    c.wait_ready(30, progress=heard.append, progress_every_s=1.0)
    assert heard and all(h.startswith("waiting for the cluster (") for h in heard), heard
    assert any("registered brokers [], want [101, 102, 103]" in h for h in heard), heard
    assert any("brokers registered, waiting for metrics endpoints" in h for h in heard), heard
    assert not any(h.startswith("waiting for the cluster (0s)") or "(1s)" in h for h in heard)  # quiet under 2 s


def test_the_background_producer_keeps_trying_a_topic_its_client_does_not_know_yet():
    """produce() raises KafkaException(_UNKNOWN_TOPIC) while a new topic is missing from the client's
    metadata; the thread died on it (a chaos run's traceback), leaving a lab mode without writes."""
    import time

    from confluent_kafka import KafkaError, KafkaException

    from localkafka.faults import BackgroundProducer

    class Client:
        def __init__(self):
            self.calls = 0

        def produce(self, topic, key, value, on_delivery):
            self.calls += 1
            if self.calls <= 3:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))

        def poll(self, timeout):
            return 0

        def flush(self, timeout):
            return 0

    client = Client()
    bp = BackgroundProducer(client, "new-topic", rate=100, duration=None)
    bp.start()
    deadline = time.monotonic() + 30
    while bp.sent < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = bp.stop()
    assert stats["sent"] >= 5 and stats["errors"] >= 1, stats
