"""A client quota as the cause: the user sets a produce quota of 1 kB/s on a client id (AlterClientQuotas,
what `kafka-configs --alter --entity-type clients` sends) while that client writes 20 kB/s. The
brokers are healthy; they delay the client's responses by design (its throttle time rises), so the
right answer is the quota, named with its client id, and not request-handler saturation (which the
bot once advised for exactly this: "add request-handler threads")."""

from lab import clients
from lab.chaos_faults import set_client_quota
from lab.mode import Mode
from localkafka.faults import _read_line

TOPIC = "lab-quota"
CLIENT = "lab-quota-app"


def inject(cluster):
    cluster.faults.create_topic(TOPIC, 3, 3, timeout=90)
    child = clients.spawn_with_parent(clients.QUOTA_PRODUCER, cluster.bootstrap_servers, TOPIC, CLIENT, 20)
    facts = {"client_id": CLIENT, "topic": TOPIC, "topics": [TOPIC], "pids": [child.pid], "_children": [child]}
    if _read_line(child, 90) != "READY":
        raise RuntimeError("the quota's producer did not start")
    set_client_quota(cluster, CLIENT, "producer_byte_rate", 1024)  # waits until every broker applies it
    return facts


def wait_for_symptom(cluster, facts):
    """The producer's own statistics say a broker throttled it."""
    line = _read_line(facts["_children"][0], 90)
    if line != "THROTTLED":
        raise RuntimeError(f"the producer was not throttled within 90 s (it said {line!r})")
    return {"throttled": True}


def heal(cluster, facts):
    clients.stop(facts.get("pids", []), facts.get("_children"))
    set_client_quota(cluster, CLIENT, "producer_byte_rate", None)


MODE = Mode(
    name="client-quota",
    summary=f"a 1 kB/s produce quota set on client {CLIENT} while it writes 20 kB/s: the broker throttles it",
    expect_entry="client-quota-throttling",
    expect_severity="warning",
    questions=("why my producer is slow, produce-throttle-time-avg is high",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["client_id"]],
)
