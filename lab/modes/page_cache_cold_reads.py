"""Page-cache cold reads: broker 103 keeps almost no page cache, and a consumer group catches up
from the start of a topic 103 leads while a producer keeps writing to it.

How the lab makes it (from outside): broker 103's JVM goes into a memory cgroup of its own whose
limit is its anonymous memory plus ~48 MB (lab/memcap.py; a watcher raises the limit if the heap
grows, so only the cache is held small). Every page the broker then writes or reads is charged
there, so the kernel evicts its segment pages as soon as they pass the ~48 MB: the topic's
FILL_MB written after the cap are on disk only. A catch-up group then reads the topic from the
beginning at a paced ~CATCH_UP_MBPS (a consumer that processes what it reads; at the end of the
log it starts over, so the backfill lasts as long as the fault) - every fetch is a disk read on
103, and each read evicts the pages the tail producer just wrote. Other brokers and the host keep
their cache.

Seen from outside: the cgroup's page cache stays at its cap, broker 103's /proc/<pid>/io read_bytes
climbs by megabytes a second (a healthy broker serving the tail reads ~nothing from disk), and the
group's committed offsets are far behind the log end. The cap outlives `kbot lab run` until
`kbot lab heal` (and `lab down`, and the tests' teardown) moves the JVM back and removes the cgroup.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from lab import clients, memcap, probes
from lab.mode import Mode
from localkafka import procs
from localkafka.cluster import metric_value, scrape
from localkafka.faults import _read_line

TOPIC = "lab-cold-reads"
GROUP = "lab-catch-up"
BROKER = 103
PARTITIONS = 3
FILL_MB = 192  # four times the cap: nothing of it stays cached on 103
CATCH_UP_MBPS = 6.0  # the backfill's pace: ~30 s per pass over the topic
TAIL_RATE = 50  # records/s of the acks=all producer that keeps writing
# Evidence the cold reads are real: 103 reads at least this much from disk while waiting.
MIN_DISK_READ_MB = 16

# Puts broker ``broker``'s replicas of the (empty) topic into ``log_dir`` (AlterReplicaLogDirs),
# retrying while the broker has not created them yet. argv: bootstrap, topic, partitions, broker, log_dir.
PLACE = r"""
import sys, time
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartitionReplica
bootstrap, topic, parts, broker, log_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ka = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
want = {TopicPartitionReplica(topic, p, broker): log_dir for p in range(parts)}
deadline, errs = time.monotonic() + 60, None
while time.monotonic() < deadline:
    errs = {k: v.__name__ for k, v in ka.alter_replica_log_dirs(want).items() if v.__name__ != "NoError"}
    if not errs:
        print("PLACED", flush=True)
        sys.exit(0)
    time.sleep(0.5)
sys.exit(f"AlterReplicaLogDirs: {errs}")
"""

# Writes ``mb`` MB of 100 KB records to every partition of the topic (acks=1), then exits.
# argv: bootstrap, topic, mb, partitions.
FILL = r"""
import os, sys
from confluent_kafka import Producer
bootstrap, topic, mb, parts = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1000000,
              "compression.type": "none", "logger": lambda *a, **k: None})
value = os.urandom(100_000)
for i in range(mb * 10):
    while True:
        try:
            p.produce(topic, value=value, partition=i % parts)
            break
        except BufferError:
            p.poll(0.1)
if p.flush(180):
    sys.exit("records left unsent")
print("FILLED", flush=True)
"""

# A consumer group catching up: reads the topic from the beginning at ``mbps`` MB/s (little
# prefetch, so the broker's reads follow the pace), commits as it goes, and starts over from the
# beginning at the end of the log. argv: bootstrap, topic, group, mbps, parent.
CATCH_UP = r"""
import os, sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
bootstrap, topic, group, mbps, parent = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "enable.partition.eof": True,
              "queued.max.messages.kbytes": 2048, "fetch.max.bytes": 1048576,
              "max.partition.fetch.bytes": 1048576, "logger": lambda *a, **k: None})
c.subscribe([topic])
t0, got, at_end, ready = time.monotonic(), 0, set(), False
while os.getppid() == parent:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        if m.error().code() == -191:  # _PARTITION_EOF: this partition is caught up
            at_end.add(m.partition())
            parts = c.assignment()
            if parts and at_end >= {tp.partition for tp in parts}:
                for tp in parts:
                    c.seek(TopicPartition(topic, tp.partition, OFFSET_BEGINNING))
                at_end.clear()
        continue
    if not ready:
        print("READY", flush=True)
        ready = True
    got += len(m.value() or b"")
    ahead = got / (mbps * 1e6) - (time.monotonic() - t0)
    if ahead > 0:
        time.sleep(ahead)
c.close()
"""

# Keeps writing ``rate`` small acks=all records a second (the real-time producer that suffers).
# argv: bootstrap, topic, rate, parent.
TAIL = clients.ACKS_ALL


class Clients:
    """The catch-up consumer and the tail producer, as a background worker of the cluster's
    FaultInjector: its stop_background() (every heal, the tests' teardown) ends them."""

    name = "page-cache-cold-reads clients"

    def __init__(self, children: list[subprocess.Popen]):
        self.children = children

    def stop(self, timeout: float = 15) -> dict:
        clients.stop([c.pid for c in self.children if c.poll() is None], self.children)
        return {"stopped": [c.pid for c in self.children]}


class Cap:
    """The memory cgroup as a background worker too: stop() releases it."""

    name = "page-cache-cold-reads memory cgroup"

    def __init__(self, port_base: int):
        self.port_base = port_base

    def stop(self, timeout: float = 15) -> dict:
        return {"memcap_released": memcap.release(self.port_base)}


def _read_bytes(pid: int) -> int:
    """Bytes ``pid`` made the block layer read (/proc/<pid>/io): page-cache misses, not cache hits."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def inject(cluster):
    pid = cluster.brokers[BROKER].pid()
    if not pid:
        raise RuntimeError(f"broker {BROKER} is not running")
    others = [b for b in sorted(cluster.brokers) if b != BROKER]
    assignment = [[BROKER, others[i % len(others)]] for i in range(PARTITIONS)]
    cluster.faults.create_topic(TOPIC, replica_assignment=assignment, timeout=90)
    # In 103's main log dir: Kafka puts new replicas in the dir with the fewest, which is the lab's
    # 64 MB second disk - FILL_MB there would fill it and fail the dir (seen).
    main_dir = cluster.log_dirs(cluster.brokers[BROKER])[0].resolve()
    res = clients.run_once(PLACE, cluster.bootstrap_servers, TOPIC, PARTITIONS, BROKER, main_dir, timeout=90)
    if res.returncode != 0:
        raise RuntimeError(f"could not place {TOPIC} in {main_dir}: {(res.stderr or res.stdout).strip()[-300:]}")
    disk2 = getattr(cluster, "disk2", None)
    cluster.faults.wait_for(
        lambda: (
            len(probes.partitions_in_dir(main_dir, TOPIC)) == PARTITIONS
            and not (disk2 is not None and probes.partitions_in_dir(disk2, TOPIC))
        ),
        60,
        f"every replica of {TOPIC} on broker {BROKER} in {main_dir}",
    )
    cluster.faults._background.append(Cap(cluster.port_base))  # before the cap: a half-made one is undone too
    try:
        capped = memcap.cap(cluster.port_base, pid)
    except memcap.MemcapError as exc:
        raise RuntimeError(f"could not cap broker {BROKER}'s page cache: {exc}") from None
    t0 = time.monotonic()
    res = clients.run_once(FILL, cluster.bootstrap_servers, TOPIC, FILL_MB, PARTITIONS, timeout=300)
    if res.returncode != 0 or "FILLED" not in res.stdout:
        raise RuntimeError(f"could not write {FILL_MB} MB to {TOPIC}: {(res.stderr or res.stdout).strip()[-300:]}")
    fill_s = time.monotonic() - t0
    reader = clients.spawn_with_parent(CATCH_UP, cluster.bootstrap_servers, TOPIC, GROUP, CATCH_UP_MBPS)
    tail = clients.spawn_with_parent(TAIL, cluster.bootstrap_servers, TOPIC, TAIL_RATE)
    cluster.faults._background.append(Clients([reader, tail]))
    facts = {
        "broker_id": BROKER,
        "pid": pid,
        "topic": TOPIC,
        "topics": [TOPIC],
        "group": GROUP,
        "pids": [reader.pid, tail.pid],
        "filled_mb": FILL_MB,
        "fill_seconds": round(fill_s, 1),
        **capped,
    }
    for child, what in ((reader, "catch-up consumer"), (tail, "tail producer")):
        if _read_line(child, 60) != "READY":
            raise RuntimeError(f"the {what} did not start")
    return facts


def _group_lag(cluster) -> int | None:
    """Records between the catch-up group's committed offsets and the log end (None: none committed)."""
    admin = cluster.admin()
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)], request_timeout=10)[GROUP].result()
    committed = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == TOPIC and tp.offset >= 0}
    if not committed:
        return None
    ends = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in committed}, request_timeout=10)
    return sum(f.result().offset - committed[tp.partition] for tp, f in ends.items())


def wait_for_symptom(cluster, facts):
    """Broker 103 reads MIN_DISK_READ_MB from disk while its cgroup's cache stays at the cap, and
    the group has committed offsets far behind the log end."""
    pid = facts["pid"]
    start, t0 = _read_bytes(pid), time.monotonic()

    def seen():
        if cluster.brokers[BROKER].pid() != pid:
            raise RuntimeError(f"broker {BROKER} (pid {pid}) is gone under the memory cap")
        read = _read_bytes(pid) - start
        lag = _group_lag(cluster)
        if read < MIN_DISK_READ_MB << 20 or lag is None or lag < 100:
            return None
        return {"disk_read_mb": round(read / 2**20, 1), "group_lag_records": lag}

    out = cluster.faults.wait_for(
        seen, 120, f"broker {BROKER} to read {MIN_DISK_READ_MB} MB from disk for group {GROUP}", interval=1.0
    )
    secs = time.monotonic() - t0
    cap = memcap.reading(cluster.port_base)
    text = scrape(cluster.brokers[BROKER].metrics_url) or ""
    p99 = metric_value(text, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    fetch_local = metric_value(
        text, "kafka_network_requestmetrics_localtimems", request="FetchConsumer", quantile="0.99"
    )
    return {
        **out,
        "disk_read_mb_per_s": round(out["disk_read_mb"] / max(secs, 1e-3), 1),
        "cgroup_cache_mb": round(cap.get("cache_bytes", 0) / 2**20, 1),
        "cgroup_limit_mb": round(int(cap.get("limit_bytes") or 0) / 2**20, 1),
        "produce_total_p99_ms": p99,
        "fetch_consumer_local_p99_ms": fetch_local,
    }


def heal(cluster, facts):
    memcap.release(cluster.port_base)  # from another process (`kbot lab heal`) too: keyed by port base
    for pid in facts.get("pids", []):  # healed from another process: the clients by their pids
        if procs.signal_pid(pid, signal.SIGTERM):
            procs.wait_gone(pid, 15)
    cluster.faults.stop_background()


MODE = Mode(
    name="page-cache-cold-reads",
    summary=f"broker {BROKER} capped to ~{memcap.CACHE_BYTES >> 20} MB of page cache (a memory cgroup); a group "
    f"catches up from the start of a {FILL_MB} MB topic it leads while a producer writes: reads go to disk",
    expect_entry="page-cache-cold-reads",
    expect_severity="warning",
    questions=("why slow consumer catch-up", "why produce latency", "lag {group}"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    needs=("memcg",),
    note=f"a memory cgroup (v1 memory.limit_in_bytes or v2 memory.max) around broker {BROKER}'s JVM: its "
    f"anonymous memory + {memcap.CACHE_BYTES >> 20} MB, so its page cache is small and old segments are read from disk",
)
