"""why <symptom>: rank the runbook's explanations for a symptom, metric or error, with first steps.

The symptom is resolved through the runbook's vocabulary ("URP" -> UnderReplicatedPartitions),
then every entry that lists it is ranked: the entries whose first symptom it is come first.
Live-cluster and lake evidence, where configured, is added by the evidence providers.
"""

from __future__ import annotations

from .context import Context
from .diagnosis import diagnosis
from .reply import Evidence, Reply
from .router import BadInput
from .spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("why",),
    summary="Explain a symptom, metric or error: ranked likely causes, the source line behind each, first steps.",
    params=(Param("symptom", "what you see: URP, offline, NotEnoughReplicas, IsrShrinksPerSec, lag ...", kind="text", rest=True),),
    examples=("why URP", "why NotEnoughReplicas", "why LastStableOffsetLag"),
    details="Ranked from the runbook; with a cluster configured the answer adds what the cluster shows now.",
)

MAX_DIAGNOSES = 4


async def run(request: CommandRequest, ctx: Context) -> Reply:
    symptom = str(request.args["symptom"])
    matches = ctx.lookup.search(symptom, limit=MAX_DIAGNOSES)
    if not matches:
        raise BadInput(
            f"The runbook has nothing for '{symptom}'.",
            [f"why {s}" for s in ctx.lookup.did_you_mean(symptom)] or ["help why"],
        )
    diagnoses = [diagnosis(ctx.kb, m.entry, reason=m.reason) for m in matches]
    top = matches[0].entry
    evidence = [Evidence(label="Runbook match", value=f"{m.entry.title}: {m.reason}", source="kb") for m in matches]
    return Reply(
        title=f"Why {symptom}?",
        severity="warning",
        verdict=(
            f"{len(matches)} runbook explanation{'s' if len(matches) > 1 else ''} for '{symptom}'; "
            f"check '{top.title}' first."
        ),
        evidence=evidence,
        diagnoses=diagnoses,
        notes=["No live evidence in this answer: ranked from the runbook alone."] if ctx.live is None else [],
        followups=[f"/kafka runbook {m.entry.id}" for m in matches[:2]],
    )


COMMAND = Command(SPEC, run)
