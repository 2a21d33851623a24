"""Request-handler saturation: broker 101's I/O thread pool is cut to one thread (num.io.threads,
a dynamic broker config, set by a separate admin client) and two producer processes flood it with
large uncompressed batches for a topic with compression.type=gzip at level 9, so that one handler
thread compresses every batch itself: it is never idle and requests queue behind it. The records
are large, so a producer spends a copy on each while the handler spends a deflate: the broker
stays the bottleneck on a machine busy with other work."""

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from lab import clients, probes
from lab.mode import Mode
from localkafka.faults import _read_line

TOPIC = "lab-handlers"
BROKER = 101
IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
STATIC_IO_THREADS = "4"  # localkafka/config/broker.properties


def _applied(cluster) -> str:
    res = ConfigResource(ResourceType.BROKER, str(BROKER))
    configs = cluster.admin().describe_configs([res], request_timeout=10)[res].result()
    return configs["num.io.threads"].value


def _io_threads(cluster, value: str | None) -> None:
    """Set (or with None drop) broker 101's dynamic num.io.threads and wait until the broker
    reports it: the broker checks each change against the pool size it runs with, so the next
    halving step must not arrive before this one is applied."""
    op = AlterConfigOpType.SET if value else AlterConfigOpType.DELETE
    res = ConfigResource(
        ResourceType.BROKER,
        str(BROKER),
        incremental_configs=[ConfigEntry("num.io.threads", value or "", incremental_operation=op)],
    )
    for f in cluster.admin().incremental_alter_configs([res], request_timeout=15).values():
        f.result()
    want = value or STATIC_IO_THREADS
    cluster.faults.wait_for(lambda: _applied(cluster) == want, 60, f"num.io.threads={want} on broker {BROKER}")


def inject(cluster):
    # replicas on 101 and 102 only, and little retention: the flood must not fill broker 103's
    # small second disk (that would be the full-disk mode, not this one)
    cluster.faults.create_topic(
        TOPIC,
        replica_assignment=[[BROKER, 102]] * 6,
        timeout=90,
        config={
            "compression.type": "gzip",
            "compression.gzip.level": "9",  # the slowest deflate: most handler time per byte
            "segment.bytes": str(1 << 20),
            "retention.bytes": str(4 << 20),
            "min.insync.replicas": "1",
        },
    )
    # the broker accepts at most halving the pool per update (DynamicThreadPool): 4 -> 2 -> 1
    _io_threads(cluster, "2")
    _io_threads(cluster, "1")
    children = [clients.spawn_with_parent(clients.FLOOD, cluster.bootstrap_servers, TOPIC) for _ in range(2)]
    facts = {
        "broker_id": BROKER,
        "topic": TOPIC,
        "topics": [TOPIC],
        "pids": [c.pid for c in children],
        "_children": children,
    }
    for c in children:
        if _read_line(c, 60) != "READY":
            raise RuntimeError("a load producer did not start")
    return facts


def wait_for_symptom(cluster, facts):
    # the exporter's one-minute idle ratio of 101's handlers, from outside the bot
    def busy():
        idle = probes.metric(cluster, BROKER, IDLE)
        return {"request_handler_idle": round(idle, 3)} if idle is not None and idle < 0.2 else None

    # the gauge is a one-minute moving average: it takes a minute or two to come down, longer on a
    # busy machine, where the flooding producers get less CPU too
    return cluster.faults.wait_for(busy, 900, f"broker {BROKER}'s request handlers to be <20% idle", interval=2)


def heal(cluster, facts):
    clients.stop(facts.get("pids", []), facts.get("_children"))
    # back up in doubling steps too (1 -> 2 -> the static 4), then drop the dynamic setting
    _io_threads(cluster, "2")
    _io_threads(cluster, None)


MODE = Mode(
    name="handler-saturation",
    summary=f"broker {BROKER} down to 1 I/O thread, flooded by 2 producer processes: request handlers never idle",
    expect_entry="handler-saturation",
    expect_severity="warning",
    questions=("why RequestHandlerAvgIdlePercent", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
)
