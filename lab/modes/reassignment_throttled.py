"""Reassignment under a throttle: an RF=2 topic on brokers 101 and 102, some MB in it, and a user's
own client (a separate process, lab/clients.py MOVE_THROTTLED) moves the replica on 102 to 103
under a 1 kB/s replication throttle, as kafka-reassign-partitions.sh --throttle would. While 103
copies, the partition lists three replicas and two in its ISR: under-replicated, and nothing is
broken. The right answer leads with the reassignment (expected, not a fault), says how far the copy
is and names the throttle holding it back with what to change; never the broker-loss steps.

Kafka applies a follower throttle to a replica out of the ISR only, which a replica being added is;
with 1 MB fetches a 1 kB/s quota lets about one fetch through per quota window (11 s), so the
16 MB copy takes minutes and is still running when the bot is asked."""

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from lab import clients, probes
from lab.mode import Mode

TOPIC = "lab-reassign"
LEADER, SOURCE, TARGET = 101, 102, 103
MB = 16
RATE = 1000  # bytes/s
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def inject(cluster):
    # min.insync.replicas=1, the usual floor for RF=2: the partition is under-replicated while it
    # copies, not at min ISR (the lab brokers default to 2)
    cluster.faults.create_topic(
        TOPIC, replica_assignment=[[LEADER, SOURCE]], config={"min.insync.replicas": "1"}, timeout=90
    )
    current, target = f"{LEADER},{SOURCE}", f"{LEADER},{TARGET}"
    done = clients.run_once(
        clients.MOVE_THROTTLED, cluster.bootstrap_servers, TOPIC, MB, RATE, current, target, timeout=240
    )
    if done.returncode != 0 or "MOVED" not in done.stdout:
        raise RuntimeError(f"the reassigning client failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return {
        "topic": TOPIC,
        "topics": [TOPIC],
        "partition": 0,
        "adding": TARGET,
        "removing": SOURCE,
        "rate": RATE,
        "megabytes": MB,
    }


def wait_for_symptom(cluster, facts):
    """Broker 103 listed as a replica of the partition (the move began) but not in its ISR (still
    copying), beside the two original replicas."""

    def moving():
        p = probes.partitions(cluster, TOPIC)[0]
        ok = TARGET in p["replicas"] and SOURCE in p["replicas"] and TARGET not in p["isr"]
        return {"replicas": p["replicas"], "isr": p["isr"]} if ok else None

    return cluster.faults.wait_for(moving, 60, f"broker {TARGET} added to {TOPIC}-0 and still out of its ISR")


def heal(cluster, facts):
    """Cancel the move (the partition goes back to 101, 102) and drop the brokers' throttle rates;
    the topic's throttled-replica lists go with the topic."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    ka = KafkaAdminClient(**cluster.kafka_python_conf())
    try:
        # a partition-level error (none in progress, topic gone) comes back in the result: nothing to undo
        ka.alter_partition_reassignments({TopicPartition(TOPIC, 0): None})
    finally:
        ka.close()
    for b in cluster.brokers:
        entries = [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in RATE_KEYS]
        res = ConfigResource(ResourceType.BROKER, str(b), incremental_configs=entries)
        for f in cluster.admin().incremental_alter_configs([res], request_timeout=15).values():
            f.result()


MODE = Mode(
    name="reassignment-throttled",
    summary=f"a client moves {TOPIC}-0's replica {SOURCE} -> {TARGET} ({MB} MB) under a {RATE} B/s replication "
    "throttle: URP while it copies, nothing broken",
    expect_entry="reassignment",
    expect_severity="warning",
    questions=("why URP", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["topic"], f["adding"]],
)
