"""What changed? on the real cluster: two reads of its metadata (live/metadata_snapshot.py)
around changes made from outside with the user's own AdminClient and a broker restart, and the
diff (live/change_events.py) names each change with its before and after."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from live import AdminGateway, ClusterConfig
from live.change_events import diff
from live.metadata_snapshot import read_metadata
from localkafka.cluster import scrape

pytestmark = pytest.mark.kafka


def _config(cluster) -> ClusterConfig:
    targets = ",".join(f"{bid}={node.metrics_url}" for bid, node in sorted(cluster.brokers.items()))
    return ClusterConfig(
        name="changes-tests",
        bootstrap=cluster.bootstrap_servers,
        expected_brokers=(101, 102, 103),
        metrics_targets=targets,
    )


async def _read(cluster):
    async with AdminGateway(_config(cluster), timeout_s=15) as gw:
        return await read_metadata(gw)


def _done(futures) -> None:
    for f in futures.values():
        f.result(30)


def test_changes_made_from_outside_are_seen_with_before_and_after(kafka_cluster, unique):
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    kept = f"changes-kept-{unique}"
    _done(admin.create_topics([NewTopic(kept, 3, 3, config={"min.insync.replicas": "1"})], request_timeout=30))
    kafka_cluster.faults.wait_for(lambda: kept in admin.list_topics(timeout=10).topics, 30, f"{kept} listed")
    baseline = asyncio.run(_read(kafka_cluster))
    assert diff(None, baseline) == []  # a baseline, not a burst of "created"
    assert baseline.topics is not None and kept in baseline.topics

    # the user's own changes: min ISR raised, retention lowered, a topic created, broker 102 restarted
    entries = [
        ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
    ]
    _done(admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, kept, incremental_configs=entries)]))
    made = f"changes-new-{unique}"
    _done(admin.create_topics([NewTopic(made, 2, 3)], request_timeout=30))
    kafka_cluster.faults.restart_broker(102, timeout=120)
    # the restarted JVM's exporter is up a moment after the broker registers (the collector's next
    # round would read it; carry_forward keeps the old start time meanwhile)
    node = kafka_cluster.brokers[102]
    kafka_cluster.faults.wait_for(lambda: scrape(node.metrics_url) is not None, 120, "broker 102's exporter answering")

    after = asyncio.run(_read(kafka_cluster))
    events = {(e.kind, e.resource, e.change): (e.before, e.after) for e in diff(baseline, after)}
    assert events[("config", f"topic {kept}", "min.insync.replicas 1 -> 3")] == ("1", "3"), events
    assert events[("config", f"topic {kept}", "retention.ms set to 60000")] == (None, "60000"), events
    assert events[("topic", f"topic {made}", "created")] == (None, "2 partitions, RF 3"), events
    restarted = events.get(("broker", "broker 102", "restarted"))
    assert restarted is not None, events
    assert not any(e[1] in ("broker 101", "broker 103") for e in events), events  # no restart of the others
