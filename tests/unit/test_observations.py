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


def test_rejoin_counters_are_counted_between_readings_and_a_restarted_leader_is_left_out():
    observations.forget("r")
    all3 = {101, 102, 103}
    down = observations.remember("r", _snap({101, 102}, {103}, 1), now=100.0)
    observations.add_rejoins("r", down, {101: 10.0, 102: 5.0})  # read after the answer
    observations.remember("r", _snap(all3, set(), 0), now=110.0, rejoins={101: 12.0, 102: 6.0})
    now = {101: 14.0, 102: 7.0, 103: 3.0}
    # the latest reading at least 20 s old is the one that saw 103 down
    since = observations.rejoins_since("r", now, min_age_s=20.0, now=125.0)
    assert since is not None and (since.rejoins, since.seconds, since.before is not None) == (6.0, 25.0, True)
    assert 103 not in since.before.registered
    # the latest of any age
    since = observations.rejoins_since("r", now, now=125.0)
    assert since is not None and (since.rejoins, since.seconds) == (3.0, 15.0)
    # since it was last seen down or out of an ISR
    since = observations.rejoins_since_out("r", 103, now, now=125.0)
    assert since is not None and since.rejoins == 6.0
    # 101 restarted: its counter went down, and only 102's rise counts (a floor, not an invention)
    since = observations.rejoins_since("r", {101: 1.0, 102: 9.0}, now=125.0)
    assert since is not None and since.rejoins == 3.0
    assert observations.rejoins_since("r", {}, now=125.0) is None
