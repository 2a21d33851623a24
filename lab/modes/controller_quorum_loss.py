"""Controller quorum loss: on the 3-controller lab cluster, SIGKILL two of the three controllers
(the active one among them), so no majority can elect a leader: no metadata changes at all."""

from lab import probes
from lab.mode import Mode
from localkafka import procs
from localkafka.cluster import ACTIVE_CONTROLLERS


def _active(cluster) -> int | None:
    for cid in cluster.controllers:
        if probes.metric(cluster, cid, ACTIVE_CONTROLLERS) == 1:
            return cid
    return None


def inject(cluster):
    import signal

    active = cluster.faults.wait_for(lambda: _active(cluster), 60, "an active controller")
    victims = [active, *[c for c in cluster.controllers if c != active][:1]]
    survivor = next(c for c in cluster.controllers if c not in victims)
    for cid in victims:
        pid = cluster.controllers[cid].pid()
        procs.signal_pid(pid, signal.SIGKILL)
        procs.wait_gone(pid, 10)
    return {"killed_controllers": sorted(victims), "survivor": survivor, "controller_ids": sorted(cluster.controllers)}


def wait_for_symptom(cluster, facts):
    # the survivor's exporter says it is not active, and stays so (it can't win an election alone)
    return cluster.faults.wait_for(
        lambda: probes.metric(cluster, facts["survivor"], ACTIVE_CONTROLLERS) == 0,
        60,
        "the surviving controller to report ActiveControllerCount 0",
    )


MODE = Mode(
    name="controller-quorum-loss",
    summary="3 controllers, SIGKILL 2 (the active one first): no quorum, no active controller",
    expect_entry="controller-quorum-loss",
    expect_severity="critical",
    questions=("why no active controller", "status"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    named=lambda f: f["killed_controllers"],
    topology="quorum",
)
