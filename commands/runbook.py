"""runbook <query>: the full runbook entry for a failure mode, metric, error or config key, or the
reference topic a question is about (KIP-427 categories, the acks matrix, latency decomposition ...)."""

from __future__ import annotations

from diagnosis.entries import diagnosis
from diagnosis.reference import reference_reply
from framework.context import Context
from framework.reply import Reply, Section
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from runbook_kb import KnowledgeBase
from runbook_kb.schema import FailureMode

SPEC = CommandSpec(
    words=("runbook",),
    summary="Show the full runbook entry (cause, symptoms, mechanism source lines, levers, mitigation, what not to do) "
    "or a reference topic (KIP-427, acks matrix, KIP-16, latency decomposition, reassignment ...).",
    params=(
        Param(
            "query",
            "an entry id, alias, metric, error, config key, reference topic or a question",
            kind="text",
            rest=True,
        ),
    ),
    examples=(
        "runbook hanging transaction",
        "runbook UnderMinIsrPartitionCount",
        "runbook PRODUCER_FENCED",
        "runbook KIP-427",
        "runbook acks matrix",
    ),
)


def entry_sections(kb: KnowledgeBase, e: FailureMode) -> list[Section]:
    family = kb.meta["families"][e.family]
    symptoms = []
    for s in e.symptoms:
        line = f"{s.metric}" + (f" ({s.mbean})" if s.mbean else "") + f": {s.condition}"
        symptoms.append(line + (f". Tells it apart: {s.signature}" if s.signature else ""))
    levers = []
    for lv in e.levers:
        default = f", default {lv.default}" if lv.default else ""
        where = f" ({lv.source} {kb.loc_link(lv.source)})" if lv.source else ""
        levers.append(f"[{lv.limit_class}] {lv.name}{default}{where}: {lv.effect}")
    sections = [
        Section("Family", [family]),
        Section("Symptoms", symptoms),
    ]
    if e.errors:
        sections.append(Section("Client errors", [", ".join(e.errors)]))
    if e.no_source_line:
        sections.append(Section("Why no source line", [" ".join(e.no_source_line.split())]))
    if e.mechanism_notes:
        sections.append(Section("More on the mechanism", list(e.mechanism_notes)))
    sections.append(Section("Levers and their limit class", levers))
    if e.empirical:
        sections.append(Section("Empirical (named sources)", [f"{c.claim} (source: {c.source})" for c in e.empirical]))
    if e.related:
        sections.append(Section("Related", [", ".join(e.related)]))
    return sections


async def run(request: CommandRequest, ctx: Context) -> Reply:
    query = str(request.args["query"])
    hits = ctx.lookup.answer(query, limit=4)
    if not hits:
        raise BadInput(
            f"Nothing in the runbook matches '{query}'.",
            [f"runbook {s}" for s in ctx.lookup.did_you_mean(query)] or ["help runbook"],
        )
    top = hits[0]
    others = [f"/kafka runbook {h.id}  ({h.title})" for h in hits[1:]]
    if top.kind == "reference":
        return reference_reply(ctx.kb, top.id, query, reason=top.reason, others=others)
    entry = ctx.kb.failure_modes[top.id]
    d = diagnosis(ctx.kb, entry, reason=top.reason, first_steps=None)
    return Reply(
        title=f"Runbook: {entry.title}",
        severity="info",
        verdict=f"Matched {top.reason}.",
        diagnoses=[d],
        sections=entry_sections(ctx.kb, entry),
        followups=(["Also matching: " + "; ".join(others)] if others else []) + [f"/kafka why {entry.id}"],
    )


COMMAND = Command(SPEC, run)
