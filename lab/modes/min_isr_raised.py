"""min.insync.replicas raised, then a broker lost: an RF=3 topic at min ISR 1 under an acks=all
producer; the user raises its min.insync.replicas to 3 (IncrementalAlterConfigs, what
`kafka-configs --alter --add-config` sends), and later broker 103 is SIGKILLed. A loss that was
harmless before now stops every acks=all write (NOT_ENOUGH_REPLICAS with two copies in sync). The
right answer is under-min-isr, critical, naming the topic (with the metric lake, `why` also names
the change and when it was made: tests/lake/test_lake_changes.py)."""

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from lab import clients
from lab.mode import Mode
from lab.modes.min_isr_equals_rf import out_of_every_isr_and_rejected

TOPIC = "lab-min-isr-raised"
BROKER = 103
PARTITIONS = 3


def inject(cluster):
    cluster.faults.create_topic(
        TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "1"}, timeout=90
    )
    child = clients.spawn_with_parent(clients.ACKS_ALL, cluster.bootstrap_servers, TOPIC, 20)
    facts = {"topic": TOPIC, "topics": [TOPIC], "broker_id": BROKER, "pids": [child.pid], "_children": [child]}
    raised = ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[raised])
    for f in cluster.admin().incremental_alter_configs([resource], request_timeout=15).values():
        f.result(30)
    killed = cluster.faults.kill_broker(BROKER)
    return {**facts, "pid": killed["pid"]}


def wait_for_symptom(cluster, facts):
    return out_of_every_isr_and_rejected(cluster, TOPIC, BROKER, PARTITIONS)


def heal(cluster, facts):
    clients.stop(facts.get("pids", []), facts.get("_children"))


MODE = Mode(
    name="min-isr-raised",
    summary=f"min.insync.replicas raised from 1 to 3 on an RF=3 topic under acks=all, then SIGKILL broker {BROKER}",
    expect_entry="under-min-isr",
    expect_severity="critical",
    questions=("why NotEnoughReplicas",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["topic"]],
)
