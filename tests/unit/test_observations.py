"""The bot's short memory of a cluster (issue 35: time): when a broker came back, how many times it
dropped out, and whether URP is falling or stuck."""

from __future__ import annotations

from diagnosis import observations
from diagnosis.rules import BrokerFacts, PartitionState
from diagnosis.snapshot import Snapshot
from live.model import ClusterInfo


def _snap(registered: set[int], out_of_isr: set[int], urp: int) -> Snapshot:
    states = [
        PartitionState(
            "t",
            n,
            101,
            (101, 102, 103),
            tuple(b for b in (101, 102, 103) if b not in out_of_isr) if n < urp else (101, 102, 103),
        )
        for n in range(max(urp, 1))
    ]
    return Snapshot(
        ClusterInfo(None, None, []), [], {}, states, BrokerFacts(frozenset(registered), frozenset({101, 102, 103}))
    )


def test_a_return_a_single_stall_and_a_flap_are_told_apart():
    observations.forget("c")
    all3 = {101, 102, 103}
    seq = [(all3, set(), 0), ({101, 102}, {103}, 4), (all3, {103}, 3), (all3, set(), 0)]
    for t, (reg, out, urp) in enumerate(seq):
        observations.remember("c", _snap(reg, out, urp), now=100.0 + 10 * t)
    assert observations.back_since("c", 103, now=140.0) == 20.0
    assert observations.dropouts("c", 103, now=140.0) == 1  # one stall
    for t, (reg, out, urp) in enumerate(seq * 2):
        observations.remember("c", _snap(reg, out, urp), now=200.0 + 10 * t)
    assert observations.dropouts("c", 103, now=280.0) == 3  # it keeps dropping out
    assert observations.urp_trend("c", now=280.0) == (4, 0)


def test_urp_that_never_falls_for_minutes_is_stuck_not_recovering():
    observations.forget("s")
    for t in range(0, 180, 20):
        observations.remember("s", _snap({101, 102, 103}, {103}, 3), now=1000.0 + t)
    assert observations.stuck("s", now=1160.0)
    observations.forget("f")
    for t, urp in zip(range(0, 180, 20), (6, 5, 4, 4, 3, 2, 2, 1, 1)):
        observations.remember("f", _snap({101, 102, 103}, {103}, urp), now=1000.0 + t)
    assert not observations.stuck("f", now=1160.0)
