"""Consumer stop: a group reads, commits and its consumers go away while a producer keeps writing
(localkafka/groups.stopped_group): the group is EMPTY and its lag grows. No runbook entry is the
cause - the application stopped consuming - so the right answer says so (Burrow's STOP) and does
not lead with a rebalance storm, which the bot once did for exactly this."""

from lab.mode import Mode
from localkafka import groups

GROUP = "lab-stopped"
TOPIC = "lab-stopped-topic"


def inject(cluster):
    lagging = groups.stopped_group(cluster, GROUP, TOPIC, initial=100, rate=20)
    return {"group": GROUP, "topic": TOPIC, "topics": [TOPIC], "_lagging": lagging}


def wait_for_symptom(cluster, facts):
    """EMPTY (no members) and behind, read with a separate admin client."""
    lagging = facts["_lagging"]

    def stopped():
        desc = cluster.admin().describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
        lag = sum(lagging.lag().values())
        return {"state": desc.state.name, "lag": lag} if not desc.members and lag > 0 else None

    return cluster.faults.wait_for(stopped, 60, f"group {GROUP} to have no members and lag")


def heal(cluster, facts):
    lagging = facts.get("_lagging")
    if lagging is not None:
        lagging.stop()


MODE = Mode(
    name="consumer-stop",
    summary="a group commits and its consumers leave while a producer keeps writing: EMPTY, lag growing",
    expect_entry="",
    expect_severity="warning",
    expect_verdict="its consumers stopped (Burrow: STOP)",
    not_top="rebalance-storm",
    questions=("lag {group}",),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["group"]],
)
