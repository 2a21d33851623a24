"""Live checks that need more than the admin API: the exporters' current metrics and the brokers'
log directories. Thresholds come from the runbook's alert table (reference/signals.yaml), so the
bot pages on the same numbers the runbook tells people to alert on.

- handler saturation: RequestHandlerAvgIdlePercent per broker (plus the network threads' idle);
- fetch-session eviction: IncrementalFetchSessionEvictionsPerSec and the cache's fill level;
- hot partition: per-partition write rate from two end-offset reads, against its topic's median;
- full disk: every log directory's usable bytes (DescribeLogDirs), and directories that failed.
"""

from __future__ import annotations

import asyncio
import math
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from diagnosis import exporter_reads
from diagnosis.entry_ids import (
    FETCH_SESSION_EVICTION,
    FULL_DISK,
    HANDLER_SATURATION,
    HOT_PARTITION,
    LOG_DIR_FAILURE,
    UNCLEAN_ELECTION,
)
from diagnosis.findings import LiveFindings
from diagnosis.offline_checks import check_offline
from diagnosis.rules import PartitionState
from diagnosis.snapshot import Snapshot, broker_list, config_value, name_partitions, snapshot
from diagnosis.thresholds import HANDLER_IDLE_ALERT, alert_bounds, hot_rule
from framework import sources
from framework.reply import Action, Evidence, Severity
from live import exporters
from live.gateway import AdminGateway, GatewayError
from live.model import PartitionOffsets

RATE_GAP_S = 1.0  # between the two end-offset reads of the hot-partition check


def _breaches(value: float, bound: tuple[str, float]) -> bool:
    op, limit = bound
    return {"<": value < limit, "<=": value <= limit, ">": value > limit, ">=": value >= limit}[op]


def classify(value: float, bounds: dict[str, tuple[str, float]]) -> Severity:
    for severity in ("critical", "warning"):
        if severity in bounds and _breaches(value, bounds[severity]):
            return severity
    return "ok"


def _worst(severities: Iterable[Severity]) -> Severity:
    order = {"ok": 0, "info": 0, "warning": 1, "critical": 2}
    return max(severities, key=lambda s: order[s], default="ok")


def exporter_urls(gw: AdminGateway) -> dict[int, str]:
    urls = gw.config.metrics_urls
    if not urls:
        sources.record("exporters", "not configured", detail="no metrics endpoints for this cluster")
        raise GatewayError(
            f"no metrics endpoints are configured for cluster {gw.name!r} "
            "(set KBOT_METRICS_TARGETS=<node id>=<url>,...)",
            gw.name,
        )
    return urls


def failed_evidence(reading: exporters.Reading, busy: exporter_reads.HostBusy | None = None) -> list[Evidence]:
    out = [
        Evidence(f"Node {n} exporter", why, "live: JMX exporter", "bad") for n, why in sorted(reading.failed.items())
    ]
    if busy is not None:
        out.append(Evidence("The bot's host", busy.sentence(), "live: host load + event loop", "bad"))
    return out


async def broker_nodes(gw: AdminGateway) -> set[int] | None:
    """The exporter nodes that are brokers: registered or expected brokers, and any configured node
    that is not a controller voter (a broker that is down is still one). None when neither read
    answered: then every node is read, and controllers are named as nodes."""
    cluster, quorum = await asyncio.gather(gw.describe_cluster(), gw.metadata_quorum(), return_exceptions=True)
    if isinstance(cluster, BaseException) and isinstance(quorum, BaseException):
        return None
    out: set[int] = set()
    if not isinstance(cluster, BaseException):
        out |= set(cluster.broker_ids) | set(cluster.expected_brokers)
    if not isinstance(quorum, BaseException):
        voters = {v.id for v in quorum.voters}
        out |= {n for n in gw.config.metrics_urls if n not in voters}
    return out


async def read_exporters(
    gw: AdminGateway, names: frozenset[str], nodes: set[int] | None = None
) -> exporter_reads.NodeReading:
    """Every configured exporter (or those of ``nodes``) read under one deadline, each read recorded
    as an evidence source (diagnosis/exporter_reads.py)."""
    urls = exporter_urls(gw)
    if nodes is not None:
        urls = {n: u for n, u in urls.items() if n in nodes} or urls
    return await exporter_reads.read_nodes(urls, names)


# ---- handler saturation ---------------------------------------------------------------------------

HANDLER_IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
NETWORK_IDLE = "kafka_network_socketserver_networkprocessoravgidlepercent"
QUEUE_TIME = "kafka_network_requestmetrics_requestqueuetimems"


async def check_handler_saturation(gw: AdminGateway) -> LiveFindings:
    # the brokers' handlers: a KRaft controller has a request-handler pool too, and its idle time
    # says nothing of the produce and fetch path
    brokers = await broker_nodes(gw)
    read = await read_exporters(gw, frozenset({HANDLER_IDLE, NETWORK_IDLE, QUEUE_TIME}), brokers)
    reading = read.reading
    bounds = alert_bounds(HANDLER_IDLE_ALERT)
    net_bounds = alert_bounds("NetworkProcessorAvgIdlePercent")
    evidence: list[Evidence] = []
    busy: list[tuple[int, float, Severity]] = []
    for s in sorted(reading.named(HANDLER_IDLE), key=lambda s: s.value):
        sev = classify(s.value, bounds)
        queue = [
            q
            for q in reading.named(QUEUE_TIME)
            if q.node == s.node and q.label("request") == "Produce" and q.label("quantile") == "0.99"
        ]
        extra = f"; Produce RequestQueueTimeMs p99 {queue[0].value:,.0f} ms" if queue else ""
        evidence.append(
            Evidence(
                f"Broker {s.node} request handlers idle",
                f"{s.value:.0%}{extra}",
                "live: JMX exporter (one-minute rate)",
                "bad" if sev != "ok" else "ok",
            )
        )
        if sev != "ok":
            busy.append((s.node, s.value, sev))
    for s in reading.named(NETWORK_IDLE):
        if classify(s.value, net_bounds) != "ok":
            evidence.append(
                Evidence(f"Broker {s.node} network threads idle", f"{s.value:.0%}", "live: JMX exporter", "bad")
            )
    evidence += failed_evidence(reading, read.host_busy)
    if not busy:
        if not reading.named(HANDLER_IDLE):
            return LiveFindings("No broker's request-handler idle time could be read.", "warning", evidence)
        return LiveFindings(
            "The request handlers have idle time on every broker: they are not saturated.", "ok", evidence
        )
    worst = busy[0]
    severity = _worst(sev for _b, _v, sev in busy)
    limit = bounds.get(worst[2], ("<", 0.0))[1]
    verdict = (
        f"Broker {broker_list(b for b, _v, _s in busy)}: request handler threads are saturated "
        f"(idle {worst[1]:.0%} on broker {worst[0]}, alert below {limit:.0%}): requests queue before any work starts. "
        "Find what the handlers are busy with (request rates per type, TotalTimeMs split) before adding threads."
    )
    lead = [(HANDLER_SATURATION, f"live: RequestHandlerAvgIdlePercent {worst[1]:.2f} on broker {worst[0]}")]
    return LiveFindings(verdict, severity, evidence, lead, [Action("Cluster status", "status")])


_TYPED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(\s*%)?(?![\w.])")


def echo_typed(symptom: str, live: LiveFindings) -> LiveFindings:
    """The figure the user typed ("RequestHandlerAvgIdlePercent 0.05") set against what was read
    now: a dashboard's number and the brokers' current one can differ, and the answer must say which
    it speaks of."""
    m = _TYPED.search(symptom)
    rows = [e for e in live.evidence if e.label.endswith(" request handlers idle")]
    if m is None or not rows:
        return live
    typed = float(m.group(1)) / (100 if m.group(2) or float(m.group(1)) > 1 else 1)
    now = ", ".join(f"{e.label.split()[1]} {e.value.split(';')[0]}" for e in rows)
    low = [e for e in rows if _percent(e.value) is not None and abs((_percent(e.value) or 0) - typed) <= 0.05]
    said = f"You gave {m.group(0).strip()} ({typed:.0%} idle); the brokers read now: {now}. " + (
        f"Broker {', '.join(e.label.split()[1] for e in low)} is near your figure."
        if low
        else "None is near your figure now: it may be from another time or another broker (your dashboard's "
        "window), and this answer is about now."
    )
    live.evidence.insert(
        0, Evidence("Your figure", said, "your question", "bad" if not low and typed < 0.3 else "neutral")
    )
    return live


def _percent(value: str) -> float | None:
    head = value.split(";")[0].strip().rstrip("%")
    try:
        return float(head) / 100
    except ValueError:
        return None


# ---- fetch-session eviction -----------------------------------------------------------------------

EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictionspersec_oneminuterate"
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
SLOTS_KEY = "max.incremental.fetch.session.cache.slots"


async def check_fetch_sessions(gw: AdminGateway) -> LiveFindings:
    read, configs = await asyncio.gather(
        read_exporters(gw, frozenset({EVICTIONS, SESSIONS})),
        gw.broker_configs(),
        return_exceptions=True,
    )
    if isinstance(read, BaseException):
        raise read
    reading = read.reading
    slots: dict[int, int] = {}
    if not isinstance(configs, BaseException):
        for b, cfg in configs.items():
            v = cfg.get(SLOTS_KEY)
            if v is not None and v.value is not None and v.value.isdigit():
                slots[b] = int(v.value)
    sessions = {s.node: s.value for s in reading.named(SESSIONS)}
    evidence: list[Evidence] = []
    evicting: list[tuple[int, float]] = []
    for s in sorted(reading.named(EVICTIONS), key=lambda s: -s.value):
        cap = slots.get(s.node)
        fill = f"{sessions.get(s.node, 0):,.0f} of {cap:,} slots" if cap else f"{sessions.get(s.node, 0):,.0f} sessions"
        pinned = cap is not None and sessions.get(s.node, 0) >= cap
        bad = s.value > 0 or pinned
        evidence.append(
            Evidence(
                f"Broker {s.node} fetch sessions",
                f"{s.value:,.2f} evictions/s (one-minute rate); cache {fill}" + ("; full" if pinned else ""),
                "live: JMX exporter + broker config",
                "bad" if bad else "ok",
            )
        )
        if bad:
            evicting.append((s.node, s.value))
    evidence += failed_evidence(reading)
    if not evicting:
        return LiveFindings("No broker is evicting incremental fetch sessions.", "ok", evidence)
    node, rate = evicting[0]
    cap = slots.get(node)
    verdict = (
        f"Broker {broker_list(b for b, _r in evicting)} evicts incremental fetch sessions ({rate:,.2f}/s on broker "
        f"{node}{f', cache of {cap:,} slots full' if cap and sessions.get(node, 0) >= cap else ''}): evicted fetchers "
        f"fall back to full fetch requests, which costs CPU and latency. Raise {SLOTS_KEY} or cut the number of fetchers."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [(FETCH_SESSION_EVICTION, f"live: IncrementalFetchSessionEvictionsPerSec {rate:.2f} on broker {node}")],
    )


# ---- hot partition ----------------------------------------------------------------------------------


def partition_rates(
    first: Mapping[tuple[str, int], PartitionOffsets],
    second: Mapping[tuple[str, int], PartitionOffsets],
    seconds: float,
) -> dict[tuple[str, int], float]:
    """Records/s per partition from two reads of the high watermarks ``seconds`` apart."""
    gap = max(1e-3, seconds)
    return {
        k: max(0.0, (second[k].high_watermark - first[k].high_watermark) / gap) for k in first.keys() & second.keys()
    }


def hot_partitions(rates: dict[tuple[str, int], float]) -> list[tuple[tuple[str, int], float, float]]:
    """(partition, rate, topic median) for the hot partitions (the runbook's rule, :func:`hot_rule`):
    written many times faster than the median of their topic (of more than one partition)."""
    rule = hot_rule()
    by_topic: dict[str, list[float]] = defaultdict(list)
    for (topic, _p), r in rates.items():
        by_topic[topic].append(r)
    out = []
    for key, r in rates.items():
        median = statistics.median(by_topic[key[0]])
        # a topic whose median partition is idle: any partition written at all is infinitely skewed
        skew = r / median if median > 0 else math.inf
        if len(by_topic[key[0]]) > 1 and rule.is_hot(r, skew):
            out.append((key, r, median))
    return sorted(out, key=lambda x: -x[1])


def ranked_rates(rates: dict[tuple[str, int], float]) -> list[tuple[tuple[str, int], float, float]]:
    """(partition, rate, topic median) for every partition, fastest first (ties by name)."""
    by_topic: dict[str, list[float]] = defaultdict(list)
    for (topic, _p), r in rates.items():
        by_topic[topic].append(r)
    medians = {t: statistics.median(rs) for t, rs in by_topic.items()}
    return sorted(((k, r, medians[k[0]]) for k, r in rates.items()), key=lambda x: (-x[1], x[0]))


@dataclass(frozen=True)
class LiveRates:
    """Records/s per partition from two end-offset reads ``seconds`` apart, and each one's leader."""

    rates: dict[tuple[str, int], float]
    leaders: dict[tuple[str, int], int]
    seconds: float


#: The clock the two reads are timed with (a test's golden answer gives a fixed interval).
monotonic = time.monotonic


async def read_partition_rates(gw: AdminGateway, topic: str | None = None, gap_s: float | None = None) -> LiveRates:
    """Two ListOffsets reads of every partition with a leader (of ``topic`` only, when given:
    UnknownTopic when the cluster has no such topic), ``gap_s`` apart (default :data:`RATE_GAP_S`):
    the admin API answers in milliseconds where the exporters take a second to render, and needs
    no metrics endpoint."""
    topics = await gw.describe_topics(None if topic is None else [topic])
    leaders = {
        (p.topic, p.partition): p.leader for t in topics if not t.internal for p in t.partitions if p.leader is not None
    }
    first = await gw.stable_offsets(list(leaders))
    t0 = monotonic()
    await asyncio.sleep(RATE_GAP_S if gap_s is None else gap_s)
    second = await gw.stable_offsets(list(leaders))
    took = monotonic() - t0
    return LiveRates(partition_rates(first, second, took), leaders, took)


async def check_hot_partition(gw: AdminGateway, topic: str | None = None) -> LiveFindings:
    """Per-partition write rates from two ListOffsets reads a moment apart (:func:`read_partition_rates`),
    against each topic's median. ``topic``: that topic's partitions only."""
    return hot_partition_findings(await read_partition_rates(gw, topic))


def skew_text(rate: float, median: float, topic_total: float) -> str:
    """How much faster than the rest of its topic a partition is written. A median under one record
    a second is not measured by two end-offset reads a moment apart (seen: 809x printed for a 90/10
    key split, the hot partition's own rate over a median of 0): then its share of the topic's writes."""
    if median >= 1:
        return f"{rate / median:,.0f}x"
    share = rate / topic_total if topic_total > 0 else 1.0
    return f"{share:.1%} of the topic's writes; the rest too slow to measure in this read"


def hot_partition_findings(live: LiveRates) -> LiveFindings:
    """A partition written many times faster than its topic's median (:func:`hot_partitions`), from live rates."""
    rates, leaders, took = live.rates, live.leaders, live.seconds
    hot = hot_partitions(rates)
    totals: dict[str, float] = defaultdict(float)
    for (t, _p), r in rates.items():
        totals[t] += r
    evidence = [
        Evidence(
            f"{t}-{p}",
            f"{r:,.0f} records/s, topic median {m:,.0f} records/s ({skew_text(r, m, totals[t])}), "
            f"leader broker {leaders.get((t, p))}",
            f"live: end offsets over {took:.1f} s",
            "bad",
        )
        for (t, p), r, m in hot[:5]
    ]
    if not hot:
        busiest = sorted(rates.items(), key=lambda kv: -kv[1])[:3]
        evidence += [
            Evidence(f"{t}-{p}", f"{r:,.0f} records/s", f"live: end offsets over {took:.1f} s", "ok")
            for (t, p), r in busiest
            if r > 0
        ]
        return LiveFindings("No partition is written much faster than the rest of its topic right now.", "ok", evidence)
    (topic, part), rate, median = hot[0]
    leader = leaders.get((topic, part))
    verdict = (
        f"{topic}-{part} is hot: {rate:,.0f} records/s against its topic's median {median:,.0f} "
        f"({skew_text(rate, median, totals[topic])})"
        + (f", all of it on leader broker {leader}" if leader is not None else "")
        + ". A skewed key (or a custom partitioner) sends most records to one partition; adding partitions does not "
        "spread a single key."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [
            (
                HOT_PARTITION,
                f"live: {topic}-{part} at {rate:,.0f} records/s, {skew_text(rate, median, totals[topic])} "
                "against its topic median",
            )
        ],
        [Action(f"Describe {topic}", f"describe {topic}")],
    )


# ---- disks ------------------------------------------------------------------------------------------


async def check_disks(gw: AdminGateway) -> LiveFindings:
    dirs = await gw.log_dirs()
    bounds = alert_bounds("disk usage")
    evidence: list[Evidence] = []
    full: list[tuple[int, str, float, Severity]] = []
    failed = [d for d in dirs if d.error]
    for d in dirs:
        if d.error:
            evidence.append(
                Evidence(f"Broker {d.broker} {d.path}", f"failed: {d.error}", "live: describe_log_dirs", "bad")
            )
            continue
        if not d.total_bytes or d.usable_bytes is None or d.total_bytes <= 0:
            continue
        used = 1 - d.usable_bytes / d.total_bytes
        sev = classify(used, bounds)
        evidence.append(
            Evidence(
                f"Broker {d.broker} {d.path}",
                f"{used:.0%} used, {d.usable_bytes / 2**20:,.0f} MiB free of {d.total_bytes / 2**20:,.0f} MiB",
                "live: describe_log_dirs",
                "bad" if sev != "ok" else "ok",
            )
        )
        if sev != "ok":
            full.append((d.broker, d.path, used, sev))
    registered = set((await gw.describe_cluster()).broker_ids)
    seen = {d.broker for d in dirs}
    silent = sorted(registered - seen)
    if silent:
        evidence.append(
            Evidence("Log dirs not reported", f"broker {broker_list(silent)}", "live: describe_log_dirs", "bad")
        )
    lead: list[tuple[str, str]] = []
    if full:
        full.sort(key=lambda x: -x[2])
        b, path, used, _sev = full[0]
        lead.append((FULL_DISK, f"live: {path} on broker {b} is {used:.0%} full"))
    if failed:
        lead.append(
            (LOG_DIR_FAILURE, f"live: {failed[0].path} on broker {failed[0].broker} failed ({failed[0].error})")
        )
    if not lead:
        return LiveFindings("Every log directory has room and none has failed.", "ok", evidence)
    if full:
        b, path, used, sev = full[0]
        verdict = (
            f"Broker {b}'s log directory {path} is {used:.0%} full: when it fills, the broker takes the directory "
            "offline (and stops if it was its last one). Free space now: shorten retention or delete data of "
            "topics you can lose; do not delete segment files by hand."
        )
        severity: Severity = "critical" if failed else sev
    else:
        d = failed[0]
        verdict = (
            f"Broker {d.broker}'s log directory {d.path} has failed ({d.error}): its replicas there are offline on "
            "that broker, which keeps serving from its other directories."
        )
        severity = "critical"
    return LiveFindings(verdict, severity, evidence, lead, [Action("Why URP", "why URP")])


# ---- unclean leader elections -----------------------------------------------------------------------

UNCLEAN_TOTAL = "kafka_controller_controllerstats_uncleanleaderelectionspersec_total"
UNCLEAN_RATE = "kafka_controller_controllerstats_uncleanleaderelectionspersec_oneminuterate"
STARTED = exporters.PROCESS_STARTED
# One election lifts the exporter's one-minute rate to ~1/60 per second at its next 5 s tick,
# decaying over minutes: above this, an election happened in roughly the last five minutes.
RECENT_UNCLEAN_RATE = 1e-3


@dataclass
class UncleanCount:
    total: float = 0.0  # elections since the controller started (the meter's count)
    recent: bool = False
    started_at: float | None = None  # the controller's process start, epoch seconds
    evidence: list[Evidence] = field(default_factory=list)


async def unclean_elections(gw: AdminGateway) -> UncleanCount:
    """The controllers' own count of unclean elections (exporter), and since when it counts."""
    reading = (await read_exporters(gw, frozenset({UNCLEAN_TOTAL, UNCLEAN_RATE, STARTED}))).reading
    rates = {s.node: s.value for s in reading.named(UNCLEAN_RATE)}
    starts = {s.node: s.value for s in reading.named(STARTED)}
    out = UncleanCount()
    for s in reading.named(UNCLEAN_TOTAL):
        recent = rates.get(s.node, 0.0) >= RECENT_UNCLEAN_RATE
        since = starts.get(s.node)
        when = (
            f" since it started at {time.strftime('%H:%M UTC %d %b', time.gmtime(since))}"
            if since
            else " since it started"
        )
        out.evidence.append(
            Evidence(
                f"Controller {s.node} unclean elections",
                f"{s.value:,.0f}{when}" + ("; one or more in the last few minutes" if recent else ""),
                "live: JMX exporter (UncleanLeaderElectionsPerSec)",
                "bad" if s.value > 0 else "ok",
            )
        )
        if s.value > out.total:
            out.total, out.started_at = s.value, since
        out.recent = out.recent or recent
    return out


def unclean_candidates(snap: Snapshot) -> list[PartitionState]:
    """Partitions of topics that allow unclean elections and whose ISR lost replicas: where an
    out-of-sync leader may have been elected (the replicas that held the lost records are still
    out of sync, or down)."""
    allowed = {t for t, cfg in snap.configs.items() if config_value(cfg, "unclean.leader.election.enable") == "true"}
    return [p for p in snap.states if p.topic in allowed and (not p.has_leader or len(p.isr) < len(p.replicas))]


async def check_unclean(gw: AdminGateway) -> LiveFindings:
    """The controllers' count of unclean elections (it only grows while a controller runs, so any
    count is an election that happened) with the partitions where it most likely happened, plus
    what check_offline sees. An unclean election loses acknowledged records: critical."""

    offline, counted, snap = await asyncio.gather(
        check_offline(gw), unclean_elections(gw), snapshot(gw, min_isr="all"), return_exceptions=True
    )
    if isinstance(offline, BaseException):
        raise offline
    if isinstance(counted, BaseException):
        offline.notes.append(f"Unclean elections not counted: {counted}")
        return offline
    offline.evidence += counted.evidence
    suspects = [] if isinstance(snap, BaseException) else unclean_candidates(snap)
    if suspects:
        offline.evidence.append(
            Evidence(
                "Unclean election allowed, ISR shrunk",
                "; ".join(
                    f"{p.topic}-{p.partition} leader {p.leader if p.has_leader else 'none'}, "
                    f"ISR {broker_list(p.isr)}, replicas {broker_list(p.replicas)}"
                    for p in suspects[:5]
                )
                + (f" (+{len(suspects) - 5} more)" if len(suspects) > 5 else ""),
                "live: metadata + topic configs",
                "bad",
            )
        )
    if counted.total <= 0:
        if suspects:
            offline.notes.append(
                "Topics that allow unclean elections have partitions with a shrunken ISR: one more "
                "loss there elects an out-of-sync leader and loses data."
            )
        return offline
    when = (
        "in the last few minutes"
        if counted.recent
        else (
            f"since the controller started at {time.strftime('%H:%M UTC', time.gmtime(counted.started_at))}"
            if counted.started_at
            else "since the controller started"
        )
    )
    where = (
        f" Most likely on {name_partitions(suspects, 4)}: it allows unclean elections and the replicas that "
        "held the newest records are out of its ISR."
        if suspects
        else ""
    )
    offline.lead.insert(0, (UNCLEAN_ELECTION, f"live: {counted.total:,.0f} unclean leader election(s) {when}"))
    offline.severity = "critical"
    offline.verdict = (
        f"{counted.total:,.0f} unclean leader election(s) {when}: an out-of-sync replica became leader, "
        f"so records acknowledged by the old leader but not yet copied are lost.{where} Reconcile that data "
        "from the producers or upstream, and set unclean.leader.election.enable=false unless availability "
        "really matters more than those records."
    )
    return offline
