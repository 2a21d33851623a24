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
import os, sys
from confluent_kafka import Producer
bootstrap, topic, parent = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1000000,
              "compression.type": "none", "max.in.flight.requests.per.connection": 5,
              "logger": lambda *a, **k: None})
value = (b"kafka-lab-load " * 70)[:1000]
print("READY", flush=True)
i = 0
while os.getppid() == parent:
    try:
        p.produce(topic, value=value, partition=i % 6)
        i += 1
    except BufferError:
        p.poll(0.05)  # the broker is behind: that is the point
    if i % 100 == 0:
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
