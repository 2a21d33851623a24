"""`why URP`'s ISR churn read against what the bot remembers (diagnosis/observations.py): which
brokers came back recently, how many times the churning broker dropped out (counted between two
readings where it can be), whether a restart or the cluster's own start explains the rejoins, and
what to do first when it does not. diagnosis/isr_churn.py reads the meters; this module weighs them
against time."""

from __future__ import annotations

from diagnosis import isr_churn, observations
from diagnosis.entry_ids import GC_PAUSES
from diagnosis.findings import Undecided
from diagnosis.snapshot import Snapshot
from framework.reply import Step


def restarted_brokers(cluster: str, snap: Snapshot, started_s_ago: dict[int, float]) -> dict[int, float]:
    """Registered brokers that came back recently: {broker: seconds since}. From the brokers' own
    process start times (their exporters), and the bot's memory of seeing them missing only where
    no start time was read: a broker seen missing and back whose process is old did not restart, it
    stalled (fenced and unfenced), and "Recovered: (re)started" would hide a broker that flaps."""
    out: dict[int, float] = {}
    for b in snap.brokers.registered:
        started = started_s_ago.get(b)
        age = started if started is not None else observations.back_since(cluster, b)
        if age is not None and age < isr_churn.RECENT_START_S:
            out[b] = age
    return out


def dropouts(
    cluster: str, churn: isr_churn.Churn | None, snap: Snapshot, since: observations.RejoinsSince | None
) -> isr_churn.DropOuts | None:
    """How many times the churning broker dropped out: the bot's own readings, the leaders' rejoin
    counters ``since`` the bot's last reading of them, or the one-minute rate
    (isr_churn.count_dropouts). Read before this reading is remembered."""
    if churn is None or churn.finding.broker is None:
        return None
    b = churn.finding.broker
    seen = observations.dropouts(cluster, b) if len(observations.recent(cluster)) > 2 else 0
    counted = (
        isr_churn.Counted(
            since.rejoins,
            since.seconds,
            was_out=b not in since.before.registered or b in since.before.out_of_isr,
            was_churning=b in since.before.churning,
        )
        if since is not None
        else None
    )
    return isr_churn.count_dropouts(churn.finding, snap, seen, counted)


def counted_by_all(churn: isr_churn.Churn | None, since: observations.RejoinsSince | None) -> isr_churn.Counted | None:
    """With no one broker named: every leader's rejoins ``since`` the bot's earlier reading."""
    if churn is None or churn.finding.broker is not None:
        return None
    if since is None:
        return None
    return isr_churn.Counted(since.rejoins, since.seconds, was_out=False, was_churning=bool(since.before.churning))


def stall_or_flap(broker: int | None, flap: bool) -> Undecided:
    """What decides comes first, not the gc-pauses entry's heap tuning and restart: nothing read
    from here shows GC (a stopped process, a frozen VM or a starved cgroup flap the same way). Not
    a counted flap: ask again first, the bot then counts."""
    who = f"broker {broker}" if broker is not None else "the broker"
    find = Step(
        f"Find what stalls {who} before touching its JVM settings or restarting it: its GC log's longest pauses, "
        "whether the process gets stopped (`ps -o stat= -p <pid>` shows T), and its host's swap, CPU steal and "
        "cgroup throttling around each drop-out.",
        command="ps -o stat= -p <pid>",
    )
    again = Step(
        "Ask again in a minute: the bot counts the ISR rejoins between the two readings, so a broker that keeps "
        "dropping out shows up as one, and a single stall does not.",
        command="why URP",
    )
    return Undecided(GC_PAUSES, {}, [find] if flap else [again, find])


# rejoins since the bot saw the broker down, in returns' worth, that are still "came back once"
# (a partition or two rejoining twice while it catches up is not a second drop-out)
RESTART_RETURNS = 1.5
# a restarted broker's replicas rejoin this long after its process started at most (the JVM, the
# log load, registration and catch-up, on a busy machine)
RETURN_LAG_S = 90.0
RATE_SLACK = 1.25  # the one-minute rate's estimate of a return is rough: a quarter over is still it


def _rejoined_since_return(churn: isr_churn.Churn, snap: Snapshot, age_s: float) -> bool:
    """Whether the leaders' one-minute rate holds more rejoins than a return ``age_s`` after the
    process started could leave: replicas rejoined since the restart's return."""
    rate_returns = isr_churn.returns_estimate(churn.finding, snap)
    return rate_returns is not None and rate_returns > RATE_SLACK * isr_churn.one_return_left(age_s - RETURN_LAG_S)


def restart_explains(
    cluster: str,
    churn: isr_churn.Churn,
    returns: isr_churn.DropOuts | None,
    snap: Snapshot,
    restarted: dict[int, float],
    totals: dict[int, float],
) -> bool:
    """Whether the named broker's (re)start explains the rejoins: counted, it came back no more than
    once; on the one-minute rate alone, the rate is no more than one return that long ago leaves
    (the rate falls by e every minute: seen, a broker of a 41 s old lab cluster stopped three times
    since showed 1.6 returns' worth, where its start could leave 0.5)."""
    b = churn.finding.broker
    if returns is None or b is None:
        return True
    if returns.flap:  # counted, or out again right now: more than a restart
        return False
    # Rejoins counted beyond the return, with a one-minute rate too high for a return that old:
    # they came after it (chaos trial 6464:10: the bot saw 103 down, 103 restarted 160 s ago and
    # then flapped for 37 s; the leaders counted 1.4 returns' worth since, read as the return plus
    # a little catching up, but rejoined 1.7 returns' worth a minute, where that restart's return
    # could leave 0.4 at most). With nothing counted beyond it, the rate is older than the reading.
    recent = _rejoined_since_return(churn, snap, restarted.get(b, 0.0))
    if returns.counted:
        # a drop-out counted after the restart is not the restart's return
        extra = returns.in_interval or 0.0
        if extra > 0 and recent:
            return False
        return extra < 0.5 or restarted.get(b, 0.0) <= (returns.interval_s or 0.0)
    since_out = observations.rejoins_since_out(cluster, b, totals)
    if since_out is not None:
        # the bot saw it down; since then its replicas came back about once: that return is the
        # restart's, and whatever else the one-minute rate carries happened before the bot looked
        followed = isr_churn.follows(b, snap)
        if since_out.rejoins > followed and recent:
            return False
        return bool(since_out.rejoins <= RESTART_RETURNS * followed)
    # not counted and no flap: the count is the one-minute rate's estimate
    return returns.count <= isr_churn.one_return_left(restarted.get(b, 0.0))


def cluster_started(
    churn: isr_churn.Churn | None,
    snap: Snapshot,
    started_s_ago: dict[int, float],
    totals: dict[int, float],
    since: observations.RejoinsSince | None,
) -> isr_churn.ClusterStart | None:
    """The cluster's own start, when it explains the rejoins (isr_churn.cluster_start) and the bot
    has counted none ``since`` an earlier reading: rejoins after that reading are not the start's."""
    if churn is None:
        return None
    started = isr_churn.cluster_start(churn.finding, snap, started_s_ago, totals)
    if started is None:
        return None
    return started if since is None or since.rejoins == 0 else None


def cluster_start_verdict(churn: isr_churn.Churn, started: isr_churn.ClusterStart) -> str:
    f = churn.finding
    ages = (
        f"{started.age_s:,.0f} s ago"
        if started.oldest_s - started.age_s < 5
        else f"{started.age_s:,.0f} to {started.oldest_s:,.0f} s ago"
    )
    return (
        f"No partition is under-replicated, and the ISR rejoins are the cluster's own start: every broker's process "
        f"started {ages}, and the leaders have counted {started.rejoins:,.0f} rejoin(s) since, no more than one "
        f"per follower replica ({started.followers:,}): replicas joining their ISRs as the brokers came up. The "
        f"one-minute rate ({isr_churn.per_min(f.rejoins_per_s)} a minute) reads high after a start because a "
        "meter's first 5 s set its rate outright; it falls by two thirds a minute. What decides it: ask again in "
        "a minute; any rejoin after now is not the start's."
    )
