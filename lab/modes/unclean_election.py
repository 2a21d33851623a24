"""Unclean leader election: RF=2 topic with unclean.leader.election.enable=true. The follower (103)
dies, the leader (102) takes more writes alone, then the leader dies and the stale follower comes
back: the controller makes it leader with fewer records - acknowledged writes are gone."""

from confluent_kafka import Producer

from lab import probes
from lab.mode import Mode
from localkafka.cluster import CONTROLLER_ID, quiet_logger
from localkafka.metrics import UNCLEAN_ELECTIONS

TOPIC = "lab-unclean"
LEADER, FOLLOWER = 102, 103


def _produce(cluster, n: int, tag: str) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "logger": quiet_logger()})
    for i in range(n):
        p.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=0)
    if p.flush(30) != 0:
        raise RuntimeError(f"could not write the {tag} records to {TOPIC}")


def inject(cluster):
    f = cluster.faults
    f.create_topic(
        TOPIC,
        replica_assignment=[[LEADER, FOLLOWER]],
        config={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
        timeout=90,
    )
    _produce(cluster, 10, "both")
    f.kill_broker(FOLLOWER)
    f.wait_for(lambda: probes.isr_lacks(cluster, TOPIC, FOLLOWER), 60, f"{FOLLOWER} out of the ISR")
    _produce(cluster, 20, "leader-only")
    before = probes.end_offsets(cluster, TOPIC, [0])[0]
    elections = probes.metric(cluster, CONTROLLER_ID, UNCLEAN_ELECTIONS) or 0
    f.kill_broker(LEADER)
    f.wait_for(lambda: probes.partitions(cluster, TOPIC)[0]["leader"] is None, 60, f"{TOPIC}-0 offline")
    cluster.start_node(cluster.brokers[FOLLOWER])
    return {
        "topic": TOPIC,
        "topics": [TOPIC],
        "partition": 0,
        "lost_leader": LEADER,
        "unclean_leader": FOLLOWER,
        "end_offset_before": before,
        "unclean_elections_before": elections,
    }


def wait_for_symptom(cluster, facts):
    def elected():
        p = probes.partitions(cluster, TOPIC)[0]
        if p["leader"] != FOLLOWER:
            return None
        after = probes.end_offsets(cluster, TOPIC, [0])[0]
        # the controller's own count of unclean elections went up, and the log end went back
        elections = probes.metric(cluster, CONTROLLER_ID, UNCLEAN_ELECTIONS) or 0
        if after < facts["end_offset_before"] and elections > facts["unclean_elections_before"]:
            return {"end_offset_after": after, "unclean_elections": elections}
        return None

    return cluster.faults.wait_for(elected, 120, f"unclean election of {FOLLOWER} for {TOPIC}-0")


MODE = Mode(
    name="unclean-election",
    summary=f"unclean.leader.election.enable=true, leader {LEADER} dies after follower {FOLLOWER} fell out: "
    f"{FOLLOWER} leads with records missing",
    expect_entry="unclean-election",
    expect_severity="critical",
    questions=("why data loss", "why UncleanLeaderElectionsPerSec"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    topics=(TOPIC,),
    named=lambda f: [f"{f['topic']}-0"],
)
