"""One controller of three lost: on the 3-controller lab cluster, SIGKILL the active controller.
The other two still form a majority, elect a new leader and the cluster keeps working, so the
right answer is not "quorum loss": it names the dead voter, says the quorum holds (2 of 3) and
that it tolerates no further loss (warning, not critical)."""

from lab.mode import Mode
from lab.modes.controller_quorum_loss import _active
from localkafka import procs


def inject(cluster):
    import signal

    active = cluster.faults.wait_for(lambda: _active(cluster), 60, "an active controller")
    pid = cluster.controllers[active].pid()
    procs.signal_pid(pid, signal.SIGKILL)
    procs.wait_gone(pid, 10)
    survivors = sorted(c for c in cluster.controllers if c != active)
    return {"killed_controller": active, "survivors": survivors, "controller_ids": sorted(cluster.controllers)}


def wait_for_symptom(cluster, facts):
    # a survivor took over: the quorum elected a new leader without the dead voter
    return cluster.faults.wait_for(
        lambda: _active(cluster) in facts["survivors"], 60, "a surviving controller to become the active one"
    )


MODE = Mode(
    name="controller-minority-loss",
    summary="3 controllers, SIGKILL the active one: the other two elect a leader; the quorum holds (2 of 3)",
    expect_entry="",
    expect_severity="warning",
    expect_verdict="the quorum keeps its majority (2 of 3)",
    not_top="controller-quorum-loss",
    questions=("status", "why no active controller"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    named=lambda f: [str(f["killed_controller"])],
    topology="quorum",
)
