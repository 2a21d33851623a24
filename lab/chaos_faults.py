"""What one fault of the chaos campaign is (:class:`Fault`), and the campaign's faults beyond the lab's modes, each injected from outside as the world
does: a client quota set with the user's own admin client, a group whose unread records the user's
own DeleteRecords removed (what retention does to a stopped group), a consumer ten times slower
than its producer, and a broker held to a few percent of a core by a cpu cgroup."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.mode import Facts, Mode
from live.gateway.quotas import describe_quotas_of
from localkafka.faults import BackgroundProducer
from localkafka.groups import slow_group


@dataclass(frozen=True)
class Fault:
    """One fault a trial injects: how (from outside), what it must look like, what must be named."""

    name: str
    expect: frozenset[str]  # runbook entries / reference topics accepted as the top cause
    questions: tuple[str, ...]
    brokers: frozenset[int]
    takes_broker: bool
    inject: Callable[[Any], Facts]
    wait: Callable[[Any, Facts], Any] | None = None
    heal: Callable[[Any, Facts], None] | None = None
    named: Callable[[Facts], list[str]] = lambda facts: []
    topics: tuple[str, ...] = ()
    mode: Mode | None = None  # the lab mode it is, when it is one (healed the mode's way)
    expect_verdict: str = ""  # a mode whose right answer is a verdict, not an entry (consumer-stop)
    in_status: bool = True  # `status` must not call the cluster healthy while it is in place


CPU_ROOT = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller (v2: /sys/fs/cgroup with cpu.max)
STARVED_SHARE = 0.05  # of one core: what the starved broker had


def set_client_quota(cluster: Any, client_id: str, key: str, value: float | None) -> None:
    """What `kafka-configs --alter --entity-type clients` sends (AlterClientQuotas), from the
    user's own client: set ``key`` on ``client_id``, or remove it (``value`` None)."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15000)
    try:
        entry = AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntryData.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[AlterClientQuotasRequest.EntryData.OpData(key=key, value=float(value or 0), remove=value is None)],
        )
        resp = admin._manager.run(admin._manager.send, AlterClientQuotasRequest(entries=[entry], validate_only=False))
        failed = [e for e in resp.entries if e.error_code != 0]
        if failed:
            raise RuntimeError(f"AlterClientQuotas refused: {failed}")
        # the controller acknowledged it, but each broker serves DescribeClientQuotas from its own copy
        # of the metadata, which a busy broker applies later (seen in the suite beside a CPU burner:
        # "No client quota is set" right after the set)
        cluster.faults.wait_for(
            lambda: _every_broker_shows(admin, client_id, key, value),
            QUOTA_APPLIED_S,
            f"every broker to show {key} on client-id={client_id}",
            interval=0.2,
        )
    finally:
        admin.close()


QUOTA_APPLIED_S = 60.0  # a busy broker applies the controller's quota record this long after at most


def _every_broker_shows(admin: Any, client_id: str, key: str, value: float | None) -> bool:
    from kafka.errors import KafkaConnectionError

    want = None if value is None else float(value)
    for broker in admin._manager.cluster.brokers():
        try:
            entries = describe_quotas_of(admin, "client-id", broker.node_id)
        except KafkaConnectionError:
            # a killed broker stays in the metadata until its session expires (trial 2911:36, a
            # quota set beside a broker loss): it applies nothing, and a restart reads the record
            continue
        limits = next((values for entity, values in entries if entity == {"client-id": client_id}), {})
        if limits.get(key) != want:
            return False
    return True


def quota(rng: random.Random) -> Fault:
    """A produce quota of 1 kB/s on a client id drawn at random."""
    client = f"chaos-app-{rng.randrange(1 << 24):x}"

    def inject(cluster) -> Facts:
        set_client_quota(cluster, client, "producer_byte_rate", 1024)
        return {"client_id": client}

    def heal(cluster, facts) -> None:
        set_client_quota(cluster, client, "producer_byte_rate", None)

    return Fault(
        name="client-quota",
        expect=frozenset({"client-quota-throttling"}),
        questions=("why my producer is slow, produce-throttle-time-avg is high",),
        brokers=frozenset(),
        takes_broker=False,
        inject=inject,
        heal=heal,
        named=lambda f: [f["client_id"]],
        # the brokers are healthy: `status` may say so, naming the quota in force (named above)
        in_status=False,
    )


def deleted_unread(rng: random.Random) -> Fault:
    """A group that stopped reading, and the oldest records of every partition deleted past its
    committed offsets by the user's own DeleteRecords (what retention does, without its 5-minute check)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    tag = f"{rng.randrange(1 << 24):x}"
    group, topic = f"lab-chaos-gone-{tag}", f"lab-chaos-gone-t-{tag}"

    def inject(cluster) -> Facts:
        lagging = cluster.faults.lagging_consumer_group(group, topic, initial=30, rate=50)
        cluster.faults.wait_for(lambda: sum(lagging.lag().values()) > 150, 60, f"{group} to fall behind")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        tps = [TopicPartition(topic, p) for p in range(3)]
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=15)
        cut = [TopicPartition(topic, tp.partition, f.result(30).offset - 5) for tp, f in ends.items()]
        for f in admin.delete_records(cut, request_timeout=15).values():
            f.result(30)
        return {"group": group, "topic": topic, "topics": [topic], "_client": lagging}

    return _group_fault("deleted-unread", "lag-beyond-retention", group, topic, inject)


def slow_consumer(rng: random.Random) -> Fault:
    """One consumer that handles 4 records/s of a topic its producer writes 40 records/s to."""
    tag = f"{rng.randrange(1 << 24):x}"
    group, topic = f"lab-chaos-slow-{tag}", f"lab-chaos-slow-t-{tag}"

    def inject(cluster) -> Facts:
        fault = slow_group(cluster, group, topic)
        return {"group": group, "topic": topic, "topics": [topic], "_client": fault}

    def wait(cluster, facts):
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

        def behind() -> bool:
            listed = admin.list_consumer_group_offsets([_group_request(group)], request_timeout=10)
            offsets = listed[group].result(15).topic_partitions
            return any(tp.offset >= 0 for tp in offsets)

        return cluster.faults.wait_for(behind, 90, f"{group} committing while it falls behind")

    return _group_fault("slow-consumer", "consumers-slower-than-producers", group, topic, inject, wait)


def _group_fault(
    name: str,
    entry: str,
    group: str,
    topic: str,
    inject: Callable[[Any], Facts],
    wait: Callable[[Any, Facts], Any] | None = None,
) -> Fault:
    """A fault of one consumer group on its own topic, asked `lag <group>`: the clients ``inject``
    starts (facts["_client"]) are stopped at heal; the brokers are healthy, so `status` may say so."""

    def heal(cluster, facts) -> None:
        if facts.get("_client") is not None:
            facts["_client"].stop()

    return Fault(
        name=name,
        expect=frozenset({entry}),
        questions=("lag {group}",),
        brokers=frozenset(),
        takes_broker=False,
        inject=inject,
        wait=wait,
        heal=heal,
        named=lambda f: [f["group"]],
        topics=(topic,),
        in_status=False,
    )


def _group_request(group: str):
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def cpu_cgroup_unavailable() -> str | None:
    if not (CPU_ROOT / "cpu.cfs_quota_us").exists():
        return "no cgroup v1 cpu controller at /sys/fs/cgroup/cpu"
    if not os.access(CPU_ROOT, os.W_OK):
        return "the cpu cgroup is not writable here (root needed)"
    return None


def starve(broker: int, rng: random.Random) -> Fault:
    """Broker ``broker``'s JVM moved into a cpu cgroup of its own capped at 5 % of a core, while an
    acks=all producer writes to a topic it leads a partition of."""
    topic = f"lab-chaos-starve-{rng.randrange(1 << 24):x}"

    def inject(cluster) -> Facts:
        cluster.faults.create_topic(topic, partitions=3, replication_factor=3, timeout=90)
        pid = cluster.brokers[broker].pid()
        group = CPU_ROOT / f"kbot-chaos-{cluster.port_base}-{broker}"
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text(str(int(100000 * STARVED_SHARE)))
        for task in Path(f"/proc/{pid}/task").iterdir():  # every thread of the JVM
            try:
                (group / "tasks").write_text(task.name)
            except OSError:
                pass  # a thread that ended meanwhile
        producer = BackgroundProducer(cluster.faults._producer(acks="all"), topic, 50, None)
        cluster.faults._background.append(producer)
        producer.start()
        return {"broker_id": broker, "topic": topic, "topics": [topic], "_cgroup": str(group), "_pid": pid}

    def heal(cluster, facts) -> None:
        group = Path(facts.get("_cgroup") or CPU_ROOT / f"kbot-chaos-{cluster.port_base}-{broker}")
        if not group.exists():
            return
        for task in (group / "tasks").read_text().split():
            try:
                (CPU_ROOT / "tasks").write_text(task)
            except OSError:
                pass
        try:
            group.rmdir()
        except OSError:
            pass

    return Fault(
        name=f"starve-{broker}",
        # a starved broker answers late or not at all: named as starved, or as paused when nothing answers
        expect=frozenset({"starved-broker", "gc-pauses", "handler-saturation"}),
        questions=("why produce latency",),
        brokers=frozenset({broker}),
        takes_broker=False,
        inject=inject,
        heal=heal,
        named=lambda f: [f["broker_id"]],
        topics=(topic,),
    )
