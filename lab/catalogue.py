"""What `kbot lab list` shows: every mode, whether it runs on this machine, and why not."""

from __future__ import annotations

from lab.modes import MODES
from lab.runner import unavailable
from lab.topology import can_mount


def catalogue() -> list[dict]:
    rows = []
    for m in MODES:
        why_not = unavailable(m)
        note = m.note
        if m.feasible and ({"disk2", "ext4"} & set(m.needs)) and can_mount():
            note = (note + " " if note else "") + (
                "uses a 64 MB ext4 loop filesystem the lab mounts as broker 103's "
                "second log dir (a tmpfs when loop devices are not allowed)"
            )
        rows.append(
            {
                "mode": m.name,
                "summary": m.summary,
                "runs_here": why_not is None,
                "why_not": why_not,
                "expect_entry": m.expect_entry,
                "expect_severity": m.expect_severity,
                "questions": list(m.questions),
                "topology": m.topology,
                "note": note if m.feasible else "",
            }
        )
    return rows
