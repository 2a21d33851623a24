"""Consumer groups: reading a group a few times, the facts those reads give, and the likely cause of
its lag ranked from them (consumers stopped, rebalance storm, slow consumers, a hot partition).
Read by `lag`, the digest and the cold-reads check."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import dataclass

from diagnosis import lake_evidence
from diagnosis.entry_ids import HOT_PARTITION, LAG_BEYOND_RETENTION, REBALANCE_STORM, SLOW_CONSUMERS
from framework.reply import Severity
from live.gateway import AdminGateway, GatewayError
from live.model import GroupLag, GroupListing, GroupRead, PartitionLag
from runbook_kb import KnowledgeBase

# One read says where a group is; only reads a little apart say where it is going (lag growing,
# members coming and going). Five reads over two seconds catch a storming group between two
# rebalances and keep the answer well inside Slack's patience.
READS = 5
READ_GAP_S = 0.5
# A storm's rebalances can be a few seconds apart, so two quiet seconds do not rule one out. When
# the reads show only a steady membership with the lag growing (what a slower consumer shows too),
# the watch goes on to STEADY_WATCH_S before naming the consumers' pace, and stops at the first
# rebalance or new member id (a CI run: a storming group read STABLE with the same ids for 2.1 s).
STEADY_WATCH_S = 6.0
LIST_LIMIT = 200  # groups read by `lag` without a group (batched: a few requests per coordinator)
LIST_CONCURRENCY = 8  # reads in flight when a gateway cannot batch them
REBALANCING = frozenset({"PREPARING_REBALANCE", "COMPLETING_REBALANCE", "ASSIGNING", "RECONCILING"})
NO_MEMBERS = frozenset({"EMPTY", "DEAD"})
CONCENTRATED = 0.5  # one partition holding this share of a group's lag points at that partition

# the KB alerts whose thresholds set the severity of a lagging / rebalancing group
LAG_ALERT, REBALANCE_ALERT = "records-lag-max", "rebalance-rate-per-hour"

# the id a runbook entry for "consumers stopped / no members" would have; the KB has none yet, so
# the answer leads with Burrow's STOP verdict instead (see rank)
STOPPED_ENTRY = "consumers-stopped"


@dataclass(frozen=True)
class GroupFacts:
    """What the live reads (and the lake) showed about one group; the input of :func:`rank`."""

    group: str
    states: tuple[str, ...]  # the group state at each read, oldest first
    members: tuple[frozenset[str] | None, ...]  # member ids at each read; None: not known
    lags: tuple[int, ...]  # total lag at each read
    committed_moved: bool  # a committed offset changed between the first and the last read
    seconds: float  # from the first read to the last
    partitions: int = 0
    lagging_partitions: int = 0
    worst_partition: str | None = None  # "topic-p" holding the most lag
    worst_share: float = 0.0  # its share of the total lag
    now: float = 0.0  # epoch seconds of the last read
    lake_status: str | None = None  # Burrow's group status over the lake window: OK, WARN, ERR
    lake_worst: str | None = None  # the worst partition status: STOP, STALL, REWIND ...
    lake_last_commit: float | None = None  # epoch seconds of the last commit the lake saw
    deleted_unread: int = 0  # records below the log start the group had not read (retention deleted them)
    deleted_partitions: tuple[str, ...] = ()  # "topic-p" where that happened
    # of the records written while watched, the share that went to worst_partition (None: too few
    # written to tell): a hot partition is a producer's skew, so its lag comes with its writes
    worst_write_share: float | None = None
    unreached: int = 0  # partitions holding records on which the group has no committed offset


@dataclass(frozen=True)
class LagSignals:
    """Severity and runbook entries of the KB's alerts for a lagging and a rebalancing group."""

    lag_severity: Severity = "warning"
    lag_entries: tuple[str, ...] = (REBALANCE_STORM,)
    rebalance_severity: Severity = "warning"
    rebalance_entries: tuple[str, ...] = (REBALANCE_STORM,)
    stopped_entry: str | None = None  # a runbook entry for stopped consumers, once the KB has one


@dataclass(frozen=True)
class Cause:
    key: str  # consumers-stopped, slow-consumer, or a runbook entry id
    entry_id: str | None  # the runbook entry covering it, None when the KB has none
    title: str
    reason: str
    considered: bool = False  # kept in view, but the evidence ranks it below the others


@dataclass(frozen=True)
class Ranking:
    status: str  # STOP, REBALANCING, WARN / STALL (lag growing), BEHIND (lag, not growing), OK
    severity: Severity
    verdict: str
    causes: tuple[Cause, ...]
    lag: int
    change: int  # lag at the last read minus lag at the first


def signals_from_kb(kb: KnowledgeBase | None) -> LagSignals:
    """The KB's records-lag-max and rebalance-rate-per-hour alerts (defaults if the KB lacks them)."""
    signals = kb.reference.get("signals") if kb is not None else None
    found: dict[str, tuple[Severity, tuple[str, ...]]] = {}
    for alert in getattr(signals, "alerts", None) or []:
        if alert.metric in (LAG_ALERT, REBALANCE_ALERT) and alert.metric not in found:
            found[alert.metric] = (alert.severity, tuple(alert.runbook))
    d = LagSignals()
    lag = found.get(LAG_ALERT, (d.lag_severity, d.lag_entries))
    reb = found.get(REBALANCE_ALERT, (d.rebalance_severity, d.rebalance_entries))
    stopped = STOPPED_ENTRY if kb is not None and STOPPED_ENTRY in kb.failure_modes else None
    return LagSignals(lag[0], lag[1] or d.lag_entries, reb[0], reb[1] or d.rebalance_entries, stopped)


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _utc(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.timezone.utc):%H:%M:%S} UTC"


def last_commit_text(f: GroupFacts) -> str:
    """Since when nothing was committed, as far as the evidence tells."""
    if f.lake_last_commit is not None:
        return f"last commit seen {_utc(f.lake_last_commit)} ({_ago(f.now - f.lake_last_commit)}, metric lake)"
    if not f.committed_moved:
        return f"no commit during the {f.seconds:.1f} s watched; the time of the last commit needs the metric lake"
    return "offsets were committed while watched"


def trend_text(change: int, seconds: float) -> str:
    if change > 0:
        return f"+{change:,} in {seconds:.1f} s"
    return f"{change:,} in {seconds:.1f} s" if change < 0 else f"unchanged over {seconds:.1f} s"


def rank(f: GroupFacts, sig: LagSignals = LagSignals()) -> Ranking:
    """The likely causes of a group's lag, best first, from what the reads showed. Pure.
    Records retention deleted before the group read them lead whatever else holds the group: that
    data is lost, and the lag figure counts records nobody can read any more."""
    ranking = _rank_lag(f, sig)
    if not f.deleted_unread:
        return ranking
    where = ", ".join(f.deleted_partitions[:4]) + (" ..." if len(f.deleted_partitions) > 4 else "")
    reason = (
        f"committed offsets below the log start on {len(f.deleted_partitions)} partition(s) ({where}): "
        f"{f.deleted_unread:,} records deleted by retention before the group read them"
    )
    lost = Cause(LAG_BEYOND_RETENTION, LAG_BEYOND_RETENTION, "Consumer lag beyond retention", reason)
    readable = max(0, ranking.lag - f.deleted_unread)
    verdict = (
        f"Group {f.group}: {f.deleted_unread:,} of its {ranking.lag:,} records of lag were deleted by retention "
        f"before it read them (data lost, on {where}); {readable:,} are still on the log. " + ranking.verdict
    )
    return Ranking(ranking.status, "critical", verdict, (lost, *ranking.causes), ranking.lag, ranking.change)


def _rank_lag(f: GroupFacts, sig: LagSignals) -> Ranking:
    lag, first = f.lags[-1], f.lags[0]
    change = lag - first
    growing = len(f.lags) > 1 and change > 0
    known = [m for m in f.members if m is not None]
    no_members = all(s in NO_MEMBERS for s in f.states) and not any(known)
    churn = len(set(known)) > 1 and any(known)
    rebalancing = sum(s in REBALANCING for s in f.states)
    reads = len(f.states)
    trend = trend_text(change, f.seconds)
    others = [e for e in sig.lag_entries if e != REBALANCE_STORM]

    if no_members and lag > 0:
        reason = (
            f"state {f.states[-1]} with 0 members in all {reads} read(s); lag {lag:,} ({trend}); {last_commit_text(f)}"
        )
        causes = [
            Cause("consumers-stopped", sig.stopped_entry, "Consumers stopped / no members", reason),
            Cause(
                REBALANCE_STORM,
                REBALANCE_STORM,
                "Consumer rebalance storm",
                "ranks lower because the group has no members: nothing is rebalancing",
                considered=True,
            ),
        ]
        verdict = (
            f"Group {f.group} has no members and is {lag:,} records behind"
            + (f", growing ({trend})" if growing else "")
            + f": its consumers stopped (Burrow: STOP). Nothing consumes it; {last_commit_text(f)}."
        )
        # growing lag is the KB's records-lag-max alert; the lake's Burrow ERR over a whole window
        # (STOP on its partitions) raises the answer to critical in run()
        return Ranking("STOP", sig.lag_severity if growing else "warning", verdict, tuple(causes), lag, change)

    if rebalancing or churn:
        seen = []
        if rebalancing:
            states = sorted({s for s in f.states if s in REBALANCING})
            seen.append(f"state {'/'.join(states)} in {rebalancing} of {reads} read(s)")
        if churn:
            ids = set().union(*known)
            seen.append(f"{len(ids)} different member ids in {f.seconds:.1f} s (members joining and leaving)")
        reason = "; ".join(seen) + f"; lag {lag:,} ({trend})"
        causes = [Cause(REBALANCE_STORM, REBALANCE_STORM, "Consumer rebalance storm", reason)]
        causes += [
            Cause(
                e,
                e,
                e,
                "ranks lower: the group is busy rebalancing, which stops consumption on every partition",
                considered=True,
            )
            for e in others
        ]
        storm = churn or rebalancing > 1
        severity: Severity = sig.rebalance_severity if (lag > 0 or storm) else "info"
        verdict = f"Group {f.group} is rebalancing{' again and again' if storm else ''} ({'; '.join(seen)})" + (
            f" and is {lag:,} records behind ({trend})." if lag else ", though it is caught up now."
        )
        return Ranking("REBALANCING", severity, verdict, tuple(causes), lag, change)

    if lag == 0 and not (f.unreached and any(known)):  # partitions it never committed on are not caught up
        who = "no members and nothing to consume" if no_members else f"{len(known[-1]) if known else '?'} member(s)"
        return Ranking("OK", "ok", f"Group {f.group} is caught up ({who}).", (), 0, change)

    members = len(known[-1]) if known else None
    stable = f"state {f.states[-1]}" + (f" with {members} member(s) in every read" if members is not None else "")
    # the lake's window outlasts a few seconds of reads: its WARN (lag never went down between
    # commits) or STALL (offsets not moving) says the same as lag growing now
    window = f.lake_worst if f.lake_worst in ("WARN", "STALL") else None
    slow = growing or window is not None
    watched = trend + (f"; metric lake over its window: {window}" if window else "")
    causes = []
    # the lag on one partition is a hot partition's only when that partition also takes the writes:
    # a consumer slower than an even producer, asked in its first seconds, leaves uneven lag too
    # (chaos trial 2911:0: 4 records/s read of 40 written over 3 partitions, "hot partition")
    writes_even = f.worst_write_share is not None and f.worst_write_share < CONCENTRATED
    concentrated = HOT_PARTITION in others and f.partitions > 1 and f.worst_share >= CONCENTRATED and not writes_even
    # A lag that is not growing is the records in flight: its skew is worth a look, but it does not
    # make the key's design the thing to fix now (the "Do now" of a ranked cause)
    if concentrated:
        causes.append(
            Cause(
                HOT_PARTITION,
                HOT_PARTITION,
                HOT_PARTITION,
                f"{f.worst_share:.0%} of the lag is on {f.worst_partition}"
                + ("" if slow else ", but the lag is not growing: watch the key's skew, nothing to change now"),
                considered=not slow,
            )
        )
    if slow:
        moved = "committed offsets moved" if f.committed_moved else "committed offsets did not move"
        spread = f" on {f.lagging_partitions} of {f.partitions} partition(s)" if f.partitions > 1 else ""
        causes.append(
            Cause(
                SLOW_CONSUMERS,
                SLOW_CONSUMERS,
                "Consumers slower than producers",
                f"{stable}; lag {lag:,}{spread} ({watched}) while {moved}",
            )
        )
    for e in others:
        if concentrated and e == HOT_PARTITION:
            continue
        if e == HOT_PARTITION and f.partitions > 1:
            # lag spread over the partitions, or writes that are, is no hot partition: its steps (and
            # its "do not add consumers") would point away from the cause
            why = (
                f"the writes are spread over the partitions ({f.worst_partition} took {f.worst_write_share:.0%} of "
                f"those written while watched, though it holds {f.worst_share:.0%} of the lag)"
                if writes_even and f.worst_write_share is not None and f.worst_share >= CONCENTRATED
                else f"the lag is spread over the partitions (the largest holds {f.worst_share:.0%})"
            )
            causes.append(Cause(e, e, e, f"ranks lower: {why}", considered=True))
            continue
        causes.append(
            Cause(
                e,
                e,
                e,
                f"named by the KB's {LAG_ALERT} alert" + ("" if slow else "; the lag is not growing"),
                considered=not slow,
            )
        )
    causes.append(
        Cause(
            REBALANCE_STORM,
            REBALANCE_STORM,
            "Consumer rebalance storm",
            f"ranks lower: {stable}, no rebalance seen in {f.seconds:.1f} s (rebalances minutes apart show only "
            f"in the clients' {REBALANCE_ALERT})",
            considered=True,
        )
    )
    if slow:
        verdict = (
            f"Group {f.group} is {lag:,} records behind and {'growing' if growing else 'not catching up'} "
            f"({watched}) with its members "
            f"consuming: the consumers are slower than the producers (Burrow: {window or 'WARN'})."
        )
        return Ranking(window or "WARN", sig.lag_severity, verdict, tuple(causes), lag, change)
    verdict = (
        f"Group {f.group} is {lag:,} records behind on {f.lagging_partitions} partition(s), not growing ({trend})."
    )
    if f.unreached and any(known):
        # a member with no commit on partitions that hold records has not reached them (or reads
        # from the latest offset); their records are not in the lag above (chaos trial 2911:47: a
        # consumer reading 4 records/s beside a paused broker that held its producer still)
        verdict += (
            f" Its member(s) have no committed offset on {f.unreached} partition(s) that hold records, which that "
            "figure leaves out: a consumer slower than its producers has not reached them yet (or it reads from "
            "the latest offset). What decides it: ask again in a minute, or the metric lake's window."
        )
        reach = Cause(
            SLOW_CONSUMERS,
            SLOW_CONSUMERS,
            "Consumers slower than producers",
            f"{stable}; no committed offset on {f.unreached} partition(s) holding records; lag {lag:,} ({trend})",
        )
        causes = [reach, *(c for c in causes if c.key != SLOW_CONSUMERS)]
    return Ranking("BEHIND", "info", verdict, tuple(causes), lag, change)


def facts_from_reads(
    group: str, reads: list[tuple[GroupRead, bool]], lake: lake_evidence.LakeFindings | None = None
) -> GroupFacts:
    """GroupFacts from live reads (oldest first; the flag says whether members were read) and the
    lake's findings on the group (``lake_evidence.GroupLagFindings`` or None)."""
    last = reads[-1][0].lag
    total = last.total_lag
    worst = max(last.partitions, key=lambda p: p.lag or 0, default=None)
    first_committed = {(p.topic, p.partition): p.committed for p in reads[0][0].lag.partitions}
    moved = any(first_committed.get((p.topic, p.partition)) != p.committed for p in last.partitions)
    deleted = [p for p in last.partitions if p.deleted_unread]
    unreached = sum(1 for p in last.partitions if p.committed is None and (p.log_end or 0) > (p.log_start or 0))
    return GroupFacts(
        unreached=unreached,
        worst_write_share=_write_share(reads[0][0].lag, last, worst),
        group=group,
        states=tuple(r.lag.state for r, _ in reads),
        members=tuple(r.member_ids if known else None for r, known in reads),
        lags=tuple(r.lag.total_lag for r, _ in reads),
        committed_moved=moved,
        seconds=reads[-1][0].read_at - reads[0][0].read_at,
        partitions=len(last.partitions),
        lagging_partitions=sum(1 for p in last.partitions if (p.lag or 0) > 0),
        worst_partition=f"{worst.topic}-{worst.partition}" if worst is not None and worst.lag else None,
        worst_share=(worst.lag or 0) / total if worst is not None and total else 0.0,
        now=reads[-1][0].read_at,
        lake_status=getattr(lake, "status", None),
        lake_worst=getattr(lake, "worst_status", None),
        lake_last_commit=getattr(lake, "last_commit", None),
        deleted_unread=sum(p.deleted_unread for p in deleted),
        deleted_partitions=tuple(f"{p.topic}-{p.partition}" for p in sorted(deleted, key=lambda p: -p.deleted_unread)),
    )


# fewer records written while watched say nothing about how the producers spread them
MIN_WRITTEN = 20


def _write_share(first: GroupLag, last: GroupLag, worst: PartitionLag | None) -> float | None:
    """The share of the records written between two reads that went to ``worst``'s partition."""
    if worst is None:
        return None
    before = {(p.topic, p.partition): p.log_end for p in first.partitions}
    written: dict[tuple[str, int], int] = {}
    for p in last.partitions:
        was = before.get((p.topic, p.partition))
        if p.log_end is not None and was is not None:
            written[(p.topic, p.partition)] = max(0, p.log_end - was)
    total = sum(written.values())
    if total < MIN_WRITTEN or (worst.topic, worst.partition) not in written:
        return None
    return written[(worst.topic, worst.partition)] / total


async def read_group(gw: AdminGateway, group: str) -> tuple[GroupRead, bool]:
    """One read of a group; the flag is False when the gateway gives lag only (no members)."""
    read = getattr(gw, "consumer_group_read", None)
    if read is None:
        lag: GroupLag = await gw.consumer_group_lag(group)
        return GroupRead(lag, [], "", "", time.time()), False
    return await read(group), True


def _steady_and_growing(reads: list[tuple[GroupRead, bool]]) -> bool:
    """Members read in every read, one unchanged member set, no rebalance state, lag growing: a
    slower consumer or a storm between two rebalances, which only a longer watch tells apart."""
    if not all(with_members for _, with_members in reads):
        return False
    ids = {r.member_ids for r, _ in reads}
    states = {r.lag.state for r, _ in reads}
    return (
        len(ids) == 1
        and next(iter(ids)) != frozenset()
        and not (states & (REBALANCING | NO_MEMBERS))
        and reads[-1][0].lag.total_lag > reads[0][0].lag.total_lag
    )


async def watch_group(
    gw: AdminGateway,
    group: str,
    reads: int = READS,
    gap_s: float = READ_GAP_S,
    steady_watch_s: float = STEADY_WATCH_S,
) -> list[tuple[GroupRead, bool]]:
    """``reads`` reads ``gap_s`` apart, continued up to ``steady_watch_s`` while they show only a
    steady membership with the lag growing. The first read's error is the answer; a later failure
    (the coordinator moving mid-watch) ends the watch with the reads made so far."""
    started = time.monotonic()
    out = [await read_group(gw, group)]
    while len(out) < reads or (time.monotonic() - started + gap_s <= steady_watch_s and _steady_and_growing(out)):
        await asyncio.sleep(gap_s)
        try:
            out.append(await read_group(gw, group))
        except GatewayError:
            break
    return out


@dataclass
class GroupSummary:
    """One group in a listing: its lag now, or why it could not be read."""

    group: str
    state: str
    coordinator: int | None = None
    protocol_type: str = ""
    members: int | None = None
    total_lag: int | None = None
    lagging_partitions: int = 0
    partitions: int = 0
    error: str | None = None
    deleted_unread: int = 0  # records retention deleted before the group read them

    @property
    def lagging(self) -> bool:
        return bool(self.total_lag)

    def as_dict(self) -> dict[str, str | int | None]:
        return dict(self.__dict__)


def _read_order(g: GroupListing) -> tuple[int, str]:
    # under a cap, read first the groups an incident is most likely about
    rank = 0 if g.state in REBALANCING else 1 if g.state in NO_MEMBERS else 2 if g.state == "STABLE" else 3
    return rank, g.group_id


async def read_groups(gw: AdminGateway, names: list[str]) -> dict[str, tuple[GroupRead, bool] | GatewayError]:
    """One read of each group: batched per coordinator when the gateway can, else one by one."""
    batch = getattr(gw, "consumer_groups_read", None)
    if batch is not None:
        return {g: r if isinstance(r, GatewayError) else (r, True) for g, r in (await batch(names)).items()}
    gate = asyncio.Semaphore(LIST_CONCURRENCY)

    async def one(g: str) -> tuple[GroupRead, bool] | GatewayError:
        async with gate:
            try:
                return await read_group(gw, g)
            except GatewayError as exc:
                return exc

    return dict(zip(names, await asyncio.gather(*(one(g) for g in names))))


async def summarize_groups(
    gw: AdminGateway, listings: Iterable[GroupListing], limit: int
) -> tuple[list[GroupSummary], int]:
    """Read the lag of up to ``limit`` of the listed groups (consumer groups and offsets-only ones;
    Connect and other protocols have no offsets to lag on). Returns the summaries, lagging
    first (most lag first), and how many groups were not read because of the cap."""
    wanted = sorted((g for g in listings if g.protocol_type in ("consumer", "")), key=_read_order)
    chosen, skipped = wanted[:limit], max(0, len(wanted) - limit)
    reads = await read_groups(gw, [g.group_id for g in chosen]) if chosen else {}
    out = []
    for g in chosen:
        s = GroupSummary(g.group_id, g.state, g.coordinator, g.protocol_type)
        r = reads.get(g.group_id)
        if isinstance(r, GatewayError) or r is None:
            s.error = str(r) if r is not None else "not read"
        else:
            read, known = r
            s.state = read.lag.state
            s.members = len(read.members) if known else None
            s.total_lag = read.lag.total_lag
            s.partitions = len(read.lag.partitions)
            s.lagging_partitions = sum(1 for p in read.lag.partitions if (p.lag or 0) > 0)
            s.deleted_unread = read.lag.deleted_unread
        out.append(s)
    out.sort(key=lambda s: (not s.lagging, -(s.total_lag or 0), s.group))
    return out, skipped


def summary_line(s: GroupSummary) -> str:
    if s.error:
        return f"{s.group}: could not read ({s.error})"
    who = f", {s.members} member(s)" if s.members is not None else ""
    if not s.lagging:
        return f"{s.group} ({s.state}{who}): caught up"
    text = f"{s.group} ({s.state}{who}): {s.total_lag:,} behind on {s.lagging_partitions} partition(s)"
    if s.deleted_unread:
        text += f", {s.deleted_unread:,} of them deleted by retention before it read them (data lost)"
    if s.state in NO_MEMBERS:
        text += ": no members, nobody is consuming"
    elif s.state in REBALANCING:
        text += ": rebalancing"
    return text


def summary_severity(s: GroupSummary) -> Severity:
    if s.error:
        return "error"
    if not s.lagging:
        return "ok"
    if s.deleted_unread:
        return "critical"
    return "warning" if s.state in NO_MEMBERS or s.state in REBALANCING else "info"
