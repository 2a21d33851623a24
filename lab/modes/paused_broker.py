"""Paused broker (GC-like): SIGSTOP broker 103 for longer than its session timeout, the way a long
stop-the-world pause freezes every thread of the JVM at once. The process is alive throughout."""

from lab import probes
from lab.mode import Mode

TOPIC = "lab-paused"
BROKER = 103


def inject(cluster):
    cluster.faults.create_topic(TOPIC, partitions=3, replication_factor=3, timeout=90)
    paused = cluster.faults.pause_broker(BROKER)
    return {"broker_id": BROKER, "pid": paused["pid"], "topic": TOPIC, "topics": [TOPIC]}


def wait_for_symptom(cluster, facts):
    return cluster.faults.wait_for(
        lambda: len(probes.isr_lacks(cluster, TOPIC, BROKER)) == 3,
        90,
        f"paused broker {BROKER} to leave the ISRs of {TOPIC}",
    )


def heal(cluster, facts):
    pid = cluster.brokers[BROKER].pid()
    if pid:  # (a dead broker is restarted by the generic heal)
        cluster.faults.resume_broker(BROKER)


MODE = Mode(
    name="paused-broker",
    summary=f"SIGSTOP broker {BROKER} (a stop-the-world pause longer than the session timeout)",
    expect_entry="gc-pauses",
    expect_severity="warning",
    questions=("why IsrShrinksPerSec", "why URP"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
)
