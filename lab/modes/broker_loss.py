"""Broker loss: SIGKILL broker 102 (no controlled shutdown), as a crash or a pulled plug does."""

from lab import probes
from lab.mode import Mode

TOPIC = "lab-broker-loss"
BROKER = 102


def inject(cluster):
    cluster.faults.create_topic(TOPIC, partitions=3, replication_factor=3, timeout=90)
    killed = cluster.faults.kill_broker(BROKER)
    return {"broker_id": BROKER, "pid": killed["pid"], "topic": TOPIC, "topics": [TOPIC]}


def wait_for_symptom(cluster, facts):
    # fenced by the controller (4 s session) and gone from every ISR of the topic
    return cluster.faults.wait_for(
        lambda: probes.not_registered(cluster, BROKER) and len(probes.isr_lacks(cluster, TOPIC, BROKER)) == 3,
        90,
        f"broker {BROKER} out of the cluster and its ISRs",
    )


MODE = Mode(
    name="broker-loss",
    summary=f"SIGKILL broker {BROKER}; its replicas leave every ISR (URP flat)",
    expect_entry="broker-loss",
    expect_severity="warning",
    questions=("why URP", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    # a SIGKILLed broker and one Kafka halted over failed log dirs look the same from outside
    # (one-dir-halt): the answer must say so, not pick one
    expect_verdict="cannot be told from here",
)
