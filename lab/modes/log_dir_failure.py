"""Log-dir failure: one of broker 103's two log dirs starts refusing writes. From outside, the lab
puts a directory where the broker writes its checkpoint temp file in that log dir
(``replication-offset-checkpoint.tmp``), so the broker's next checkpoint (every 5 s) fails with an
I/O error (EISDIR) - the broker takes the whole dir offline, as it does on a failing disk, and
keeps serving from its other dir.

Writes keep flowing while the dir fails, as they do on a real cluster. That matters: with no new
records a stopped follower still counts as caught up (its log end equals the leader's), so the
leaders never drop it, and the ISR then changes only if the controller already knew which dir
holds each replica - the broker reports that asynchronously after creating the replica, and on a
busy machine the dir can fail first (CI saw 103 stay in the ISR for 90 s that way)."""

import shutil

from lab.mode import Mode
from lab.modes import _disk

TOPIC = "lab-log-dir"
TRAP = "replication-offset-checkpoint.tmp"
PARTITIONS = 4


def inject(cluster):
    on2 = _disk.topic_on_disk2(cluster, TOPIC, partitions=PARTITIONS)
    _disk.produce(cluster, TOPIC, on2, 50)
    (cluster.disk2 / TRAP).mkdir(exist_ok=True)
    # uniform keys: every partition's log end moves, so the leaders see 103 fall behind
    producer = cluster.faults.hot_key_producer(TOPIC, rate=100, hot_ratio=0.0, partitions=PARTITIONS)
    return _disk.facts(cluster, TOPIC, on2, producer=producer.name)


def wait_for_symptom(cluster, facts):
    return _disk.wait_out_of_isr(
        cluster,
        TOPIC,
        facts["partitions_in_dir"],
        f"broker {_disk.BROKER}'s replicas in {cluster.disk2} to leave their ISRs",
    )


def heal(cluster, facts):
    cluster.faults.stop_background()
    shutil.rmtree(cluster.disk2 / TRAP, ignore_errors=True)
    _disk.restart_broker(cluster)


MODE = Mode(
    name="log-dir-failure",
    summary="one of broker 103's two log dirs fails writes (an I/O error from outside): that dir goes offline",
    expect_entry="log-dir-failure",
    expect_severity="warning",
    questions=("why URP", "why KafkaStorageException"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    needs=("disk2",),
)
