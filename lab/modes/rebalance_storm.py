"""Rebalance storm: consumer processes that keep joining and leaving one group while a producer
writes (localkafka/groups.py: every member is its own process and client), so the group spends its
time rebalancing and its lag grows. Seen from outside: the group's member ids keep changing."""

from lab.mode import Mode
from localkafka import groups, procs

GROUP = "lab-storm"
TOPIC = "lab-storm-topic"


def inject(cluster):
    fault = groups.rebalance_storm(cluster, GROUP, TOPIC, members=3, records=2000, rate=20, duration=600)
    return {"group": GROUP, "topic": TOPIC, "topics": [TOPIC], "pids": fault.pids, "_fault": fault}


def wait_for_symptom(cluster, facts):
    """At least three different member sets, or a rebalance state seen twice, by polling
    DescribeGroups (a separate admin client)."""
    seen_sets: set[frozenset] = set()
    rebalancing = 0

    def storming():
        nonlocal rebalancing
        desc = cluster.admin().describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
        seen_sets.add(frozenset(m.member_id for m in desc.members))
        if "REBALANC" in desc.state.name:  # PREPARING_/COMPLETING_REBALANCING (classic protocol)
            rebalancing += 1
        if len(seen_sets) >= 3 or rebalancing >= 2:
            return {"member_sets_seen": len(seen_sets), "rebalancing_polls": rebalancing}
        return None

    return cluster.faults.wait_for(storming, 120, f"group {GROUP} to keep rebalancing", interval=0.5)


def heal(cluster, facts):
    fault = facts.get("_fault")
    if fault is not None:
        fault.stop()
    else:  # another process started it: its children exit when their parent is gone
        import signal

        for pid in facts.get("pids", []):
            procs.signal_pid(pid, signal.SIGTERM)


MODE = Mode(
    name="rebalance-storm",
    summary="3 consumer processes keep joining and leaving one group under load: it rebalances again and again",
    expect_entry="rebalance-storm",
    expect_severity="warning",
    questions=("lag {group}", "why rebalance storm"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["group"]],
)
