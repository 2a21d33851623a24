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
    return written_then_killed(cluster, TOPIC, BROKER, PARTITIONS, min_isr="3")


def written_then_killed(cluster, topic: str, broker: int, partitions: int, min_isr: str, raised_to: str = "") -> dict:
    """An RF=3 ``topic`` at ``min_isr`` under an acks=all producer process, its min ISR raised to
    ``raised_to`` from outside when given, then ``broker`` SIGKILLed."""
    cluster.faults.create_topic(
        topic, partitions=partitions, replication_factor=3, config={"min.insync.replicas": min_isr}, timeout=90
    )
    child = clients.spawn_with_parent(clients.ACKS_ALL, cluster.bootstrap_servers, topic, 20)
    facts = {"topic": topic, "topics": [topic], "broker_id": broker, "pids": [child.pid], "_children": [child]}
    if raised_to:
        cluster.faults.set_topic_config(topic, {"min.insync.replicas": raised_to})
    killed = cluster.faults.kill_broker(broker)
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
