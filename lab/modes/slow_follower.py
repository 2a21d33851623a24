"""Slow follower: broker 103 stays alive and registered, but its replica fetcher stops keeping up.
The lab freezes broker 103's second log dir from outside (fsfreeze on the lab's small ext4
filesystem): the fetcher thread blocks in its next append there, as it would on a disk that stalls
for seconds, while the broker's heartbeats (no disk) go on. A producer keeps the leaders' log ends
moving, so after replica.lag.time.max.ms the leaders drop 103 from their ISRs.

Why not a replication throttle: Kafka throttles only replicas that are already out of the ISR
(ReplicaFetcherThread.shouldFollowerThrottle checks isReplicaInSync), so a throttle can slow the
catch-up of a lagging follower but cannot push an in-sync one out."""

import subprocess

from lab.mode import Mode
from lab.modes import _disk

TOPIC = "lab-slow-follower"
BROKER = _disk.BROKER
PARTITIONS = 4


def _freeze(cluster, on: bool) -> None:
    res = subprocess.run(
        ["fsfreeze", "-f" if on else "-u", str(cluster.disk2_mount)], capture_output=True, text=True, timeout=60
    )
    if res.returncode != 0 and on:
        raise RuntimeError(f"fsfreeze -f {cluster.disk2_mount} failed: {res.stderr.strip()}")


def inject(cluster):
    on2 = _disk.topic_on_disk2(cluster, TOPIC, partitions=PARTITIONS)
    # uniform keys (hot_ratio 0): every partition's log end moves, so every stalled replica lags
    producer = cluster.faults.hot_key_producer(TOPIC, rate=200, hot_ratio=0.0, partitions=PARTITIONS)
    _freeze(cluster, True)
    return {
        "broker_id": BROKER,
        "topic": TOPIC,
        "topics": [TOPIC],
        "frozen_dir": str(cluster.disk2_mount),
        "partitions_in_dir": on2,
        "producer": producer.name,
    }


def wait_for_symptom(cluster, facts):
    # Any partition of the topic counts: broker 103 fetches from each leader on one thread, so the
    # thread blocked on the frozen dir also stops the partitions it follows on its other dir - and
    # a frozen-dir partition that got no new record after the freeze still counts as caught up.
    return _disk.wait_out_of_isr(
        cluster,
        TOPIC,
        list(range(PARTITIONS)),
        f"follower {BROKER} (frozen log dir) to leave an ISR of {TOPIC}",
        every=False,
    )


def heal(cluster, facts):
    _freeze(cluster, False)
    cluster.faults.stop_background()


MODE = Mode(
    name="slow-follower",
    summary=f"freeze broker {BROKER}'s second log dir (fsfreeze) under load: its fetcher stalls, "
    "the broker stays registered, its replicas leave the ISR",
    expect_entry="slow-follower",
    expect_severity="warning",
    questions=("why URP", "why IsrShrinksPerSec"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    needs=("ext4",),
)
