"""Where a request's time goes, per broker, read live from the JMX exporters.

The broker splits every request's TotalTimeMs into five parts (the runbook's latency map,
reference/latency.yaml): waiting for a handler, the leader's own work, waiting on followers or
purgatory, waiting for a network thread, and sending. The part that dominates on the slowest
broker says where to look before anything is tuned; the map names the failure modes each part
points at and the p99 above which a broker is worth a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnosis.findings import LiveFindings
from diagnosis.metric_checks import failed_evidence
from framework.reply import Evidence, Severity
from live import exporters
from runbook_kb import KnowledgeBase, default_kb
from runbook_kb.schema import Latency, LatencyComponent

TOTAL = "TotalTimeMs"
PRODUCE = "Produce"
FETCH_CONSUMER = "FetchConsumer"
REQUESTS = (PRODUCE, FETCH_CONSUMER)  # what clients feel; FetchFollower is replication's own latency


def _series(metric: str) -> str:
    """The exporter's name for a RequestMetrics timer (localkafka/config/jmx_rules.yaml)."""
    return "kafka_network_requestmetrics_" + metric.lower()


def latency_map(kb: KnowledgeBase) -> Latency:
    ref = kb.reference["latency"]
    if not isinstance(ref, Latency):
        raise TypeError("reference/latency.yaml is not the latency map")
    return ref


@dataclass(frozen=True)
class Split:
    """One broker's p99 of one request type, in ms: the total and each part."""

    broker: int
    request: str
    total: float
    parts: dict[str, float]  # component metric -> p99 ms

    def dominant(self) -> tuple[str, float] | None:
        return max(self.parts.items(), key=lambda kv: kv[1]) if self.parts else None


def splits(reading: exporters.Reading, components: list[LatencyComponent]) -> list[Split]:
    """Every broker's p99 split per request type from one reading (quantile 0.99 of each timer)."""
    names = {_series(c.metric): c.metric for c in components}
    values: dict[tuple[int, str], dict[str, float]] = {}
    for name, metric in names.items():
        for s in reading.named(name):
            request = s.label("request")
            if request in REQUESTS and s.label("quantile") == "0.99":
                values.setdefault((s.node, request), {})[metric] = s.value
    out = []
    for (broker, request), parts in sorted(values.items()):
        total = parts.pop(TOTAL, None)
        if total is None:
            continue
        out.append(Split(broker, request, total, parts))
    return out


def timer_series(kb: KnowledgeBase | None = None) -> frozenset[str]:
    """The exporter series of every timer the latency map names: what a read for ``splits`` asks for."""
    return frozenset(_series(c.metric) for c in latency_map(kb or default_kb()).components)


def p99_splits(reading: exporters.Reading, kb: KnowledgeBase | None = None) -> dict[tuple[int, str], Split]:
    """``splits`` by (broker, request type), with the latency map's parts."""
    return {(s.broker, s.request): s for s in splits(reading, latency_map(kb or default_kb()).components)}


def _ms(v: float) -> str:
    return f"{v:,.1f} ms" if v < 10 else f"{v:,.0f} ms"


def _line(split: Split, order: list[str]) -> str:
    parts = ", ".join(f"{m.removesuffix('TimeMs')} {_ms(split.parts[m])}" for m in order if m in split.parts)
    top = split.dominant()
    lead = f"; {top[0]} dominates" if top is not None and split.total > 0 and top[1] >= 0.5 * split.total else ""
    return f"p99 {_ms(split.total)} = {parts}{lead}"


def latency_findings(reading: exporters.Reading, kb: KnowledgeBase | None = None) -> LiveFindings:
    """The verdict on the brokers' request latency: the slowest broker's Produce p99, the part that
    dominates it and what that part points at, with every broker's split as evidence."""
    lmap = latency_map(kb or default_kb())
    parts = [c for c in lmap.components if c.metric != TOTAL]
    order = [c.metric for c in parts]
    found = splits(reading, lmap.components)
    evidence = [
        Evidence(f"Broker {s.broker} {s.request}", _line(s, order), "live: JMX exporter (RequestMetrics)")
        for s in found
    ]
    evidence += failed_evidence(reading)
    produce = [s for s in found if s.request == PRODUCE]
    if not produce:
        return LiveFindings(
            "No broker reported a Produce latency split (no produce requests yet, or the exporters did not answer).",
            "info" if not reading.failed else "warning",
            evidence,
        )
    worst = max(produce, key=lambda s: s.total)
    limit = lmap.alert_p99_ms.get(PRODUCE)
    top = worst.dominant()
    component = next((c for c in parts if top is not None and c.metric == top[0]), None)
    others = sorted((s for s in produce if s is not worst), key=lambda s: -s.total)[:5]
    rest = f"; the next {', '.join(f'{s.broker} {_ms(s.total)}' for s in others)}" if others else ""
    if top is None or component is None:
        return LiveFindings(f"Produce p99 is {_ms(worst.total)} on broker {worst.broker}{rest}.", "info", evidence)
    severity: Severity = "warning" if limit is not None and worst.total >= limit else "ok"
    means = " ".join(component.high_means.split()).split(". ")[0].rstrip(".")
    share = f"{top[1] / worst.total:.0%}" if worst.total > 0 else "all"
    verdict = (
        f"Produce p99 is highest on broker {worst.broker}: {_ms(worst.total)}{rest}. "
        f"{top[0]} is {_ms(top[1])} of it ({share}): {means[:1].lower() + means[1:]}."
    )
    if severity == "ok":
        verdict += f" That is under the runbook's {_ms(limit or 0)} warning line: nothing to chase on latency."
    lead = [(e, f"{top[0]} dominates broker {worst.broker}'s Produce p99") for e in component.entries]
    return LiveFindings(verdict, severity, evidence, lead=lead if severity != "ok" else [])
