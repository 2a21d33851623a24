"""Live check for page-cache cold reads: which broker reads its log from disk, and which consumer
group is far enough behind to be the reader.

A broker serving the tail reads almost nothing from disk: producers' writes and the followers' and
real-time consumers' fetches hit the page cache. Kafka exports the broker process's own block-layer
reads (``kafka.server:type=KafkaServer,name=linux-disk-read-bytes``, /proc/self/io read_bytes,
Linux only); two reads of it a moment apart give bytes/s read from disk. That is the deciding
observation: a group far behind on partitions a broker leads, with that broker reading from disk,
is a catch-up read missing the cache. The latency split on that broker (Produce and FetchConsumer
p99 by stage, as diagnosis/latency.py reads it) is reported beside it: queue time staying small argues
against handler saturation.

Thresholds come from the runbook entry (page-cache-cold-reads: checks.thresholds).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from diagnosis.entry_ids import PAGE_CACHE_COLD_READS
from diagnosis.exporter_reads import read_nodes
from diagnosis.findings import LiveFindings
from diagnosis.groups import read_groups
from diagnosis.latency import FETCH_CONSUMER, PRODUCE, Split, p99_splits, timer_series
from diagnosis.metric_checks import exporter_urls, failed_evidence
from diagnosis.snapshot import broker_list
from framework import sources
from framework.reply import Action, Evidence
from live import exporters
from live.gateway import AdminGateway, GatewayError
from runbook_kb import default_kb

ENTRY = PAGE_CACHE_COLD_READS
RATE_KEY = "disk_read_bytes_per_s_cold"  # a broker reading this much from disk misses its cache
LAG_KEY = "catch_up_lag_records"  # a group this far behind on a partition is catching up
DISK_READ = "kafka_server_kafkaserver_linux_disk_read_bytes"
QUEUE = "RequestQueueTimeMs"
# The parts of a split the evidence shows, in order, by the name it gives them (ResponseQueueTimeMs is not shown)
SHOWN = {QUEUE: "queue", "LocalTimeMs": "local", "RemoteTimeMs": "remote", "ResponseSendTimeMs": "send"}
GAP_S = 1.0  # between the two reads of the disk-read gauge
MIB = float(1 << 20)


@dataclass(frozen=True)
class BrokerReads:
    broker: int
    disk_read_bytes_per_s: float | None  # None: the gauge was not read (not Linux, exporter silent)
    produce: Split | None = None  # its Produce p99 split; None: not exported
    fetch: Split | None = None  # FetchConsumer


@dataclass(frozen=True)
class GroupBehind:
    group: str
    lag: int  # records between its committed offsets and the log end, on the partitions below
    partitions: list[str]  # "topic-p"
    leaders: list[int]  # the brokers leading those partitions


def thresholds() -> tuple[float, int]:
    t = default_kb().failure_modes[ENTRY].checks.thresholds
    return float(t[RATE_KEY]), int(t[LAG_KEY])


def disk_read_rates(first: exporters.Reading, second: exporters.Reading) -> dict[int, float]:
    """Bytes/s each broker read from disk between two readings of the gauge."""
    before = {s.node: s.value for s in first.named(DISK_READ)}
    gap = max(1e-3, second.at - first.at)
    return {s.node: max(0.0, (s.value - before[s.node]) / gap) for s in second.named(DISK_READ) if s.node in before}


def _split(split: Split | None) -> str:
    if split is None:
        return "not exported"
    parts = ", ".join(f"{said} {split.parts[m]:,.0f}" for m, said in SHOWN.items() if m in split.parts)
    return f"{split.total:,.0f} ms ({parts})" if parts else f"{split.total:,.0f} ms"


def cold_read_findings(
    brokers: list[BrokerReads],
    groups: list[GroupBehind],
    *,
    rate_min: float,
    lag_min: int,
    gap_s: float = GAP_S,
) -> LiveFindings:
    """The rule, from what was read: a broker reading >= ``rate_min`` bytes/s from disk leads
    page-cache-cold-reads (warning), naming the group >= ``lag_min`` records behind on partitions it
    leads when there is one. No broker reading from disk argues against it; no gauge read says what
    would decide."""
    source = f"live: JMX exporter, linux-disk-read-bytes over {gap_s:.1f} s"
    behind = sorted((g for g in groups if g.lag >= lag_min), key=lambda g: -g.lag)
    read = [b for b in brokers if b.disk_read_bytes_per_s is not None]
    cold = sorted(
        (b for b in read if (b.disk_read_bytes_per_s or 0) >= rate_min), key=lambda b: -(b.disk_read_bytes_per_s or 0)
    )
    evidence = [
        Evidence(
            f"Broker {b.broker} disk reads",
            f"{(b.disk_read_bytes_per_s or 0) / MIB:,.1f} MiB/s"
            + (" - fetches miss its page cache" if b in cold else " - served from the page cache"),
            source,
            "bad" if b in cold else "ok",
        )
        for b in sorted(read, key=lambda b: b.broker)
    ]
    if not read:
        who = behind[0] if behind else None
        verdict = (
            "No broker's disk reads could be read (Kafka's linux-disk-read-bytes gauge, Linux only), so whether "
            "fetches miss the page cache is unknown."
            + (
                f" Group {who.group} is {who.lag:,} records behind on {', '.join(who.partitions[:3])} "
                f"(leader broker {broker_list(who.leaders)}): a catch-up read like that is what evicts the cache."
                if who
                else ""
            )
            + " What decides it: the broker host's disk read I/O while the group reads (iostat -x, or read_bytes "
            "in /proc/<broker pid>/io) - near zero means the cache serves it."
        )
        lead = [(ENTRY, f"live: group {who.group} {who.lag:,} records behind; disk reads unread")] if who else []
        return LiveFindings(verdict, "warning" if who else "unknown", evidence, lead)
    if not cold:
        top = max(read, key=lambda b: b.disk_read_bytes_per_s or 0)
        verdict = (
            f"No broker reads from disk (at most {(top.disk_read_bytes_per_s or 0) / MIB:,.1f} MiB/s, on broker "
            f"{top.broker}; the runbook's line is {rate_min / MIB:g} MiB/s): fetches are served from the page cache, "
            "so this is not cold reads."
        )
        if behind:
            g = behind[0]
            evidence.append(
                Evidence(f"Group {g.group}", f"{g.lag:,} records behind, read from cache", "live: group offsets", "ok")
            )
            verdict += f" Group {g.group} is {g.lag:,} records behind but its reads hit the cache."
        return LiveFindings(verdict, "ok", evidence)
    b = cold[0]
    rate = (b.disk_read_bytes_per_s or 0) / MIB
    others = [o for o in read if o.broker != b.broker]
    mine = [g for g in behind if b.broker in g.leaders]
    for g in mine[:3]:
        evidence.append(
            Evidence(
                f"Group {g.group}",
                f"{g.lag:,} records behind on {', '.join(g.partitions[:4])}"
                + (f" (+{len(g.partitions) - 4} more)" if len(g.partitions) > 4 else "")
                + f", led by broker {broker_list(g.leaders)}: a catch-up read",
                "live: committed offsets vs log end",
                "bad",
            )
        )
    evidence.append(
        Evidence(f"Broker {b.broker} Produce p99", _split(b.produce), "live: JMX exporter (RequestMetrics)")
    )
    evidence.append(
        Evidence(f"Broker {b.broker} FetchConsumer p99", _split(b.fetch), "live: JMX exporter (RequestMetrics)")
    )
    if b.produce is not None and QUEUE in b.produce.parts:
        queue, total = b.produce.parts[QUEUE], b.produce.total
        waiting = queue >= 0.5 * total and total >= 10
        evidence.append(
            Evidence(
                "Handler saturation",
                (
                    f"Produce requests wait {queue:,.0f} ms of {total:,.0f} ms for a handler: the queue dominates too"
                    if waiting
                    else f"against: Produce requests wait {queue:,.0f} ms of {total:,.0f} ms for a handler thread"
                ),
                "live: JMX exporter (RequestQueueTimeMs)",
                "bad" if waiting else "ok",
            )
        )
    if mine:
        g = mine[0]
        reader = (
            f"Group {g.group} is {g.lag:,} records behind on partitions broker {b.broker} leads: a catch-up read of "
            "old segments."
        )
        lead_why = (
            f"live: broker {b.broker} reads {rate:,.1f} MiB/s from disk; group {g.group} {g.lag:,} records behind"
        )
        actions = [Action(f"Lag of {g.group}", f"lag {g.group}")]
    else:
        reader = (
            f"No consumer group is {lag_min:,}+ records behind on partitions it leads, so the reader is not "
            "identified: a follower or a reassignment catching up, or the log cleaner, read too. What decides it: "
            "the groups' lag over a minute and FetchConsumer vs FetchFollower bytes on this broker."
        )
        lead_why = f"live: broker {b.broker} reads {rate:,.1f} MiB/s from disk"
        actions = []
    verdict = (
        f"Broker {b.broker} reads {rate:,.1f} MiB/s from disk"
        + (
            f" (the others at most {max((o.disk_read_bytes_per_s or 0) for o in others) / MIB:,.1f} MiB/s)"
            if others
            else ""
        )
        + f": fetches miss its page cache. {reader} Each cold read evicts the tail pages producers and real-time "
        "consumers rely on. Slow or pause the backfill (a consumer byte-rate quota) rather than adding threads or "
        "heap; nothing needs to move."
    )
    return LiveFindings(verdict, "warning", evidence, [(ENTRY, lead_why)], actions)


async def _groups_behind(gw: AdminGateway, lag_min: int) -> list[GroupBehind]:
    listed = await gw.list_consumer_groups()
    names = [g.group_id for g in listed.groups]
    if not names:
        return []
    reads = {g: r if isinstance(r, GatewayError) else r[0] for g, r in (await read_groups(gw, names)).items()}
    topics = sorted(
        {p.topic for r in reads.values() if not isinstance(r, GatewayError) for p in r.lag.partitions if p.lag}
    )
    leaders: dict[tuple[str, int], int] = {}
    if topics:
        for t in await gw.describe_topics(topics):
            for p in t.partitions:
                if p.leader is not None:
                    leaders[(p.topic, p.partition)] = p.leader
    out = []
    for name, r in reads.items():
        if isinstance(r, GatewayError):
            continue
        parts = [p for p in r.lag.partitions if p.lag]
        lag = sum(p.lag or 0 for p in parts)
        if lag >= lag_min:
            out.append(
                GroupBehind(
                    name,
                    lag,
                    [f"{p.topic}-{p.partition}" for p in sorted(parts, key=lambda p: -(p.lag or 0))],
                    sorted({leaders[(p.topic, p.partition)] for p in parts if (p.topic, p.partition) in leaders}),
                )
            )
    return out


async def check_cold_reads(gw: AdminGateway) -> LiveFindings:
    """Two reads of every broker's disk-read gauge GAP_S apart (the group reads run in between),
    the latency split of each broker, and the groups far behind with their partitions' leaders."""
    rate_min, lag_min = thresholds()
    urls = exporter_urls(gw)
    names = frozenset({DISK_READ, *timer_series()})
    first = (await read_nodes(urls, frozenset({DISK_READ}))).reading
    groups_task = asyncio.ensure_future(_groups_behind(gw, lag_min))
    cluster_task = asyncio.ensure_future(gw.describe_cluster())
    await asyncio.sleep(max(0.0, GAP_S - (time.monotonic() - first.at)))
    second_read = await read_nodes(urls, names)
    second = second_read.reading
    notes: list[str] = []
    try:
        groups = await groups_task
    except GatewayError as exc:
        groups = []
        notes.append(f"Consumer groups not read: {exc}")
    rates = disk_read_rates(first, second)
    try:
        registered = set((await cluster_task).broker_ids)
    except GatewayError:
        registered = set(rates)
    p99 = p99_splits(second)
    brokers = [
        BrokerReads(n, rates.get(n), p99.get((n, PRODUCE)), p99.get((n, FETCH_CONSUMER)))
        for n in sorted(registered & set(urls))  # brokers only: a controller serves no fetches
    ]
    found = cold_read_findings(brokers, groups, rate_min=rate_min, lag_min=lag_min, gap_s=second.at - first.at)
    # a broker whose gauge was not read both times has no rate: its exporter did not answer once
    for n in sorted(registered & set(urls)):
        why = first.failed.get(n) or second.failed.get(n)
        if rates.get(n) is None and why:
            sources.record(
                f"exporter {n}", "no answer" if n in first.silent | second.silent else "failed", detail=why, node=n
            )
    found.evidence += failed_evidence(
        exporters.Reading(failed={**first.failed, **second.failed}, silent=first.silent | second.silent),
        second_read.host_busy,
    )
    found.notes += notes
    return found
