"""Retention lowered under a lagging group: a group read a little, committed and stopped while a
producer keeps writing; the user lowers its topic's retention.ms to 5 s and segment.ms to 2 s (so
the change applies at once rather than at the next 1 GB segment). The lab's brokers check retention
every 5 s (lab/topology.py; Kafka's default is 5 minutes), so the oldest segments go, past the
group's committed offsets: records deleted before the group read them. The right answer is lag
beyond retention, critical, naming the group and saying the data was lost."""

from confluent_kafka import Consumer, TopicPartition

from lab.mode import Mode
from lab.modes.consumer_stop import heal

GROUP = "lab-retained"
TOPIC = "lab-retained-topic"
PARTITIONS = 3  # localkafka's lagging group makes its topic with 3


def inject(cluster):
    lagging = cluster.faults.lagging_consumer_group(GROUP, TOPIC, initial=30, rate=50)
    facts = {"group": GROUP, "topic": TOPIC, "topics": [TOPIC], "_lagging": lagging}
    cluster.faults.set_topic_config(TOPIC, {"retention.ms": "5000", "segment.ms": "2000"})
    return facts


def wait_for_symptom(cluster, facts):
    """A partition's log start past the group's committed offset, read with the lab's own consumer."""
    committed = facts["_lagging"].committed
    reader = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "lab-retained-watch"})

    def deleted_unread():
        starts = {p: reader.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[0] for p in range(PARTITIONS)}
        lost = {p: starts[p] - committed[p] for p in committed if starts[p] > committed[p]}
        return {"deleted_unread": lost} if lost else None

    try:
        return cluster.faults.wait_for(deleted_unread, 120, f"retention to delete records {GROUP} had not read")
    finally:
        reader.close()


MODE = Mode(
    name="retention-lowered",
    summary="retention.ms lowered to 5 s under a stopped group while a producer writes: unread records deleted",
    expect_entry="lag-beyond-retention",
    expect_severity="critical",
    questions=("lag {group}",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,  # the lagging group's producer stopped, as for a stopped group
    topics=(TOPIC,),
    named=lambda f: [f["group"]],
)
