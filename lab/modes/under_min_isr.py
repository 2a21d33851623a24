"""Under min ISR: RF=2, min.insync.replicas=2, and one of the two replicas' broker dies, so
acks=all producers get NotEnoughReplicas (seen from a separate producer)."""

from confluent_kafka import KafkaError, Producer

from lab import probes
from lab.mode import Mode
from localkafka.cluster import quiet_logger

TOPIC = "lab-min-isr"
BROKER = 103


def inject(cluster):
    cluster.faults.create_topic(
        TOPIC, replica_assignment=[[102, BROKER], [102, BROKER]], config={"min.insync.replicas": "2"}, timeout=90
    )
    killed = cluster.faults.kill_broker(BROKER)
    return {"broker_id": BROKER, "pid": killed["pid"], "topic": TOPIC, "topics": [TOPIC]}


def acks_all_rejected(cluster, topic: str = TOPIC) -> str | None:
    """Produce one acks=all record; the broker's error name if it refuses for lack of replicas."""
    errors: list = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "logger": quiet_logger(),
            "message.timeout.ms": 5000,
            "retries": 0,
        }
    )
    p.produce(topic, value=b"probe", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    err = errors[0] if errors else None
    if err is not None and err.code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return err.name()
    return None


def wait_for_symptom(cluster, facts):
    cluster.faults.wait_for(
        lambda: len(probes.isr_lacks(cluster, TOPIC, BROKER)) == 2, 90, f"broker {BROKER} out of the ISRs of {TOPIC}"
    )
    return {
        "producer_error": cluster.faults.wait_for(
            lambda: acks_all_rejected(cluster), 60, "an acks=all producer to get NOT_ENOUGH_REPLICAS"
        )
    }


MODE = Mode(
    name="under-min-isr",
    summary=f"RF=2 / min.insync.replicas=2 topic, SIGKILL broker {BROKER}: acks=all gets NOT_ENOUGH_REPLICAS",
    expect_entry="under-min-isr",
    expect_severity="critical",
    questions=("why NotEnoughReplicas", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    topics=(TOPIC,),
    named=lambda f: [f["topic"]],
)
