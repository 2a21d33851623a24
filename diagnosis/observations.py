"""A short memory of what the bot observed, per cluster (issue 35: time).

One snapshot cannot tell a broker catching up after a restart from one that is failing, nor one
stall from a broker that keeps dropping out. The long-running bot remembers the last few readings
of each cluster (a small in-process ring, nothing on disk): which brokers were registered and
which were out of the ISRs, how many partitions were under-replicated, and the leaders' cumulative
ISR-rejoin counters (IsrExpandsPerSec's total), whose difference between two readings counts the
returns in between exactly, where a one-minute rate cannot. A one-shot process
starts with an empty memory and reads the same from the brokers' meters instead (the processes'
start times and the ISR rates, diagnosis/isr_churn.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass

from diagnosis.snapshot import Snapshot

RING = 64  # readings kept per cluster
WINDOW_S = 600.0  # how far back "recently" and a flap count look


@dataclass(frozen=True)
class Observation:
    at: float  # time.monotonic()
    registered: frozenset[int]
    out_of_isr: frozenset[int]  # brokers with a replica out of some ISR
    urp: int
    rejoins: dict[int, float] | None = None  # node -> cumulative IsrExpands total, when read
    churning: frozenset[int] = frozenset()  # brokers the ISR meters showed dropping out and back
    churn_warned: bool = False  # `why URP` answered this reading with a churn warning


_RINGS: dict[str, deque[Observation]] = {}


def remember(
    cluster: str,
    snap: Snapshot,
    now: float | None = None,
    rejoins: dict[int, float] | None = None,
    churning: frozenset[int] = frozenset(),
) -> Observation:
    out = frozenset(b for p in snap.states for b in p.replicas if b not in p.isr)
    urp = sum(1 for p in snap.states if len(p.isr) < len(p.replicas) and p.has_leader)
    ring = _RINGS.setdefault(cluster, deque(maxlen=RING))
    seen = Observation(time.monotonic() if now is None else now, snap.brokers.registered, out, urp, rejoins, churning)
    ring.append(seen)
    return seen


def add_rejoins(cluster: str, seen: Observation, rejoins: dict[int, float]) -> None:
    """Give a remembered reading the counters read after it (its answer did not wait for them)."""
    ring = _RINGS.get(cluster)
    if not ring or not rejoins:
        return
    for i, o in enumerate(ring):
        if o is seen:
            ring[i] = dataclasses.replace(o, rejoins=rejoins)
            return


@dataclass(frozen=True)
class RejoinsSince:
    """The leaders' ISR rejoins between the last reading that had their counters and now."""

    rejoins: float
    seconds: float
    before: Observation  # that reading (was the broker out then?)


def rejoins_since(
    cluster: str, totals: dict[int, float], min_age_s: float = 0.0, now: float | None = None
) -> RejoinsSince | None:
    """Rejoins counted by the leaders since the latest remembered reading of their counters at least
    ``min_age_s`` old, within the window; call it before remembering this reading. A node whose
    counter went down restarted (its count began again): it is left out, so the figure is a floor,
    never an invention."""
    now = time.monotonic() if now is None else now
    before = next((o for o in reversed(recent(cluster, now=now)) if o.rejoins and now - o.at >= min_age_s), None)
    return _since(before, totals, now) if before is not None else None


def _since(before: Observation, totals: dict[int, float], now: float) -> RejoinsSince | None:
    if not totals or not before.rejoins:
        return None
    common = [n for n in totals if n in before.rejoins and totals[n] >= before.rejoins[n]]
    if not common:
        return None
    return RejoinsSince(sum(totals[n] - before.rejoins[n] for n in common), now - before.at, before)


def rejoins_since_out(
    cluster: str, broker: int, totals: dict[int, float], now: float | None = None
) -> RejoinsSince | None:
    """Rejoins counted since the latest remembered reading (with counters) that saw ``broker`` down
    or out of an ISR, within the window; call it before remembering this reading."""
    now = time.monotonic() if now is None else now
    for o in reversed(recent(cluster, now=now)):
        if o.rejoins and (broker not in o.registered or broker in o.out_of_isr):
            return _since(o, totals, now)
    return None


def recent(cluster: str, window_s: float = WINDOW_S, now: float | None = None) -> list[Observation]:
    now = time.monotonic() if now is None else now
    return [o for o in _RINGS.get(cluster, ()) if now - o.at <= window_s]


def back_since(cluster: str, broker: int, now: float | None = None) -> float | None:
    """Seconds since ``broker`` was seen registered again after being seen missing within the
    window (None: not seen missing recently, or still missing)."""
    obs = recent(cluster, now=now)
    now = time.monotonic() if now is None else now
    back_at = None
    for prev, cur in zip(obs, obs[1:]):
        if broker not in prev.registered and broker in cur.registered:
            back_at = cur.at
        elif broker not in cur.registered:
            back_at = None
    return None if back_at is None else now - back_at


def dropouts(cluster: str, broker: int, now: float | None = None) -> int:
    """How many times ``broker`` went from registered and in sync to missing or out of the ISRs, in
    the window: one stall is one, a flapping broker many."""
    obs = recent(cluster, now=now)
    count = 0
    for prev, cur in zip(obs, obs[1:]):
        was_ok = broker in prev.registered and broker not in prev.out_of_isr
        now_bad = broker not in cur.registered or broker in cur.out_of_isr
        count += int(was_ok and now_bad)
    return count


def urp_trend(cluster: str, now: float | None = None) -> tuple[int, int] | None:
    """(the highest URP count in the window, the latest), when the memory has two readings."""
    obs = recent(cluster, now=now)
    if len(obs) < 2:
        return None
    return max(o.urp for o in obs), obs[-1].urp


STUCK_AFTER_S = 120.0  # URP watched this long without falling below its peak is not a recovery


def stuck(cluster: str, now: float | None = None) -> bool:
    """The memory has watched URP for STUCK_AFTER_S or more and it never fell below its first
    reading in that time: whatever holds the replicas back, it is not catching up."""
    obs = recent(cluster, now=now)
    if len(obs) < 2 or obs[-1].at - obs[0].at < STUCK_AFTER_S:
        return False
    return obs[-1].urp > 0 and min(o.urp for o in obs) >= obs[0].urp


def warn_churn(cluster: str, seen: Observation) -> None:
    """Mark a remembered reading as one `why URP` warned about ISR churn on."""
    ring = _RINGS.get(cluster)
    for i, o in enumerate(ring or ()):
        if o is seen and ring is not None:
            ring[i] = dataclasses.replace(o, churn_warned=True)
            return


CHURN_MEMORY_S = 180.0  # how long `status` keeps a churn warning in view while every ISR is full


def churn_warned(cluster: str, now: float | None = None) -> tuple[frozenset[int], float] | None:
    """(the brokers named, seconds ago) when the latest reading of the ISR meters, within
    CHURN_MEMORY_S, was answered with a churn warning; None when it was not, or a later reading of
    the meters found no churn. A broker that stalls again and again is in sync between stalls, and
    `status` must not read that moment as health."""
    now = time.monotonic() if now is None else now
    latest = next((o for o in reversed(recent(cluster, CHURN_MEMORY_S, now)) if o.rejoins is not None), None)
    if latest is None or not latest.churn_warned:
        return None
    return latest.churning, now - latest.at


def forget(cluster: str | None = None) -> None:
    """Drop the memory (of one cluster, or all): for tests and a reconfigured cluster."""
    if cluster is None:
        _RINGS.clear()
    else:
        _RINGS.pop(cluster, None)
