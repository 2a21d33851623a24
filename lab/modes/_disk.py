"""Shared by the two disk modes: a topic with replicas on broker 103's second log dir (the lab's
small tmpfs, lab/topology.py), and bringing that dir back (only a broker restart re-onlines a
failed log dir in Kafka)."""

from __future__ import annotations

from confluent_kafka import Producer

from lab import probes
from localkafka.cluster import quiet_logger

BROKER = 103


def topic_on_disk2(cluster, topic: str, partitions: int = 4) -> list[int]:
    """Create ``topic`` with broker 103 a follower of every partition; return the partitions
    whose replica on 103 the broker put in disk2 (it balances new replicas across its dirs)."""
    leaders = [101, 102]
    assignment = [[leaders[i % 2], leaders[(i + 1) % 2], BROKER] for i in range(partitions)]
    cluster.faults.create_topic(topic, replica_assignment=assignment, timeout=90)
    on2 = cluster.faults.wait_for(
        lambda: probes.partitions_in_dir(cluster.disk2, topic), 30, f"a replica of {topic} in {cluster.disk2}"
    )
    return on2


def facts(cluster, topic: str, on2: list[int], **extra) -> dict:
    """What a disk mode tells the judge and its heal: broker 103, the topic, the failing dir and
    the partitions living there, and whatever the mode adds."""
    return {
        "broker_id": BROKER,
        "topic": topic,
        "topics": [topic],
        "log_dir": str(cluster.disk2),
        "partitions_in_dir": on2,
        **extra,
    }


def produce(cluster, topic: str, parts: list[int], records: int, size: int = 1000) -> int:
    """acks=1 writes (the leaders on 101/102 accept them; 103 has to fetch and append them)."""
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "1",
            "logger": quiet_logger(),
            "linger.ms": 20,
            "message.timeout.ms": 20000,
        }
    )
    errors = []
    for i in range(records):
        p.produce(
            topic,
            value=b"d" * size,
            partition=parts[i % len(parts)],
            on_delivery=lambda err, msg: err and errors.append(err),
        )
        if i % 500 == 0:
            p.poll(0)
    p.flush(30)
    return records - len(errors)


def wait_out_of_isr(cluster, topic: str, parts: list[int], what: str, every: bool = True) -> dict:
    """Until broker 103 left the ISR of every partition in ``parts`` (``every=False``: of any one -
    a stalled fetcher thread serves only the partitions of the leaders it fetches from)."""

    def out():
        lacking = probes.isr_lacks(cluster, topic, BROKER)
        hit = set(parts) <= set(lacking) if every else bool(set(parts) & set(lacking))
        return lacking if hit else None

    try:
        lacking = cluster.faults.wait_for(out, 90, what)
    except Exception as exc:
        raise type(exc)(f"{exc}; {_why_not(cluster, topic)}") from exc
    if probes.not_registered(cluster, BROKER):
        raise RuntimeError(f"broker {BROKER} left the cluster: the whole broker failed, not one log dir")
    return {"partitions_out": lacking}


def _about_dirs(line: str) -> bool:
    return any(k in line for k in ("offline", "storageexception", "stopping serving", "log dir", "logdir"))


def _why_not(cluster, topic: str) -> str:
    """What a timed-out wait saw, so a failure in CI can be read without the (destroyed) cluster:
    the topic's replicas and ISRs, and broker 103's own log lines about its log dirs."""
    try:
        state = "; ".join(f"p{p['partition']} isr={p['isr']}" for p in probes.partitions(cluster, topic))
    except Exception as exc:  # the question is what we saw, not whether describe works
        state = f"describe failed: {exc}"
    log = cluster.brokers[BROKER].log_dir / "server.log"
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if _about_dirs(ln.lower())]
    except OSError:
        lines = []
    return f"{topic}: {state}; broker {BROKER} log: {' | '.join(lines[-4:]) or 'nothing about its dirs'}"


def restart_broker(cluster) -> None:
    """Stop and start broker 103 (a failed log dir comes back online only at start-up)."""
    node = cluster.brokers[BROKER]
    cluster.stop_node(node)
    cluster.start_node(node)
    cluster.wait_ready(120, brokers=[BROKER])
