"""Render a reference topic (reference/topics.yaml) as a Reply: the short answer, then the facts and
table rows the topic names.

Shared by `runbook <topic>` and, once wired, `why <question>` when a reference topic ranks first.
Long tables (config defaults, alert thresholds) show only the rows the question names when it
names any, so "default of num.io.threads" answers with one row, not a hundred.
"""

from __future__ import annotations

from framework.reply import Reply, Section
from runbook_kb import KnowledgeBase
from runbook_kb.loader import table_rows
from runbook_kb.lookup import tokens
from runbook_kb.schema import (
    Configs,
    Durability,
    Latency,
    PartitionCategories,
    ReferenceTopic,
    Signals,
    Strict,
    TopicSource,
)

# Above this many rows a whole table is listed one short line per row.
COMPACT_ABOVE = 12


def _named_in(question: str, names: list[str]) -> set[str]:
    """Row names that appear in the question as whole token runs."""
    q = tokens(question)
    found: set[str] = set()
    for name in names:
        t = tokens(name)
        if t and any(q[i : i + len(t)] == t for i in range(len(q) - len(t) + 1)):
            found.add(name)
    return found


def _fact_lines(model: Strict, topics: list[str]) -> list[str]:
    return [
        f"{f.text}" + (f" (source: {f.source})" if f.source else "")
        for f in getattr(model, "facts", [])
        if f.topic in topics
    ]


def _config_lines(kb: KnowledgeBase, model: Configs, rows: list[str], question: str, whole: bool) -> list[str]:
    configs = [c for c in model.configs if not rows or c.key in rows]
    named = _named_in(question, [c.key for c in configs]) if whole else set()
    if named:
        configs = [c for c in configs if c.key in named]
    if whole and not named and len(configs) > COMPACT_ABOVE:
        return [f"{c.key} = {c.default} ({c.scope})" for c in configs]
    out = []
    for c in configs:
        where = f"; defined at {c.source} {kb.loc_link(c.source)}" if c.source else ""
        line = f"{c.key} = {c.default} ({c.scope}{where}): {c.meaning}"
        out.append(line + (f" Guidance: {c.guidance}" if c.guidance else ""))
    return out


def _signal_sections(model: Signals, rows: list[str], question: str) -> list[Section]:
    metrics = [m for m in model.metrics if not rows or m.name in rows]
    alerts = [a for a in model.alerts if not rows or a.metric in rows]
    named = _named_in(question, sorted({m.name for m in metrics} | {a.metric for a in alerts}))
    if named:
        metrics = [m for m in metrics if m.name in named]
        alerts = [a for a in alerts if a.metric in named]
    sections = [
        Section(
            "Alerts",
            [
                f"[{a.severity}] {a.metric} {a.condition}: {a.meaning}"
                + (f" Open: {', '.join(a.runbook)}." if a.runbook else "")
                for a in alerts
            ],
        )
    ]
    if named or len(metrics) <= COMPACT_ABOVE:
        sections.append(
            Section(
                "Metrics",
                [
                    f"{m.name}"
                    + (f" ({m.mbean})" if m.mbean else "")
                    + f": {m.meaning}"
                    + (f" Healthy: {m.healthy}." if m.healthy else "")
                    for m in metrics
                ],
            )
        )
    else:
        sections.append(Section("Metrics (name one for its MBean and meaning)", [", ".join(m.name for m in metrics)]))
    return sections


def _table_sections(kb: KnowledgeBase, name: str, model: Strict, src: TopicSource, question: str) -> list[Section]:
    # one table per reference model (the loader validated each file against its model)
    if isinstance(model, Configs):
        return [Section("Config defaults", _config_lines(kb, model, src.rows, question, whole=not src.rows))]
    if isinstance(model, Signals):
        return _signal_sections(model, src.rows, question)
    if isinstance(model, Latency):
        comps = [c for c in model.components if not src.rows or c.metric in src.rows]
        return [
            Section(
                "Latency components",
                [
                    f"{c.metric}: {c.stage} High means: {c.high_means}"
                    + (f" Look at: {'; '.join(c.look_at)}." if c.look_at else "")
                    for c in comps
                ],
            )
        ]
    if isinstance(model, Durability):
        rows = [
            f"acks={r.acks}, min.insync.replicas={r.min_insync_replicas}, RF={r.replication_factor}: "
            f"tolerates {r.tolerates[0].lower() + r.tolerates[1:]} {r.outcome}"
            for r in model.matrix
        ]
        recs = [
            f"{r.use_case}: RF={r.replication_factor}, min.insync.replicas={r.min_insync_replicas} ({r.rationale})"
            for r in model.rf_recommendations
        ]
        return [Section("acks x min.insync.replicas x RF", rows), Section("Recommended layouts", recs)]
    if isinstance(model, PartitionCategories):
        cats = [
            f"{c.name} ({c.metric}"
            + (f", {c.mbean}" if c.mbean else "")
            + f"): {c.definition} Clients: {c.client_impact}"
            for c in model.categories
        ]
        examples = []
        for ex in model.examples:
            steps = "; ".join(f"{s.event} -> ISR {s.isr}: {', '.join(s.categories)}" for s in ex.steps)
            examples.append(f"{ex.title}. Start ISR {ex.initial_isr}; {steps}. {ex.lesson}")
        return [Section("Categories", cats), Section("Worked examples", examples)]
    raise ValueError(f"{name}.yaml has no table to render")  # the loader rejects such a topic


def topic_sections(kb: KnowledgeBase, topic: ReferenceTopic, question: str = "") -> list[Section]:
    sections: list[Section] = []
    for src in topic.sources:
        model = kb.reference[src.file]
        if (src.table or src.rows) and table_rows(model) is not None:
            sections += _table_sections(kb, src.file, model, src, question)
        facts = _fact_lines(model, src.facts)
        if facts:
            sections.append(Section(f"Reference: {src.file.replace('_', ' ')}", facts))
    return [s for s in sections if s.lines]


def reference_reply(
    kb: KnowledgeBase, topic_id: str, question: str = "", reason: str = "", others: list[str] | None = None
) -> Reply:
    """The answer for one reference topic; ``others`` are follow-up commands for the next matches."""
    topic = kb.topics[topic_id]
    others = others or []
    # related failure modes not already offered as other matches
    followups = [f"/kafka runbook {eid}" for eid in topic.related if not any(f" {eid} " in f"{o} " for o in others)][:3]
    if others:
        followups = ["Also matching: " + "; ".join(others)] + followups
    return Reply(
        title=f"Reference: {topic.title}",
        severity="info",
        verdict=topic.summary,
        sections=topic_sections(kb, topic, question),
        followups=followups,
        notes=[f"Matched {reason}."] if reason else [],
    )
