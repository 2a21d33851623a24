"""A live but starved broker: how fast each broker answers, read side by side (`why starved broker`).

A broker held to a sliver of a core (a cpu cgroup, a noisy neighbour) or waiting on a saturated
disk stays registered: it heartbeats often enough, its replicas may even stay in sync, and no
admin read says anything is wrong, while producers with acks=all wait seconds on it. What tells
it apart is time: its listener answers a request late, its JMX exporter (which runs in its JVM)
answers late or not at all, while the other brokers answer at once. Several brokers slow together
point at the bot's own host or the network instead (diagnosis/exporter_reads.py says which).
"""

from __future__ import annotations

import asyncio
import statistics

from diagnosis.entry_ids import STARVED_BROKER
from diagnosis.exporter_reads import NodeReading
from diagnosis.findings import LiveFindings
from diagnosis.latency import PRODUCE, p99_splits, timer_series
from diagnosis.metric_checks import broker_nodes, failed_evidence, read_exporters
from diagnosis.snapshot import broker_list
from framework import sources
from framework.reply import Action, Evidence, SourceState
from live.gateway import AdminGateway, GatewayError
from live.probe import ProbeResult

# A broker's listener answering this many times slower than the median of the others, and slower
# than SLOW_PROBE_S, stands out (an idle broker answers ApiVersions in milliseconds).
SLOWER_THAN_OTHERS = 5.0
SLOW_PROBE_S = 0.5


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def record_probes(probes: dict[int, ProbeResult]) -> None:
    """Each listener probe as an evidence source: answered (read, or slow when late), silent (no
    answer: the process is there and does not serve), refused or unreachable (failed)."""
    for b, r in probes.items():
        state: SourceState = "read" if r.state == "answers" else "no answer" if r.state == "silent" else "failed"
        sources.record(f"listener {b}", state, r.seconds, "" if r.state == "answers" else r.state, node=b)


async def awaited_probes(task: asyncio.Future[dict[int, ProbeResult]]) -> dict[int, ProbeResult]:
    """The listener probes started beside another read, each recorded as an evidence source; a
    probe that could not run at all is recorded as failed and gives none."""
    try:
        probes = await task
    except GatewayError as exc:
        probes = {}
        sources.record("probe", "failed", detail=str(exc))
    record_probes(probes)
    return probes


def slow_listeners(probes: dict[int, ProbeResult], registered: set[int] | frozenset[int]) -> list[int]:
    """Registered brokers whose listener answered far later than the others' (or not at all)."""
    answered = {b: r.seconds for b, r in probes.items() if r.state == "answers"}
    out = []
    for b, r in sorted(probes.items()):
        if b not in registered:
            continue
        others = [s for o, s in answered.items() if o != b]
        if others and (
            r.state == "silent"
            or (
                r.state == "answers" and r.seconds >= SLOW_PROBE_S and r.seconds >= SLOWER_THAN_OTHERS * _median(others)
            )
        ):
            out.append(b)
    return out


def starved(
    probes: dict[int, ProbeResult], exporters_read: NodeReading | None, brokers: set[int]
) -> tuple[list[int], list[Evidence]]:
    """The brokers that answer far later than the others (or not at all, while alive), and the
    per-broker lines that show it."""
    evidence: list[Evidence] = []
    suspects: set[int] = set()
    answered = {b: r.seconds for b, r in probes.items() if r.state == "answers"}
    for b, r in sorted(probes.items()):
        others = [s for o, s in answered.items() if o != b]
        slow = r.state == "silent" or (
            r.state == "answers" and r.seconds >= SLOW_PROBE_S and r.seconds >= SLOWER_THAN_OTHERS * _median(others)
        )
        if slow and others:
            suspects.add(b)
        evidence.append(
            Evidence(f"Broker {b} listener", r.describe(), "live: TCP + ApiVersions probe", "bad" if slow else "ok")
        )
    if exporters_read is not None:
        reading = exporters_read.reading
        silent = reading.silent & brokers
        # alone in not answering while the others did: the finding, even on a busy host (the others
        # answered through the same load)
        answered_nodes = {s.node for s in reading.samples} & brokers
        if len(silent) == 1 and answered_nodes:
            suspects |= silent
        p99 = p99_splits(reading)
        totals = {b: s.total for (b, req), s in p99.items() if req == PRODUCE and b in brokers}
        for b, total in sorted(totals.items()):
            evidence.append(
                Evidence(
                    f"Broker {b} Produce p99", f"{total:,.0f} ms", "live: JMX exporter (RequestMetrics)", "neutral"
                )
            )
        evidence += failed_evidence(reading, exporters_read.host_busy)
    return sorted(suspects), evidence


async def check_starved_broker(gw: AdminGateway) -> LiveFindings:
    """Every registered broker's listener probed and its exporter read, side by side."""
    cluster = await gw.describe_cluster()
    brokers = await broker_nodes(gw) or set(cluster.broker_ids)
    probes_task = asyncio.ensure_future(gw.broker_liveness(cluster.broker_ids))
    try:
        exporters_read: NodeReading | None = await read_exporters(gw, timer_series(), brokers)
    except GatewayError:
        exporters_read = None  # no metrics endpoints: the listeners still tell
    probes = await awaited_probes(probes_task)
    suspects, evidence = starved(probes, exporters_read, brokers)
    if exporters_read is not None and exporters_read.host_busy is not None and not suspects:
        return LiveFindings(
            "Can't tell: " + exporters_read.host_busy.sentence() + " Ask again once the bot's host is calmer.",
            "unknown",
            evidence,
        )
    if not suspects:
        return LiveFindings(
            f"Every broker answers promptly ({broker_list(probes)}): none is starved of CPU or disk right now.",
            "ok",
            evidence,
        )
    who = broker_list(suspects)
    verdict = (
        f"Broker {who} is alive but starved: it answers far later than the other brokers (or not at all) while "
        "it stays registered. Producers with acks=all wait on it. Look at its host's CPU (a cpu cgroup limit, "
        "steal, a noisy neighbour) and disk (iowait, queue depth) before touching Kafka settings; do not move "
        "its replicas while it is alive."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [(STARVED_BROKER, f"live: broker {who} answers late while the others answer at once")],
        [Action("Cluster status", "status")],
    )
