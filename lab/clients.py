"""Load and consumer clients the lab runs as separate processes (``python -c``), so the load a
mode puts on the cluster never runs inside the process that asks the bot. Every child watches
its parent and exits when it is gone, so an interrupted run leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from localkafka import procs

# Uncompressed produce requests of large batches, as fast as the client can send them; the lab
# gives the topic compression.type=gzip, so the broker's request handler thread has to compress
# every batch itself - a cheap client making expensive requests. argv: bootstrap, topic, parent.
FLOOD = r"""
import os, random, sys
from confluent_kafka import Producer
bootstrap, topic, parent = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1000000,
              "compression.type": "none", "max.in.flight.requests.per.connection": 5,
              "queue.buffering.max.kbytes": 32768, "logger": lambda *a, **k: None})
# large text-like values: producing one costs a copy, recompressing it costs the broker's handler
# far more, so the broker stays the bottleneck however little CPU these processes get
rng = random.Random(os.getpid())
words = [("kafka", "lab", "load", "broker", "handler", "request")[i % 6] + str(i) for i in range(400)]
values = [" ".join(rng.choice(words) for _ in range(40000)).encode()[:200000] for _ in range(4)]
print("READY", flush=True)
i = 0
while os.getppid() == parent:
    try:
        p.produce(topic, value=values[i % 4], partition=i % 6)
        i += 1
    except BufferError:
        p.poll(0.05)  # the broker is behind: that is the point
    p.poll(0)
"""

# A kafka-python consumer (it uses incremental fetch sessions, KIP-227) reading some partitions.
# argv: bootstrap, topic, comma list of partitions, parent.
SESSION_CONSUMER = r"""
import logging, os, sys
logging.disable(logging.CRITICAL)
from kafka import KafkaConsumer, TopicPartition
bootstrap, topic, parts, parent = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
c.assign([TopicPartition(topic, int(p)) for p in parts.split(",")])
c.seek_to_beginning()
first = True
while os.getppid() == parent:
    c.poll(timeout_ms=500)
    if first:
        print("READY", flush=True)
        first = False
"""


# A steady acks=1 producer writing to some partitions of a topic (``rate`` records a second), so
# their leader's log end keeps moving. argv: bootstrap, topic, comma list of partitions, rate, parent.
STEADY_TO_PARTITIONS = r"""
import os, sys
from confluent_kafka import Producer
bootstrap, topic, parts, rate, parent = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
parts = [int(n) for n in parts.split(",")]
p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "logger": lambda *a, **k: None})
sent = [0]
def done(err, msg):
    if err is None:
        sent[0] += 1
        if sent[0] == len(parts):
            print("READY", flush=True)
i = 0
while os.getppid() == parent:
    try:
        p.produce(topic, value=b"lab-%d" % i, partition=parts[i % len(parts)], on_delivery=done)
        i += 1
    except BufferError:
        pass
    p.poll(1.0 / rate)
"""

# A steady acks=all producer (an application that needs every write acknowledged by the ISR),
# ``rate`` records a second over the topic's partitions; it keeps going through errors.
# argv: bootstrap, topic, rate, parent.
ACKS_ALL = r"""
import os, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, parent = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000,
              "logger": lambda *a, **k: None})
print("READY", flush=True)
i = 0
while os.getppid() == parent:
    try:
        p.produce(topic, value=b"acks-all-%d" % i)
        i += 1
    except BufferError:
        pass
    p.poll(1.0 / rate)
"""

# A producer under its own client id (the one a client quota names), ``rate`` records of 1 kB a
# second; it prints READY, then THROTTLED once a broker reports delaying it (librdkafka's per-broker
# throttle window in its statistics). argv: bootstrap, topic, client id, rate, parent.
QUOTA_PRODUCER = r"""
import json, os, sys
from confluent_kafka import Producer
bootstrap, topic, client, rate, parent = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
said = [False]
def stats(text):
    throttled = any((b.get("throttle") or {}).get("max", 0) > 0 for b in json.loads(text)["brokers"].values())
    if throttled and not said[0]:
        said[0] = True
        print("THROTTLED", flush=True)
p = Producer({"bootstrap.servers": bootstrap, "client.id": client, "acks": "all", "linger.ms": 5,
              "statistics.interval.ms": 1000, "stats_cb": stats, "logger": lambda *a, **k: None})
print("READY", flush=True)
while os.getppid() == parent:
    try:
        p.produce(topic, value=b"q" * 1024)
    except BufferError:
        pass
    p.poll(1.0 / rate)
"""

# A user's own reassignment under a replication throttle, the way kafka-reassign-partitions.sh
# --execute --throttle makes one: write ``mb`` MB to partition 0 (acks=all, so every current
# replica holds it), set the throttle (the rate on every broker; on the topic, the current replicas
# as leader-side and the added ones as follower-side throttled replicas), then move the partition to
# the target replicas. Prints MOVED and exits; the move goes on in the cluster.
# argv: bootstrap, topic, mb, rate (bytes/s), current replicas "101,102", target replicas "101,103".
MOVE_THROTTLED = r"""
import os, sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
bootstrap, topic, mb, rate, current, target = sys.argv[1:7]
current = [int(b) for b in current.split(",")]
target = [int(b) for b in target.split(",")]
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "compression.type": "none",
              "logger": lambda *a, **k: None})
value = os.urandom(100_000)
for _ in range(int(mb) * 10):
    while True:
        try:
            p.produce(topic, value=value, partition=0)
            break
        except BufferError:
            p.poll(0.1)
if p.flush(120):
    sys.exit("records left unsent")
admin = AdminClient({"bootstrap.servers": bootstrap})

def alter(kind, name, settings):
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    res = ConfigResource(kind, name, incremental_configs=entries)
    for f in admin.incremental_alter_configs([res], request_timeout=15).values():
        f.result()

for b in sorted(admin.list_topics(timeout=15).brokers):
    alter(ResourceType.BROKER, str(b), {"leader.replication.throttled.rate": rate,
                                        "follower.replication.throttled.rate": rate})
alter(ResourceType.TOPIC, topic, {
    "leader.replication.throttled.replicas": ",".join(f"0:{b}" for b in current),
    "follower.replication.throttled.replicas": ",".join(f"0:{b}" for b in target if b not in current),
})
ka = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
err = ka.alter_partition_reassignments({TopicPartition(topic, 0): target}).get(TopicPartition(topic, 0))
ka.close()
if err is not None:
    sys.exit(f"reassignment refused: {err}")
print("MOVED", flush=True)
"""


def run_once(code: str, *args, timeout: float) -> subprocess.CompletedProcess:
    """Run a client that does one job and exits; its output (stderr too) for the error message."""
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=timeout,
    )


def spawn(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            *map(str, args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def spawn_with_parent(code: str, *args) -> subprocess.Popen:
    """``code`` gets our pid as its last argument, to exit when we are gone."""
    return spawn(code, *args, os.getpid())


def stop(pids: list[int], children: list[subprocess.Popen] | None = None) -> None:
    for pid in pids:
        procs.signal_pid(pid, signal.SIGKILL)
    for child in children or []:
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            pass
        if child.stdout is not None:
            child.stdout.close()
