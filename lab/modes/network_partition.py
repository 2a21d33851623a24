"""Network partition: broker 103 cut off the network on loopback, from outside, with tc (lab/netcut.py):
every packet sent to its listener port is dropped, so a connect to it times out (no refusal) while
its process runs and its own connections out - heartbeats to the controller, fetches from the
other leaders - still flow.

One producer stays on 103's side: connected before the cut, its connection is let through and it
keeps writing to the partitions 103 leads. Without new records a leader keeps followers that stopped
fetching in its ISR (they hold everything it has), and once cut off nobody else can write to it.

What the lab cluster does then (observed): 103 stays registered and unfenced; its followers on
101 and 102 cannot fetch from it, so after replica.lag.time.max.ms (5 s here) each partition 103
leads shrinks its ISR to 103 alone (under min ISR: acks=all writes to it fail, and other clients
cannot reach it anyway), while 103 stays in the ISRs of the partitions 101 and 102 lead.

The filters outlive `kbot lab run` (they are kernel state) until `kbot lab heal` removes them; in
process they are also a background worker of the cluster's FaultInjector, so stop_background (every
heal, the tests' teardown) removes them too."""

from __future__ import annotations

import re
import socket
import time

from confluent_kafka import Producer

from lab import clients, netcut
from lab.mode import Mode
from localkafka.cluster import quiet_logger
from localkafka.faults import _read_line

TOPIC = "lab-partition"
BROKER = 103
PARTITIONS = 6  # RF=3 over three brokers: two of them led by 103
WRITE_RATE = 50  # records/s from the producer on 103's side of the cut


def listener_ports(cluster, broker: int = BROKER) -> list[int]:
    """The ports of every listener of ``broker`` (client and inter-broker; a broker has no
    controller listener of its own), from its rendered server.properties."""
    node = cluster.brokers[broker]
    ports: set[int] = {node.port}
    try:
        text = node.props_file.read_text()
    except OSError:
        return sorted(ports)
    for line in text.splitlines():
        if line.strip().startswith("listeners="):
            ports |= {int(p) for p in re.findall(r":(\d+)(?:,|$)", line.strip())}
    return sorted(ports)


class Cut:
    """The drop filters as a background worker of the cluster's FaultInjector: stop() removes them."""

    name = "network-partition drop filters"

    def __init__(self, port_base: int):
        self.port_base = port_base

    def stop(self, timeout: float = 15) -> dict:
        return {"netcut_removed": netcut.restore(self.port_base)}


def connect_times_out(port: int, timeout: float = 1.0) -> bool:
    """A TCP connect to 127.0.0.1:``port`` gets no answer at all (not refused, not accepted)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return False
    except TimeoutError:
        return True
    except OSError:
        return False


class Writer:
    """The producer on 103's side of the cut, as a background worker: stop() ends it."""

    name = "network-partition writer"

    def __init__(self, child):
        self.child = child

    def stop(self, timeout: float = 15) -> dict:
        clients.stop([self.child.pid], [self.child])
        return {"writer_stopped": self.child.pid}


def inject(cluster):
    cluster.faults.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, timeout=90)
    led = [p["partition"] for p in cluster.faults.describe([TOPIC])[TOPIC] if p["leader"] == BROKER]
    if not led:
        raise RuntimeError(f"broker {BROKER} leads no partition of {TOPIC}: nothing would show the cut")
    # A leader shrinks its ISR only while its log end moves on without the followers (a follower
    # that stops fetching but has every record stays in sync), and once 103 is cut off nobody new
    # can reach it. So one producer on 103's side keeps writing to the partitions it leads: its
    # connection, opened before the cut, is let through (a client in the same rack as the broker).
    writer = clients.spawn_with_parent(
        clients.STEADY_TO_PARTITIONS, cluster.bootstrap_servers, TOPIC, ",".join(map(str, led)), WRITE_RATE
    )
    cluster.faults._background.append(Writer(writer))
    if _read_line(writer, 60) != "READY":
        raise RuntimeError(f"the producer on broker {BROKER}'s side delivered nothing to {TOPIC} in 60 s")
    port = cluster.brokers[BROKER].port
    kept = tuple((local, port) for local in netcut.connections(writer.pid, port))
    if not kept:
        raise RuntimeError(f"the producer on broker {BROKER}'s side has no connection to port {port}")
    ports = listener_ports(cluster)
    cluster.faults._background.append(Cut(cluster.port_base))  # before the cut: a half-made one is undone too
    try:
        cut = netcut.cut(cluster.port_base, ports, keep=kept)
    except netcut.NetcutError as exc:
        raise RuntimeError(f"could not cut broker {BROKER} off: {exc}") from None
    return {"broker_id": BROKER, "topic": TOPIC, "topics": [TOPIC], "led_by_broker": led, "pids": [writer.pid], **cut}


def _observer(cluster):
    """A fresh admin client bootstrapped from the other brokers only, for reading the cut from
    outside. The cluster's shared client may hold a connection to 103 from an earlier mode (a
    flapping or halted broker's); after the cut its requests on it hang until they time out
    ("Failed to get metadata: Local: Timed out", every poll for 90 s in the full lab run). A
    client made after the cut connects to 103 never (its SYN is dropped) and asks 101 and 102."""
    from confluent_kafka.admin import AdminClient

    others = ",".join(f"127.0.0.1:{n.port}" for b, n in sorted(cluster.brokers.items()) if b != BROKER)
    return AdminClient({"bootstrap.servers": others, "logger": quiet_logger()})


def _state(admin, led: list[int]):
    """(registered, ISR of each partition 103 leads) read from outside through ``admin``."""
    try:
        registered = sorted(n.id for n in admin.describe_cluster(request_timeout=10).result().nodes)
    except Exception:  # routed to a broker that does not answer: the Metadata answer's broker list
        registered = sorted(admin.list_topics(timeout=10).brokers)
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    parts = {n: p for n, p in md.partitions.items()}
    return registered, {n: sorted(parts[n].isrs) for n in led if n in parts and parts[n].leader == BROKER}


def _produce_fails(cluster, partition: int) -> str:
    """What an acks=all producer gets for one record to a partition 103 leads (an error name)."""
    errors: list[str] = []
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "message.timeout.ms": 4000,
            "logger": quiet_logger(),
        }
    )
    p.produce(TOPIC, value=b"x", partition=partition, on_delivery=lambda err, msg: err and errors.append(err.name()))
    p.flush(10)
    return errors[0] if errors else "delivered"


def wait_for_symptom(cluster, facts):
    """103 still registered, its port silent to a connect, and every partition it leads down to an
    ISR of 103 alone."""
    led = facts["led_by_broker"]
    t0 = time.monotonic()
    admin = _observer(cluster)

    def seen():
        registered, isrs = _state(admin, led)
        if BROKER not in registered or len(isrs) != len(led):
            return None
        return isrs if all(isr == [BROKER] for isr in isrs.values()) else None

    isrs = cluster.faults.wait_for(
        seen, 90, f"the partitions broker {BROKER} leads to shrink their ISR to {BROKER}", interval=0.5
    )
    port = facts["dropped_ports"][0]
    if not connect_times_out(port):
        raise RuntimeError(f"a connect to broker {BROKER}'s port {port} did not time out: the cut is not in place")
    return {
        "isr_of_led": {str(k): v for k, v in isrs.items()},
        "registered": _state(admin, led)[0],
        "connect": f"127.0.0.1:{port} times out",
        "acks_all_produce": _produce_fails(cluster, led[0]),
        "seconds_to_shrink": round(time.monotonic() - t0, 1),
    }


def heal(cluster, facts):
    netcut.restore(cluster.port_base)  # from another process (`kbot lab heal`) too: keyed by port base
    clients.stop(facts.get("pids", []))  # the writer (it also exits with the process that started it)
    cluster.faults.stop_background()


MODE = Mode(
    name="network-partition",
    summary=f"drop every packet to broker {BROKER}'s listener on loopback (tc): it stays registered, but "
    "nobody can reach it and the partitions it leads shrink their ISR to it alone",
    expect_entry="network-partition",
    expect_severity="critical",
    # A silent port is known silent only when the TCP probe's 1.5 s run out, and a read the client
    # library sent to 103 is sent again after 1 s: 3.6 s was measured near idle.
    answer_budget_s=5.0,
    questions=("why URP", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    needs=("tc",),
    note="tc on lo: an htb qdisc whose class for this cluster drops (pfifo limit 0) what u32 filters on "
    f"broker {BROKER}'s listener ports send there; other loopback traffic flows",
)
