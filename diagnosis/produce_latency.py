"""`why produce latency`: every broker's Produce p99 split into its five parts (diagnosis/latency.py),
read beside each broker's listener probe and exporter answer (diagnosis/responsiveness.py).

A follower starved of CPU or disk, or paused, holds every acks=all produce request it replicates:
the leaders' p99 is then nearly all RemoteTimeMs (waiting on followers), and the split alone names
the leader, not the follower. The broker that holds them answers late or not at all: its listener,
and its exporter, which runs in its own JVM. Seen in the chaos campaign (trial 1129:7: broker 103 in
a cpu cgroup at 5 % of a core, acks=all producers): the answer named broker 101's 1,776 ms p99,
100 % RemoteTimeMs, and no cause, while broker 103's exporter alone had not answered.
"""

from __future__ import annotations

import asyncio

from diagnosis.entry_ids import GC_PAUSES, STARVED_BROKER
from diagnosis.findings import LiveFindings, Undecided
from diagnosis.latency import PRODUCE, latency_findings, timer_series
from diagnosis.metric_checks import broker_nodes, failed_evidence, read_exporters
from diagnosis.responsiveness import awaited_probes, starved
from diagnosis.snapshot import broker_list
from framework.reply import Action, Evidence, Step
from live import exporters
from live.gateway import AdminGateway

REMOTE = "RemoteTimeMs"


async def check_produce_latency(gw: AdminGateway) -> LiveFindings:
    """One read of every broker's RequestMetrics timers, with every registered broker's listener
    probed at the same time."""
    cluster = await gw.describe_cluster()
    brokers = await broker_nodes(gw) or set(cluster.broker_ids)
    probes_task = asyncio.ensure_future(gw.broker_liveness(cluster.broker_ids))
    try:
        read = await read_exporters(gw, timer_series(), brokers)
    except BaseException:
        probes_task.cancel()
        raise
    found = latency_findings(read.reading)
    if read.host_busy is not None:
        found.evidence += failed_evidence(exporters.Reading(), read.host_busy)
    probes = await awaited_probes(probes_task)
    suspects, lines = starved(probes, read, brokers)
    if not suspects:
        return found
    return held_by(found, suspects, [e for e in lines if e.label.endswith(" listener")])


def held_by(found: LiveFindings, suspects: list[int], listeners: list[Evidence]) -> LiveFindings:
    """The split's answer led by the broker that answers late or not at all: a starved or paused
    follower, which holds the leaders' acks=all produce requests (their RemoteTimeMs)."""
    who = broker_list(suspects)
    waits = any(e.label.endswith(f" {PRODUCE}") and e.value.endswith(f"{REMOTE} dominates") for e in found.evidence)
    agrees = "The leaders' Produce split agrees: they wait on followers. " if waits else "The leaders' Produce split: "
    verdict = (
        f"Broker {who} answers far later than the other brokers, or not at all, while it stays registered: a "
        "broker starved of CPU or disk, or paused, holds every acks=all produce request it replicates. "
        f"{agrees}{found.verdict} What decides between starved and paused: `ps -o stat= -p <pid>` on its host "
        "(T is a stopped process), then its host's CPU (a cgroup limit, steal) and disk. Do not move its "
        "replicas while it is alive."
    )
    reason = f"live: broker {who} answers late or not at all while the others answer at once" + (
        f"; the leaders' Produce p99 is mostly {REMOTE}" if waits else ""
    )
    lead = [(STARVED_BROKER, reason), (GC_PAUSES, reason)]
    lead += [(e, why) for e, why in found.lead if e not in (STARVED_BROKER, GC_PAUSES)]
    check = Step(
        f"On broker {who}'s host: is the process stopped (`ps -o stat= -p <pid>` shows T), held by a cpu cgroup "
        "(cpu.stat nr_throttled), or waiting on its disk (iowait)? `why starved broker` reads every broker's "
        "answer times side by side.",
        command="why starved broker",
    )
    undecided = Undecided(
        STARVED_BROKER,
        {
            GC_PAUSES: "undecided: a paused JVM and a starved one both answer late or not at all: its process state decides"
        },
        [check],
    )
    return LiveFindings(
        verdict,
        "critical" if found.severity == "critical" else "warning",
        [*listeners, *found.evidence],
        lead,
        [*found.actions, Action("Starved broker", "why starved broker")],
        notes=found.notes,
        facts=found.facts,
        undecided=undecided,
    )
