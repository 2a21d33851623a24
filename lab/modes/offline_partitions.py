"""Offline partitions: an RF=1 topic whose only replicas are on broker 103, which dies."""

from lab.mode import Mode

TOPIC = "lab-offline"
BROKER = 103


def inject(cluster):
    # localkafka's fault does the whole thing: topic on one broker, records, SIGKILL, leaders gone
    info = cluster.faults.offline_partitions(TOPIC, broker_id=BROKER, partitions=2)
    return {
        "broker_id": BROKER,
        "pid": info["pid"],
        "topic": TOPIC,
        "topics": [TOPIC],
        "partitions": info["partitions"],
    }


MODE = Mode(
    name="offline-partitions",
    summary=f"RF=1 topic on broker {BROKER}, SIGKILL it: its partitions have no leader",
    expect_entry="offline-partitions",
    expect_severity="critical",
    questions=("why offline", "status"),
    inject=inject,  # inject already waited until the partitions had no leader
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"], f"{f['topic']}-0"],
)
