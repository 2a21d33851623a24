"""Fetch-session eviction: broker 101 keeps only 8 incremental fetch sessions
(max.incremental.fetch.session.cache.slots=8, a static setting of the standard lab cluster: one
per cache shard) and consumer processes with incremental fetch sessions (kafka-python) want more.
A consumer's new session may evict another consumer's only when that one is older than the
broker's 120 s minimum (FetchSessionCacheShard.touch puts a session in the "evictable by all" map
only then) and is not bigger, so the lab starts eight one-partition consumers (one per shard), waits out that age,
then starts one that reads every partition: the broker evicts, the evicted consumer gets
FETCH_SESSION_ID_NOT_FOUND, and the small sessions keep evicting each other from then on."""

import time

from lab import clients, probes
from lab.mode import Mode
from localkafka.faults import _read_line

TOPIC = "lab-fetch-sessions"
BROKER = 101
PARTITIONS = 6
SMALL_CONSUMERS = 8  # one per cache shard: every shard full
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictionspersec_total"
MIN_SESSION_AGE_S = 120  # Kafka's FetchSessionCache eviction age (not configurable)


def inject(cluster):
    cluster.faults.create_topic(TOPIC, replica_assignment=[[BROKER]] * PARTITIONS, timeout=90)
    before = probes.metric(cluster, BROKER, EVICTIONS) or 0
    children = [
        clients.spawn_with_parent(clients.SESSION_CONSUMER, cluster.bootstrap_servers, TOPIC, str(i % PARTITIONS))
        for i in range(SMALL_CONSUMERS)
    ]
    facts = {
        "broker_id": BROKER,
        "topic": TOPIC,
        "topics": [TOPIC],
        "evictions_before": before,
        "pids": [c.pid for c in children],
        "_children": children,
    }
    for c in children:
        if _read_line(c, 90) != "READY":
            raise RuntimeError("a session consumer did not start")
    facts["small_sessions_started"] = time.time()
    return facts


def wait_for_symptom(cluster, facts):
    # the two small sessions must be older than the broker's minimum before a bigger one may evict
    wait = facts["small_sessions_started"] + MIN_SESSION_AGE_S + 5 - time.time()
    if wait > 0:
        time.sleep(wait)  # a rule of the broker, not a guess at timing: see MIN_SESSION_AGE_S
    big = clients.spawn_with_parent(
        clients.SESSION_CONSUMER, cluster.bootstrap_servers, TOPIC, ",".join(str(p) for p in range(PARTITIONS))
    )
    facts["pids"].append(big.pid)
    facts["_children"].append(big)

    def evicted():
        n = probes.metric(cluster, BROKER, EVICTIONS) or 0
        return {"evictions": n - facts["evictions_before"]} if n > facts["evictions_before"] else None

    return cluster.faults.wait_for(evicted, 90, f"broker {BROKER} to evict an incremental fetch session")


def heal(cluster, facts):
    clients.stop(facts.get("pids", []), facts.get("_children"))


MODE = Mode(
    name="fetch-session-eviction",
    summary=f"broker {BROKER} with 8 fetch-session slots, 9 consumer processes: the broker evicts sessions",
    expect_entry="fetch-session-eviction",
    expect_severity="warning",
    questions=("why FETCH_SESSION_ID_NOT_FOUND", "why IncrementalFetchSessionEvictionsPerSec"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
)
