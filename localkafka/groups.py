"""Consumer-group faults made by separate client processes.

The bot is judged on what it reads from the cluster, so the fault must not come from inside the
process under test: each member of a storming group, and the producer feeding it, is its own
``python -c`` child (``sys.executable``) with its own librdkafka client. The children watch their
parent and exit when it is gone, so an interrupted test run leaves no consumers behind.

* :func:`rebalance_storm`: members that join a group, take a few records, commit and leave again,
  in a loop, while a producer keeps writing: every join and every leave starts a rebalance of the
  classic protocol, so the group spends its time in PreparingRebalance / CompletingRebalance and
  its member ids keep changing.
* :func:`stopped_group`: a group that committed and then lost all its consumers while a producer
  keeps writing (``FaultInjector.lagging_consumer_group``): state EMPTY, lag growing.
* :func:`steady_group`: the healthy control, a member that keeps up (classic or KIP-848 protocol).
* :func:`slow_group`: a member that keeps consuming and committing, but spends so long on each record
  that a producer process writing ten times faster outruns it on every partition.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from localkafka.cluster import LocalCluster

# A member of a storming group. argv: bootstrap, group, topic, parent pid, max seconds.
_CHURN = r"""
import os, random, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, parent, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
end = time.monotonic() + limit
quiet = lambda *a, **k: None
while time.monotonic() < end and os.getppid() == parent:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                  "max.poll.interval.ms": 10000, "partition.assignment.strategy": "range",
                  "logger": quiet, "error_cb": quiet})
    c.subscribe([topic])
    joined, batches = time.monotonic(), 0
    # Two slow batches, then leave and join again. Each join and each leave makes the coordinator
    # rebalance the whole group (classic protocol, eager assignor), and a member busy with a batch
    # (not polling) holds every rebalance in PreparingRebalance until it polls again.
    while batches < 2 and time.monotonic() - joined < 20 and os.getppid() == parent:
        msgs = [m for m in c.consume(num_messages=20, timeout=0.5) if m.error() is None]
        if msgs:
            batches += 1
            time.sleep(random.uniform(1.0, 2.5))
            try:
                c.commit(asynchronous=False)
            except Exception:
                pass  # the group is rebalancing: that is the point
    c.close()
    print("cycle", batches, flush=True)
"""

# A producer writing ``rate`` records/s. argv: bootstrap, topic, rate, parent pid, max seconds.
_PRODUCE = r"""
import os, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, parent, limit = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": lambda *a, **k: None})
end, i = time.monotonic() + limit, 0
while time.monotonic() < end and os.getppid() == parent:
    p.produce(topic, key=str(i % 97).encode(), value=b"x" * 64)
    p.poll(0)
    i += 1
    time.sleep(1.0 / rate)
p.flush(10)
"""


# A steady member that keeps consuming and committing. argv: bootstrap, group, topic, parent pid,
# max seconds, group.protocol ("classic", or "consumer" for KIP-848).
_STEADY = r"""
import os, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, parent, limit, protocol = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
quiet = lambda *a, **k: None
conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 500, "group.protocol": protocol,
        "logger": quiet, "error_cb": quiet}
if protocol == "classic":
    conf["session.timeout.ms"] = 6000
c = Consumer(conf)
c.subscribe([topic])
end = time.monotonic() + limit
while time.monotonic() < end and os.getppid() == parent:
    c.poll(0.2)
c.close()
"""


# A member that works slowly on each record. argv: bootstrap, group, topic, parent pid, max seconds,
# records per second it manages.
_SLOW = r"""
import os, sys, time
from confluent_kafka import Consumer
bootstrap, group, topic, parent, limit, pace = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
quiet = lambda *a, **k: None
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": True, "auto.commit.interval.ms": 500, "session.timeout.ms": 10000,
              "logger": quiet, "error_cb": quiet})
c.subscribe([topic])
end = time.monotonic() + limit
while time.monotonic() < end and os.getppid() == parent:
    m = c.poll(0.2)
    if m is not None and m.error() is None:
        time.sleep(1.0 / pace)  # the application's work on one record
c.close()
"""


@dataclass
class ClientProcesses:
    """Child client processes of one fault; ``stop()`` ends them (SIGTERM, then SIGKILL)."""

    group: str
    topic: str
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> int:
        return sum(p.poll() is None for p in self.procs)

    def stop(self, timeout: float = 15) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for p in self.procs:
            if p.stdout is not None:
                p.stdout.close()

    def __enter__(self) -> "ClientProcesses":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _spawn(code: str, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def rebalance_storm(
    cluster: LocalCluster,
    group: str,
    topic: str,
    members: int = 3,
    records: int = 3000,
    rate: float = 20,
    duration: float = 600,
) -> ClientProcesses:
    """A group whose ``members`` processes keep joining and leaving ``topic`` (3 partitions,
    ``records`` written first so the group has lag), plus a producer process at ``rate``
    records/s. The children stop after ``duration`` seconds at most, or with ``stop()``."""
    cluster.faults.create_topic(topic, 3, 3)
    producer = cluster.faults._producer(acks="all")
    for i in range(records):
        producer.produce(topic, key=f"k{i % 97}".encode(), value=b"x" * 64)
        if i % 1000 == 999:
            producer.flush(30)
    producer.flush(30)
    me = os.getpid()
    fault = ClientProcesses(group, topic)
    try:
        fault.procs.append(_spawn(_PRODUCE, cluster.bootstrap_servers, topic, rate, me, duration))
        for _ in range(members):
            fault.procs.append(_spawn(_CHURN, cluster.bootstrap_servers, group, topic, me, duration))
    except BaseException:
        fault.stop()
        raise
    return fault


def stopped_group(cluster: LocalCluster, group: str, topic: str, initial: int = 100, rate: float = 20):
    """A group that read ``initial`` records of ``topic``, committed and left while a producer keeps
    writing ``rate`` records/s: EMPTY with growing lag. Returns the ``LaggingGroup`` (``.stop()``
    stops the producer; ``.lag()`` reads the lag from outside the bot)."""
    return cluster.faults.lagging_consumer_group(group, topic, initial=initial, rate=rate)


def steady_group(
    cluster: LocalCluster, group: str, topic: str, records: int = 100, protocol: str = "classic", duration: float = 600
) -> ClientProcesses:
    """A healthy group: one member process that keeps consuming ``topic`` (3 partitions, ``records``
    written first) and commits every 0.5 s; ``protocol="consumer"`` makes it a KIP-848 group."""
    cluster.faults.create_topic(topic, 3, 3)
    producer = cluster.faults._producer(acks="all")
    for i in range(records):
        producer.produce(topic, key=f"k{i % 97}".encode(), value=b"x" * 64)
    producer.flush(30)
    fault = ClientProcesses(group, topic)
    fault.procs.append(_spawn(_STEADY, cluster.bootstrap_servers, group, topic, os.getpid(), duration, protocol))
    return fault


def slow_group(
    cluster: LocalCluster, group: str, topic: str, rate: float = 40, pace: float = 4, duration: float = 600
) -> ClientProcesses:
    """A group whose one member handles ``pace`` records/s of ``topic`` (3 partitions) while a producer
    process writes ``rate`` records/s spread over the partitions: members stable, offsets committed,
    lag growing evenly everywhere (consumers slower than producers)."""
    cluster.faults.create_topic(topic, 3, 3)
    me = os.getpid()
    fault = ClientProcesses(group, topic)
    try:
        fault.procs.append(_spawn(_PRODUCE, cluster.bootstrap_servers, topic, rate, me, duration))
        fault.procs.append(_spawn(_SLOW, cluster.bootstrap_servers, group, topic, me, duration, pace))
    except BaseException:
        fault.stop()
        raise
    return fault
