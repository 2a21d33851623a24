"""Full disk: broker 103's second log dir is a small filesystem (lab/topology.py); the lab fills it
from outside with a file until about 94 % is used - past the runbook's 85 % critical line, short of
the point where the broker's next append fails. That is the incident to catch: once the disk is
really full the broker takes the directory offline, which looks exactly like a broken disk to
Kafka and is the log-dir-failure mode."""

import errno
import os

from lab.mode import Mode
from lab.modes import _disk

TOPIC = "lab-full-disk"
FILLER = "lab-filler.bin"


FILL_TO = 0.94  # used fraction: above the 85 % critical alert, with room left for the broker's writes


def used(mount) -> float:
    st = os.statvfs(mount)
    return 1 - st.f_bavail / st.f_blocks


def fill(mount, path, to: float = FILL_TO) -> int:
    """Write zeros until the filesystem is ``to`` full (as df counts it); returns the bytes written."""
    st = os.statvfs(mount)
    want = int(st.f_blocks * st.f_frsize * to) - int((st.f_blocks - st.f_bavail) * st.f_frsize)
    written = 0
    chunk = b"\0" * (1 << 20)
    with open(path, "wb") as f:
        while written < want:
            n = min(len(chunk), want - written)
            try:
                written += f.write(chunk[:n])
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        f.flush()
        os.fsync(f.fileno())
    return written


def inject(cluster):
    on2 = _disk.topic_on_disk2(cluster, TOPIC)
    filled = fill(cluster.disk2_mount, cluster.disk2_mount / FILLER)
    return _disk.facts(cluster, TOPIC, on2, filler_bytes=filled)


def wait_for_symptom(cluster, facts):
    """The filesystem is past the critical line, as df would show it on the host."""
    share = used(cluster.disk2_mount)
    if share < 0.85:
        raise RuntimeError(f"{cluster.disk2_mount} is only {share:.0%} used after writing the filler")
    return {"used": round(share, 3)}


def heal(cluster, facts):
    (cluster.disk2_mount / FILLER).unlink(missing_ok=True)


MODE = Mode(
    name="full-disk",
    summary="fill broker 103's second log dir (the lab's small filesystem) from outside to ~94 %: past the critical alert",
    expect_entry="full-disk",
    expect_severity="critical",
    questions=("why disk full", "why disk usage 94%"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"], f["log_dir"]],
    needs=("disk2",),
)
