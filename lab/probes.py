"""Observing a symptom from the outside of the bot: metadata, exporter /metrics, offsets, the
log dirs on the filesystem. Used by the modes' wait_for_symptom; never by the code being judged."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from localkafka.cluster import metric_value, scrape


def partitions(cluster, topic: str) -> list[dict]:
    return cluster.faults.describe([topic])[topic]


def isr_lacks(cluster, topic: str, broker: int) -> list[int]:
    """Partitions of ``topic`` that have ``broker`` as replica but not in their ISR."""
    return [p["partition"] for p in partitions(cluster, topic) if broker in p["replicas"] and broker not in p["isr"]]


def not_registered(cluster, broker: int) -> bool:
    return broker not in cluster.registered_brokers(timeout=3)


def metric(cluster, node_id: int, name: str, **labels) -> float | None:
    text = scrape(cluster.node(node_id).metrics_url)
    return None if text is None else metric_value(text, name, **labels)


def end_offsets(cluster, topic: str, parts: list[int], isolation: str = "read_uncommitted") -> dict[int, int]:
    from confluent_kafka import IsolationLevel

    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    res = cluster.admin().list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in parts}, isolation_level=level, request_timeout=10
    )
    return {tp.partition: f.result().offset for tp, f in res.items()}


def partitions_in_dir(log_dir, topic: str) -> list[int]:
    """Partitions of ``topic`` whose replica lives in ``log_dir`` (Kafka names them topic-N)."""
    out = []
    for d in log_dir.iterdir() if log_dir.exists() else []:
        name, _, num = d.name.rpartition("-")
        if d.is_dir() and name == topic and num.isdigit():
            out.append(int(num))
    return sorted(out)
