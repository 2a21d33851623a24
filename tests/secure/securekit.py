"""Helpers of the tests/secure tests (a module of its own: "conftest" is not importable by name
when several test folders run together)."""

from __future__ import annotations

import uuid

import yaml
from waiting import wait_until


def write_clusters_file(path, clusters: dict, default: str | None = None):
    path.write_text(yaml.safe_dump({"default": default or next(iter(clusters)), "clusters": clusters}))
    path.chmod(0o600)
    return path


def skewed_topic(secure) -> tuple[str, int]:
    """A one-partition topic whose leader is not its preferred replica (the replicas reordered by
    the super user, same set: nothing to copy). Returns (topic, preferred replica)."""
    from confluent_kafka.admin import NewTopic
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    def partition(name):
        return secure.admin().list_topics(name, timeout=10).topics[name].partitions.get(0)

    name = f"skewed-{uuid.uuid4().hex[:6]}"
    secure.admin().create_topics([NewTopic(name, 1, 3)])[name].result(30)
    p = wait_until(
        lambda: (lambda x: x if x is not None and x.leader >= 0 else None)(partition(name)),
        30,
        "a leader",
        interval=0.5,
    )
    others = [b for b in p.replicas if b != p.leader]
    ka = KafkaAdminClient(**secure.kafka_python_conf())
    try:
        ka.alter_partition_reassignments({TopicPartition(name, 0): [others[0], p.leader, others[1]]})
    finally:
        ka.close()
    wait_until(lambda: partition(name).replicas[0] == others[0], 30, "the new replica order", interval=0.5)
    return name, others[0]
