"""min.insync.replicas raised, then a broker lost: an RF=3 topic at min ISR 1 under an acks=all
producer; the user raises its min.insync.replicas to 3 (IncrementalAlterConfigs, what
`kafka-configs --alter --add-config` sends), and later broker 103 is SIGKILLed. A loss that was
harmless before now stops every acks=all write (NOT_ENOUGH_REPLICAS with two copies in sync). The
right answer is under-min-isr, critical, naming the topic (with the metric lake, `why` also names
the change and when it was made: tests/lake/test_lake_changes.py)."""

from lab.mode import Mode
from lab.modes.min_isr_equals_rf import heal, out_of_every_isr_and_rejected, written_then_killed

TOPIC = "lab-min-isr-raised"
BROKER = 103
PARTITIONS = 3


def inject(cluster):
    return written_then_killed(cluster, TOPIC, BROKER, PARTITIONS, min_isr="1", raised_to="3")


def wait_for_symptom(cluster, facts):
    return out_of_every_isr_and_rejected(cluster, TOPIC, BROKER, PARTITIONS)


MODE = Mode(
    name="min-isr-raised",
    summary=f"min.insync.replicas raised from 1 to 3 on an RF=3 topic under acks=all, then SIGKILL broker {BROKER}",
    expect_entry="under-min-isr",
    expect_severity="critical",
    questions=("why NotEnoughReplicas",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,  # the producer process stopped, as for min ISR = RF
    topics=(TOPIC,),
    named=lambda f: [f["topic"]],
)
