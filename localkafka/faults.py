"""Fault injection for the local cluster (tests and the demo).

Usage::

    f = cluster.faults                 # a FaultInjector bound to the cluster
    f.kill_broker(102)                 # SIGKILL
    f.pause_broker(103); f.resume_broker(103)   # SIGSTOP / SIGCONT
    f.create_clamped_topic("orders")   # RF=1, min.insync.replicas=2
    txn = f.hanging_transaction("payments", 0)
    f.heal()                           # everything back to healthy

Every fault returns what a test needs to assert on (topic, partition, broker
id, group, transactional id ...). ``heal()`` undoes all of them: it resumes
paused brokers, restarts dead ones, stops background producers, aborts the
hanging transactions this cluster dir recorded (by re-initialising their
transactional.id, which fences the dead producer and aborts its open txn) and
waits until every partition's ISR equals its replica set again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, OffsetSpec, ResourceType

from localkafka import procs
from localkafka.common import ClusterError, quiet_logger

if TYPE_CHECKING:
    from localkafka.cluster import LocalCluster


class FaultInjector:
    def __init__(self, cluster: LocalCluster):
        self.c = cluster
        self._background: list["BackgroundProducer"] = []

    # ---- helpers -----------------------------------------------------------
    def _broker(self, broker_id: int):
        if broker_id not in self.c.brokers:
            raise ClusterError(f"{broker_id} is not a broker id (brokers: {list(self.c.brokers)})")
        return self.c.brokers[broker_id]

    def _pid(self, broker_id: int) -> int:
        pid = self._broker(broker_id).pid()
        if not pid:
            raise ClusterError(f"broker {broker_id} is not running")
        return pid

    def _producer(self, **extra) -> Producer:
        return Producer({**self.c.client_conf(), "logger": quiet_logger(), "linger.ms": 5, **extra})

    def _state_file(self) -> Path:
        return self.c.base_dir / "faults.json"

    def _load_state(self) -> dict:
        try:
            return json.loads(self._state_file().read_text())
        except (OSError, ValueError):
            return {"hanging_transactions": []}

    def _save_state(self, state: dict) -> None:
        self._state_file().write_text(json.dumps(state, indent=1))

    def describe(self, topics: list[str] | None = None, timeout: float = 4.0) -> dict:
        """{topic: [{partition, leader, replicas, isr}]} for ``topics`` (None: all).

        Read from a Metadata request (AdminClient.list_topics), which any live
        broker answers from its current metadata. librdkafka's describe_topics
        returns the same partition data but is routed to the metadata's
        "controller" broker; right after a broker is killed that can still be
        the dead broker, and the call times out for several seconds. The
        short default timeout matters too: a call that lands on a SIGSTOPped
        broker just hangs, so callers (wait_for loops) should retry soon.
        """
        # Always the whole listing, never list_topics(name): a topic asked for by name stays known
        # to the shared handle, which asks for it again at every metadata refresh (each second),
        # and brokers auto-create a topic a producer-type handle asks for - a deleted topic came
        # back a second later, and tests that empty the cluster (drop_other_topics) saw it full.
        md = self.c.admin().list_topics(timeout=timeout)
        out = {}
        for name in topics if topics is not None else md.topics:
            tm = md.topics.get(name)
            if tm is None or tm.error is not None:
                raise ClusterError(f"topic {name}: {tm.error if tm else 'not found'}")
            out[name] = [
                {
                    "partition": p.id,
                    "leader": p.leader if p.leader >= 0 else None,
                    "replicas": list(p.replicas),
                    "isr": list(p.isrs),
                }
                for p in sorted(tm.partitions.values(), key=lambda p: p.id)
            ]
        return out

    def wait_for(self, predicate, timeout: float, what: str, interval: float = 0.5):
        """Poll ``predicate()`` (exceptions count as "not yet") until truthy."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                result = predicate()
                if result:
                    return result
            except Exception as e:  # transient metadata errors while brokers move
                last = e
            time.sleep(interval)
        raise ClusterError(
            f"timed out after {timeout:.0f}s waiting for {what}" + (f" (last error: {last})" if last else "")
        )

    # ---- process faults --------------------------------------------------
    def kill_broker(self, broker_id: int) -> dict:
        pid = self._pid(broker_id)
        procs.signal_pid(pid, signal.SIGKILL)
        procs.wait_gone(pid, 10)
        return {"broker_id": broker_id, "pid": pid, "signal": "SIGKILL"}

    def pause_broker(self, broker_id: int) -> dict:
        pid = self._pid(broker_id)
        procs.signal_pid(pid, signal.SIGSTOP)
        self.wait_for(lambda: procs.is_stopped(pid), 5, f"broker {broker_id} to stop")
        return {"broker_id": broker_id, "pid": pid, "signal": "SIGSTOP"}

    def resume_broker(self, broker_id: int) -> dict:
        pid = self._pid(broker_id)
        procs.signal_pid(pid, signal.SIGCONT)
        return {"broker_id": broker_id, "pid": pid, "signal": "SIGCONT"}

    def restart_broker(self, broker_id: int, timeout: float = 90, *, metrics: bool = True) -> dict:
        """Clean stop (SIGTERM -> controlled shutdown) and start; waits until
        the broker is registered again (and, with ``metrics``, every exporter answers), all
        within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        node = self._broker(broker_id)
        old = node.pid()
        self.c.stop_node(node, grace=min(20.0, timeout / 2))
        pid = self.c.start_node(node)
        try:
            self.c.wait_ready(max(1.0, deadline - time.monotonic()), brokers=[broker_id], metrics=metrics)
        except ClusterError as exc:  # said against the whole timeout, not the part left for the wait
            raise ClusterError(f"broker {broker_id} not serving {timeout:g}s after its restart began: {exc}") from None
        return {"broker_id": broker_id, "old_pid": old, "pid": pid}

    # ---- topics ----------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int = 3,
        replication_factor: int = 3,
        config: dict | None = None,
        replica_assignment: list[list[int]] | None = None,
        timeout: float = 30,
    ) -> dict:
        """Create a topic (idempotent) and wait until every partition has a leader."""
        if replica_assignment:
            # librdkafka wants the partition count spelled out next to an
            # explicit assignment (it rejects the -1 "broker default").
            nt = NewTopic(
                name, num_partitions=len(replica_assignment), replica_assignment=replica_assignment, config=config or {}
            )
        else:
            nt = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})

        def create():
            # CreateTopics goes to the metadata "controller" broker, which can
            # be a just-killed one for a few seconds: retry until the deadline.
            try:
                self.c.admin().create_topics([nt], request_timeout=10)[name].result()
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                    raise
            return True

        self.wait_for(create, timeout, f"creation of topic {name}")
        want = len(replica_assignment) if replica_assignment else partitions
        parts = self.wait_for(
            lambda: (lambda d: d if len(d) == want and all(p["leader"] is not None for p in d) else None)(
                self.describe([name])[name]
            ),
            timeout,
            f"leaders for all partitions of {name}",
        )
        return {"topic": name, "partitions": parts, "config": config or {}}

    def set_topic_config(self, topic: str, settings: dict[str, str]) -> None:
        """Set ``settings`` on ``topic`` (IncrementalAlterConfigs SET, what `kafka-configs --alter
        --add-config` sends), as a user changes a topic from outside."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
        for f in self.c.admin().incremental_alter_configs([resource], request_timeout=15).values():
            f.result(30)

    def delete_topics(self, topics: list[str], timeout: float = 60) -> None:
        """Delete ``topics`` and wait until the metadata no longer lists them. A delete sent while a
        broker is still settling can be lost: ask again until they are gone (ClusterError past
        ``timeout``: a client that keeps producing re-creates its topic)."""

        def gone() -> bool:
            left = [t for t in topics if t in self.c.admin().list_topics(timeout=5).topics]
            if not left:
                return True
            for f in self.c.admin().delete_topics(left, request_timeout=15).values():
                try:
                    f.result()
                except KafkaException as exc:
                    if "UNKNOWN_TOPIC" not in str(exc):
                        raise
            return False

        if topics:
            self.wait_for(gone, timeout, f"deletion of {', '.join(topics)}", interval=1.0)

    def create_clamped_topic(self, name: str, partitions: int = 1) -> dict:
        """RF=1 with min.insync.replicas=2: min ISR can never be met, but the
        broker clamps the *effective* min ISR to the replica count for its
        AtMinIsr/UnderMinIsr gauges, so it looks "at min ISR", not "under"."""
        info = self.create_topic(name, partitions, 1, {"min.insync.replicas": "2"})
        return {**info, "replication_factor": 1, "min_insync_replicas": 2}

    def create_unclean_topic(self, name: str, partitions: int = 3, replication_factor: int = 3) -> dict:
        info = self.create_topic(name, partitions, replication_factor, {"unclean.leader.election.enable": "true"})
        return {**info, "replication_factor": replication_factor, "unclean_leader_election": True}

    def offline_partitions(self, topic: str, broker_id: int = 103, partitions: int = 2, timeout: float = 30) -> dict:
        """RF=1 topic whose every replica is on ``broker_id``; produce a few
        records, SIGKILL the broker and wait until the partitions have no leader."""
        self.create_topic(topic, replica_assignment=[[broker_id]] * partitions)
        p = self._producer(acks="all")
        for i in range(partitions * 5):
            p.produce(topic, value=f"r{i}".encode(), partition=i % partitions)
        p.flush(10)
        killed = self.kill_broker(broker_id)
        parts = self.wait_for(
            lambda: (lambda d: d if all(x["leader"] is None for x in d) else None)(self.describe([topic])[topic]),
            timeout,
            f"{topic} partitions to go offline",
        )
        return {
            "topic": topic,
            "partitions": [x["partition"] for x in parts],
            "broker_id": broker_id,
            "pid": killed["pid"],
            "describe": parts,
        }

    # ---- client-side faults ------------------------------------------------
    def hanging_transaction(
        self, topic: str, partition: int = 0, records: int = 5, transactional_id: str | None = None, timeout: float = 60
    ) -> dict:
        """A transactional producer (separate Python process) begins a txn,
        produces + flushes ``records`` to ``topic``/``partition``, then is
        SIGKILLed, leaving the transaction open (see txn_child.py)."""
        self.create_topic(topic, max(3, partition + 1), 3)
        tid = transactional_id or f"kbot-hanging-{uuid.uuid4().hex[:8]}"
        cmd = [
            sys.executable,
            str(Path(__file__).with_name("txn_child.py")),
            "--bootstrap",
            self.c.bootstrap_servers,
            "--topic",
            topic,
            "--partition",
            str(partition),
            "--transactional-id",
            tid,
            "--records",
            str(records),
        ]
        extra = {k: v for k, v in self.c.client_conf().items() if k != "bootstrap.servers"}
        conf_file = None
        if extra:  # SASL settings reach the child in a private file, never on its command line (ps)
            conf_file = self.c.base_dir / f".txn-child-{uuid.uuid4().hex[:8]}.json"
            fd = os.open(conf_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(extra, f)
            cmd += ["--client-conf", str(conf_file)]
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            line = _read_line(child, timeout)
        finally:
            if conf_file is not None:
                conf_file.unlink(missing_ok=True)
        if not line.startswith("READY "):
            child.kill()
            _, err = child.communicate(timeout=10)
            raise ClusterError(f"transactional producer failed: {line or ''} {err.strip()[-1500:]}")
        info = json.loads(line[len("READY ") :])
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        for stream in (child.stdout, child.stderr):
            stream.close()
        state = self._load_state()
        state["hanging_transactions"].append(tid)
        self._save_state(state)
        return {
            "transactional_id": tid,
            "topic": topic,
            "partition": partition,
            "records": records,
            "first_offset": info["first_offset"],
            "last_offset": info["last_offset"],
            "pid": child.pid,
            "transaction_timeout_ms": 600000,
            **self._producer_info(tid),
        }

    def _producer_info(self, tid: str) -> dict:
        """producer id/epoch and coordinator of ``tid`` via kafka-python's
        DescribeTransactions (confluent_kafka has no such admin call)."""
        from kafka.admin import KafkaAdminClient

        ka = KafkaAdminClient(**self.c.kafka_python_conf())
        try:
            d = ka.describe_transactions([tid])[tid]
            return {
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "coordinator_id": d.coordinator_id,
                "state": d.state.value,
            }
        finally:
            ka.close()

    def hot_key_producer(
        self,
        topic: str,
        key: str = "hot-key",
        duration: float | None = None,
        rate: float = 200,
        hot_ratio: float = 0.9,
        partitions: int = 6,
    ) -> "BackgroundProducer":
        """Background producer: ``hot_ratio`` of the records carry ``key``, so
        the one partition that key hashes to is hot. Runs until ``stop()`` or
        for ``duration`` seconds."""
        self.create_topic(topic, partitions, 3)
        bp = BackgroundProducer(self._producer(), topic, rate, duration, hot_key=key, hot_ratio=hot_ratio)
        self._background.append(bp)
        bp.start()
        return bp

    def lagging_consumer_group(
        self, group: str, topic: str, initial: int = 100, rate: float = 20, timeout: float = 60
    ) -> "LaggingGroup":
        """A consumer group that reads ``initial`` records, commits them and
        leaves; a background producer keeps writing so its lag grows."""
        self.create_topic(topic, 3, 3)
        p = self._producer(acks="all")
        for i in range(initial):
            p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        p.flush(30)
        consumer = Consumer(
            {
                **self.c.client_conf(),
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "logger": quiet_logger(),
            }
        )
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + timeout
        while seen < initial and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        if seen < initial:
            consumer.close()
            raise ClusterError(f"group {group} consumed only {seen}/{initial} records of {topic}")
        committed = consumer.commit(asynchronous=False)
        consumer.close()
        bp = BackgroundProducer(self._producer(), topic, rate, None)
        self._background.append(bp)
        bp.start()
        return LaggingGroup(self, group, topic, {tp.partition: tp.offset for tp in committed}, bp)

    # ---- healing ------------------------------------------------------------
    def stop_background(self) -> None:
        for bp in self._background:
            bp.stop()
        self._background.clear()

    def track_transaction(self, transactional_id: str) -> None:
        """Have heal() end whatever ``transactional_id`` leaves open (for transactional producers
        that callers start themselves, e.g. the failure lab's fencing mode)."""
        state = self._load_state()
        if transactional_id not in state["hanging_transactions"]:
            state["hanging_transactions"].append(transactional_id)
            self._save_state(state)

    def abort_hanging_transactions(self) -> list[str]:
        """Re-init each recorded transactional.id: the coordinator bumps the
        epoch, fencing the dead producer and aborting its open transaction."""
        state = self._load_state()
        done, left = [], []
        for tid in state["hanging_transactions"]:
            try:
                self._producer(**{"transactional.id": tid}).init_transactions(30)
                done.append(tid)
            except KafkaException:
                left.append(tid)  # e.g. coordinator still loading: retry next heal()
        state["hanging_transactions"] = left
        self._save_state(state)
        if left:
            raise ClusterError(f"could not abort hanging transactions {left}")
        return done

    def under_replicated(self) -> dict:
        """{topic: [partition...]} with ISR != replicas or no leader, all topics."""
        bad = {}
        for topic, parts in self.describe().items():
            wrong = [p["partition"] for p in parts if p["leader"] is None or sorted(p["isr"]) != sorted(p["replicas"])]
            if wrong:
                bad[topic] = wrong
        return bad

    def heal(self, timeout: float = 120) -> dict:
        """Undo every fault and wait until no partition is under-replicated."""
        t0 = time.monotonic()
        self.stop_background()
        actions = []
        for node in self.c.nodes:
            pid = node.pid()
            if pid and procs.is_stopped(pid):
                procs.signal_pid(pid, signal.SIGCONT)
                actions.append(f"resumed {node.node_id}")
            elif not pid:
                self.c.start_node(node)
                actions.append(f"started {node.node_id}")
        if actions:
            self.c.wait_ready(timeout)
        else:  # nothing restarted: just make sure every broker is registered
            want = sorted(self.c.brokers)
            self.wait_for(lambda: self.c.registered_brokers(timeout=3) == want, timeout, f"brokers {want} registered")
        aborted = self.abort_hanging_transactions()
        remaining = max(5.0, timeout - (time.monotonic() - t0))
        self.wait_for(lambda: not self.under_replicated(), remaining, "all partitions to have ISR == replicas")
        return {"actions": actions, "aborted_transactions": aborted, "seconds": round(time.monotonic() - t0, 1)}


def _read_line(child: subprocess.Popen, timeout: float) -> str:
    """First stdout line of ``child`` or '' after ``timeout`` (thread, so a
    silent child can't block us)."""
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(child.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return box[0].strip() if box else ""


class BackgroundProducer(threading.Thread):
    """Produces ~``rate`` records/s until stopped (or ``duration`` elapsed)."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        rate: float,
        duration: float | None,
        hot_key: str | None = None,
        hot_ratio: float = 0.0,
    ):
        super().__init__(daemon=True, name=f"kbot-producer-{topic}")
        self.producer, self.topic, self.rate, self.duration = producer, topic, rate, duration
        self.hot_key, self.hot_ratio = hot_key, hot_ratio
        self.sent = 0
        self.hot_sent = 0
        self.per_partition: dict[int, int] = {}
        self.hot_partition: int | None = None
        self.errors = 0
        self._stop_evt = threading.Event()
        self._lock = threading.Lock()

    def _delivered(self, err, msg):
        with self._lock:
            if err is not None:
                self.errors += 1
                return
            self.per_partition[msg.partition()] = self.per_partition.get(msg.partition(), 0) + 1
            if self.hot_key is not None and msg.key() == self.hot_key.encode():
                self.hot_partition = msg.partition()

    def run(self):
        end = time.monotonic() + self.duration if self.duration else None
        rnd = random.Random(42)
        batch = max(1, int(self.rate / 10))  # ten small batches per second
        while not self._stop_evt.is_set() and (end is None or time.monotonic() < end):
            for _ in range(batch):
                hot = self.hot_key is not None and rnd.random() < self.hot_ratio
                key = self.hot_key if hot else f"key-{rnd.randrange(1_000_000)}"
                try:
                    self.producer.produce(self.topic, key=key.encode(), value=b"x" * 100, on_delivery=self._delivered)
                except BufferError:
                    break  # local queue full (cluster unhappy): skip this tick
                except KafkaException:
                    # the topic not (yet) in this client's metadata: an application's producer keeps
                    # trying; a thread that died here left a lab mode with no writes (its follower
                    # never fell behind) and a chaos trial's traceback
                    with self._lock:
                        self.errors += 1
                    break
                self.sent += 1
                self.hot_sent += hot
            self.producer.poll(0)
            self._stop_evt.wait(0.1)
        self.producer.flush(10)

    def stop(self, timeout: float = 15) -> dict:
        self._stop_evt.set()
        if self.is_alive():
            self.join(timeout)
        return self.stats()

    def stats(self) -> dict:
        with self._lock:
            return {
                "topic": self.topic,
                "sent": self.sent,
                "hot_sent": self.hot_sent,
                "hot_key": self.hot_key,
                "hot_partition": self.hot_partition,
                "per_partition": dict(self.per_partition),
                "errors": self.errors,
            }

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class LaggingGroup:
    """Handle returned by lagging_consumer_group()."""

    def __init__(
        self, faults: FaultInjector, group: str, topic: str, committed: dict[int, int], producer: BackgroundProducer
    ):
        self.faults, self.group, self.topic = faults, group, topic
        self.committed, self.producer = committed, producer

    def lag(self) -> dict[int, int]:
        """{partition: log end offset - committed offset}, read from the cluster."""
        admin = self.faults.c.admin()
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group)], request_timeout=10)[
            self.group
        ].result()
        committed = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == self.topic}
        ends = admin.list_offsets(
            {TopicPartition(self.topic, p): OffsetSpec.latest() for p in committed}, request_timeout=10
        )
        return {tp.partition: f.result().offset - committed[tp.partition] for tp, f in ends.items()}

    def stop(self) -> dict:
        return self.producer.stop()

    def as_dict(self) -> dict:
        return {"group": self.group, "topic": self.topic, "committed": self.committed}
