"""runbook <query>: the full runbook entry for a failure mode, metric, error or config key."""

from __future__ import annotations

from runbook_kb import KnowledgeBase
from runbook_kb.schema import FailureMode

from .context import Context
from .diagnosis import diagnosis
from .reply import Reply, Section
from .router import BadInput
from .spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("runbook",),
    summary="Show the full runbook entry: cause, symptoms, mechanism source lines, levers, mitigation, what not to do.",
    params=(Param("query", "an entry id, alias, metric, error, config key or a few words", kind="text", rest=True),),
    examples=("runbook hanging transaction", "runbook UnderMinIsrPartitionCount", "runbook PRODUCER_FENCED"),
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
    matches = ctx.lookup.search(query, limit=4)
    if not matches:
        raise BadInput(
            f"Nothing in the runbook matches '{query}'.",
            [f"runbook {s}" for s in ctx.lookup.did_you_mean(query)] or ["help runbook"],
        )
    top = matches[0]
    entry = top.entry
    d = diagnosis(ctx.kb, entry, reason=top.reason, first_steps=None)
    others = [f"/kafka runbook {m.entry.id}  ({m.entry.title})" for m in matches[1:]]
    return Reply(
        title=f"Runbook: {entry.title}",
        severity="info",
        verdict=f"Matched {top.reason}.",
        diagnoses=[d],
        sections=entry_sections(ctx.kb, entry),
        followups=(["Also matching: " + "; ".join(others)] if others else []) + [f"/kafka why {entry.id}"],
    )


COMMAND = Command(SPEC, run)
