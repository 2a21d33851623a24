"""Metadata lag: broker 103 stops getting the KRaft metadata log while its heartbeats reach the
controller, so it stays registered and unfenced and goes on routing from the leaders it knew.

How it is done from outside. Every lab node listens on 127.0.0.1, and 103 talks to the
controller's port over two connections of its own, each from an ephemeral port: the raft client's
(Fetch of __cluster_metadata, client id "raft-client-103", about twice a second) and the
heartbeat channel's (BrokerHeartbeat, client id "103"). Filtering by the raft connection's source
port works only until the first timeout: the raft client then disconnects and fetches again from a
new port. So the filter matches what the requests say instead (lab/netcut.py hold): a tc u32
filter on lo sends every segment to the controller's port that starts a Fetch request from
raft-client-103 into an htb class that lets one byte a second out. Each fetch waits far past the
broker's 2 s controller.quorum.request.timeout.ms, the broker gives up on it ("Disconnecting from
node 1 due to request timeout" in its server.log), reconnects and fetches again, held again. Its
heartbeats, everyone else's fetches and all client traffic flow.

What the lab cluster does then (observed): DescribeQuorum shows observer 103 falling behind by the
two records a second the idle controller writes (NoOpRecord every 500 ms), its last caught-up time
growing, while 101 and 102 stay caught up; the controller keeps 103 unfenced (FencedBrokerCount 0:
a broker is fenced for missing heartbeats, and lag alone never fences it). Then the metadata moves
on without 103: leadership of a partition 103 follows is moved to 103 (replicas reordered, preferred
leader elected). The controller and 101/102 say 103 leads it; 103 still thinks 101 does. A client
that sends a record to 103 gets NOT_LEADER_OR_FOLLOWER, and 103's own metadata answer names the old
leader, until 103 catches up: the heal removes the hold and it does within a second.
"""

from __future__ import annotations

import time

from diagnosis.quorum_checks import metadata_stale_ms
from lab import netcut, probes
from lab.mode import Mode
from localkafka.metrics import FENCED_BROKERS

TOPIC = "lab-metadata-lag"
BROKER = 103
OLD_LEADER = 101
FETCH_API_KEY = 1  # the api key of a Fetch request (raft fetches of the metadata log are Fetch requests)
CHURN_AFTER_S = 2.0  # the hold is checked working before the metadata moves on


def raft_client_id(broker: int) -> str:
    """The client id a KRaft broker's raft client puts in its requests to the controller (seen on
    the wire in the lab, Kafka 4.4: raft-client-<node id>)."""
    return f"raft-client-{broker}"


class Hold:
    """The hold as a background worker of the cluster's FaultInjector: stop() removes it."""

    name = "metadata-lag hold on broker 103's metadata fetches"

    def __init__(self, port_base: int):
        self.port_base = port_base

    def stop(self, timeout: float = 15) -> dict:
        return {"hold_released": netcut.release(self.port_base)}


def outside_admin(cluster):
    """A kafka-python admin client for reading the fault from outside (DescribeQuorum, one broker's
    own Metadata answer), never the one the bot uses."""
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)


def observers(admin) -> dict[int, dict]:
    """DescribeQuorum from outside: {broker: {'lag': records, 'caught_up_s_ago': seconds}}."""
    part = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
    leader = part["leader_id"]
    leo = next(v["log_end_offset"] for v in part["current_voters"] if v["replica_id"] == leader)
    now_ms = time.time() * 1000
    return {
        o["replica_id"]: {
            "lag": leo - o["log_end_offset"],
            "caught_up_s_ago": round((now_ms - o["last_caught_up_timestamp"]) / 1000, 1),
        }
        for o in part.get("observers") or []
    }


def seen_by(admin, broker: int, partition: int = 0) -> dict | None:
    """``TOPIC``-``partition`` in the Metadata answer of ``broker`` itself ({'leader', 'replicas',
    'isr'}), or None when it does not know it. A client library asks whichever broker it likes,
    103 (stale) too, so the request is sent to ``broker`` by id (kafka-python, through ``admin``)."""
    from kafka.protocol.metadata import MetadataRequest

    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False
    )
    response = admin._manager.run(admin._manager.send, request, broker)
    for t in response.topics:
        for p in t.partitions if t.name == TOPIC and not t.error_code else ():
            if p.partition_index == partition:
                return {"leader": p.leader_id, "replicas": list(p.replica_nodes), "isr": sorted(p.isr_nodes)}
    return None


def leader_seen_by(admin, broker: int) -> int | None:
    seen = seen_by(admin, broker)
    return seen["leader"] if seen else None


def produce_error(cluster) -> str:
    """What a producer that does not retry gets for one record to partition 0 (an error name)."""
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks=1, retries=0, request_timeout_ms=5000, max_block_ms=10000
    )
    try:
        p.send(TOPIC, b"x", partition=0).get(timeout=10)
        return "delivered"
    except Exception as exc:  # the error the broker answered with is what the client sees
        return type(exc).__name__
    finally:
        p.close(timeout=5)


def inject(cluster):
    # 103 follows partition 0 (leader 101) and has applied the topic before its fetches are held.
    cluster.faults.create_topic(TOPIC, replica_assignment=[[OLD_LEADER, BROKER, 102]], timeout=90)
    admin = outside_admin(cluster)
    try:
        cluster.faults.wait_for(
            lambda: (
                BROKER in ((seen_by(admin, OLD_LEADER) or {}).get("isr") or [])
                and leader_seen_by(admin, BROKER) == OLD_LEADER
            ),
            60,
            f"broker {BROKER} to follow {TOPIC}-0 and see {OLD_LEADER} lead it",
        )
    finally:
        admin.close()
    cluster.faults._background.append(Hold(cluster.port_base))  # before the hold: a half-made one is undone too
    try:
        held = netcut.hold(cluster.port_base, cluster.controller.port, FETCH_API_KEY, raft_client_id(BROKER))
    except netcut.NetcutError as exc:
        raise RuntimeError(f"could not hold broker {BROKER}'s metadata fetches: {exc}") from None
    return {"broker_id": BROKER, "topic": TOPIC, "topics": [TOPIC], "controller_port": cluster.controller.port, **held}


def _move_leader_to_broker(cluster, ka) -> None:
    """Partition 0's replicas reordered to put 103 first, then its preferred leader elected: a
    leadership change only the controller's metadata log carries. Read from 101, which is current."""
    from kafka.errors import ElectionNotNeededError
    from kafka.structs import TopicPartition

    ka.alter_partition_reassignments({TopicPartition(TOPIC, 0): [BROKER, OLD_LEADER, 102]})
    cluster.faults.wait_for(
        lambda: ((seen_by(ka, OLD_LEADER) or {}).get("replicas") or [None])[0] == BROKER,
        30,
        f"{TOPIC}-0's replicas to be reordered with {BROKER} first",
    )

    def elected():
        try:
            ka.elect_leaders(0, {TOPIC: [0]})  # 0: preferred
        except ElectionNotNeededError:
            pass
        return leader_seen_by(ka, OLD_LEADER) == BROKER

    cluster.faults.wait_for(elected, 30, f"broker {BROKER} elected leader of {TOPIC}-0", interval=1.0)


def wait_for_symptom(cluster, facts):
    """103 behind on the metadata log for longer than the runbook's threshold while still
    registered and unfenced, then a leadership change it never hears of: the controller says 103
    leads partition 0, 103 still names the old leader, and a record sent there is refused."""

    stale_s = metadata_stale_ms() / 1000
    t0 = time.monotonic()
    admin = outside_admin(cluster)
    try:

        def behind():
            obs = observers(admin)
            me = obs.get(BROKER)
            return obs if me and me["lag"] > 0 and me["caught_up_s_ago"] > CHURN_AFTER_S else None

        cluster.faults.wait_for(behind, 30, f"broker {BROKER} to fall behind on the metadata log", interval=0.5)
        _move_leader_to_broker(cluster, admin)
        obs = cluster.faults.wait_for(
            lambda: (lambda o: o if o[BROKER]["caught_up_s_ago"] > stale_s + 1 else None)(observers(admin)),
            60,
            f"broker {BROKER} to stay behind for more than {stale_s:g} s",
            interval=0.5,
        )
        fenced = probes.metric(cluster, cluster.controller.node_id, FENCED_BROKERS)
        if fenced:
            raise RuntimeError(f"the controller fenced {fenced:g} broker(s): the hold reached heartbeats too")
        seen = {str(b): leader_seen_by(admin, b) for b in sorted(cluster.brokers)}
        if seen[str(BROKER)] != OLD_LEADER or seen[str(OLD_LEADER)] != BROKER:
            raise RuntimeError(f"{TOPIC}-0's leader as each broker answers: {seen}, not the stale view on {BROKER}")
        refused = produce_error(cluster)
        if refused == "delivered":
            raise RuntimeError(f"a record to {TOPIC}-0 was delivered: broker {BROKER} is not behind")
        return {
            "observers": {str(b): o for b, o in sorted(obs.items())},
            "fenced_broker_count": fenced,
            "leader_seen_by": seen,
            "produce_to_partition_0": refused,
            "held_segments": netcut.held(cluster.port_base),
            "seconds_behind": round(time.monotonic() - t0, 1),
        }
    finally:
        admin.close()


def heal(cluster, facts):
    netcut.release(cluster.port_base)  # from another process (`kbot lab heal`) too: keyed by port base
    cluster.faults.stop_background()


MODE = Mode(
    name="metadata-lag",
    summary=f"hold broker {BROKER}'s metadata fetches to the controller on loopback (tc, matched by the "
    "request, not the port) while its heartbeats flow: it stays unfenced, falls behind on the metadata "
    "log and routes clients to a leader that moved",
    expect_entry="metadata-lag",
    expect_severity="warning",
    questions=("why NOT_LEADER_OR_FOLLOWER",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    needs=("tc",),
    note=f"tc on lo: a u32 filter matching the start of a Fetch request from raft-client-{BROKER} to the "
    "controller's port sends it to an htb class that lets one byte a second out (every fetch outlives the "
    "broker's request timeout); its heartbeats and other loopback traffic flow",
)
