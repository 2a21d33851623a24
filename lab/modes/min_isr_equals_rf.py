"""min.insync.replicas = RF: an RF=3 topic with min.insync.replicas=3 (what `audit` flags) while
an acks=all producer (a separate process) writes to it, and one of its brokers is SIGKILLed. With
no replica to spare, the one loss puts every partition under min ISR: acks=all gets
NOT_ENOUGH_REPLICAS although two copies are still in sync. The right answer is under-min-isr,
critical, naming the topic, and says the floor equal to RF is why one broker stopped the writes."""

from lab import clients, probes
from lab.mode import Mode
from lab.modes.under_min_isr import acks_all_rejected

TOPIC = "lab-min-isr-rf"
BROKER = 103
PARTITIONS = 3


def inject(cluster):
    cluster.faults.create_topic(
        TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "3"}, timeout=90
    )
    child = clients.spawn_with_parent(clients.ACKS_ALL, cluster.bootstrap_servers, TOPIC, 20)
    facts = {"topic": TOPIC, "topics": [TOPIC], "broker_id": BROKER, "pids": [child.pid], "_children": [child]}
    killed = cluster.faults.kill_broker(BROKER)
    return {**facts, "pid": killed["pid"]}


def wait_for_symptom(cluster, facts):
    return out_of_every_isr_and_rejected(cluster, TOPIC, BROKER, PARTITIONS)


def out_of_every_isr_and_rejected(cluster, topic: str, broker: int, partitions: int) -> dict:
    """``broker`` gone from every ISR of ``topic``, then an acks=all write refused, seen from outside."""
    cluster.faults.wait_for(
        lambda: len(probes.isr_lacks(cluster, topic, broker)) == partitions,
        90,
        f"broker {broker} out of every ISR of {topic}",
    )
    return {
        "producer_error": cluster.faults.wait_for(
            lambda: acks_all_rejected(cluster, topic), 60, "an acks=all producer to get NOT_ENOUGH_REPLICAS"
        )
    }


def heal(cluster, facts):
    clients.stop(facts.get("pids", []), facts.get("_children"))


MODE = Mode(
    name="min-isr-equals-rf",
    summary=f"RF=3 / min.insync.replicas=3 topic under an acks=all producer, SIGKILL broker {BROKER}: "
    "one loss stops every acks=all write",
    expect_entry="under-min-isr",
    expect_severity="critical",
    questions=("why NotEnoughReplicas", "audit"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["topic"]],
)
