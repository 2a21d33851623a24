"""The two commands: ``triage [symptom]`` starts a walk, ``triage answer <token> <q> <choice>``
continues one (the answer buttons send it). Each keeps the thread in the store between answers."""

from __future__ import annotations

import asyncio

from commands.triage.engine import answer, start
from commands.triage.store import store_for
from commands.triage.view import to_reply
from diagnosis.recent_changes import with_recent_changes
from diagnosis.snapshot import snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Reply
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("triage",),
    summary="Guided triage: walk the runbook's steps for a symptom, answered from the cluster where it can, asking you the rest.",
    params=(
        Param(
            "symptom",
            "what you see: URP, offline, NotEnoughReplicas ... (default: what the cluster shows)",
            kind="text",
            required=False,
            rest=True,
        ),
    ),
    examples=("triage URP", "triage", "triage hanging transaction"),
)
ANSWER_SPEC = CommandSpec(
    words=("triage", "answer"),
    summary="Answer a triage question and continue.",
    params=(
        Param("token", "the triage token"),
        Param("question", "the question id, e.g. q1"),
        Param("choice", "your answer"),
    ),
    examples=("triage answer 3f2a9c1b7d4e q1 no",),
)


async def _symptom_now(ctx: Context, request: CommandRequest) -> str | None:
    """The most urgent thing the cluster shows, as a symptom the runbook knows."""
    snap = await snapshot(await gateway(ctx, request.cluster), min_isr="all")
    cats = snap.by_category()
    for cat, symptom in (("Offline", "offline"), ("UnderMinIsr", "under min isr"), ("UnderReplicated", "URP")):
        if cats[cat]:
            return symptom
    return "URP" if snap.brokers.expected - snap.brokers.registered else None


async def run(request: CommandRequest, ctx: Context) -> Reply:
    symptom = request.args.get("symptom")
    if not symptom:
        symptom = await _symptom_now(ctx, request)
        if symptom is None:
            return Reply(
                title="Triage",
                severity="ok",
                verdict="The cluster shows nothing to triage: every partition is in sync.",
                followups=["/kafka triage URP", "/kafka triage hanging transaction"],
            )
    await ctx.progress(f"walking the runbook's triage for '{symptom}'")
    state = await start(str(symptom), ctx, request.cluster)
    store = await asyncio.to_thread(store_for, ctx)  # sqlite commits fsync: off the event loop
    await asyncio.to_thread(store.save, state)
    return to_reply(state, ctx.kb)


async def run_answer(request: CommandRequest, ctx: Context) -> Reply:
    store = await asyncio.to_thread(store_for, ctx)
    stored = await asyncio.to_thread(store.load, str(request.args["token"]))
    state = await answer(stored.state, str(request.args["question"]), str(request.args["choice"]).lower(), ctx)
    await asyncio.to_thread(store.save, state, stored.version)
    return to_reply(state, ctx.kb)


COMMAND = Command(SPEC, with_recent_changes(run))
ANSWER = Command(ANSWER_SPEC, run_answer)
