"""The triage walk: runbook steps in order, each answered by its probes or asked of the human.

The symptom resolves (ctx.lookup.search) to ranked runbook entries; the walk starts with the
first and goes through its ``triage`` steps in order. A step the runbook binds probes to
(probes.py) is answered from the cluster when it can be; otherwise the human gets a Question
with choices. Evidence that points at another entry switches the walk there (once: coming back
would loop); evidence that rules an entry out moves on to the next candidate. The runbook's step
text stays in the KB: the engine only quotes it.

    state = await start("URP", ctx)                  # runs every step it can answer
    state = await answer(state, "q1", "no", ctx)     # the human's answer; continues
"""

from __future__ import annotations

import re
import secrets

from commands.triage.probes import PROBES, LiveProbes, suspect
from commands.triage.state import ALREADY_ANSWERED, LABELS, Outcome, Question, Record, Status, TriageState
from diagnosis.entry_ids import BROKER_LOSS, GC_PAUSES, SLOW_FOLLOWER
from diagnosis.snapshot import broker_list
from framework.context import Context
from framework.gateways import gateway
from framework.router import BadInput
from live.gateway import ClusterUnreachable, GatewayError

MAX_QUESTIONS = 12  # a triage that needs more is better read as the runbook itself
MAX_PASSES = 100  # every pass advances a step, switches entry or stops: this only bounds a bug
_GC = re.compile(r"\bGC\b")


def _refs(ctx: Context, text: str, entry: str) -> list[str]:
    return [eid for eid in ctx.kb.failure_modes if eid != entry and re.search(rf"\b{re.escape(eid)}\b", text)]


def _ask(state: TriageState, text: str, choices: list[str], kind: str, refs: list[str] | None = None) -> None:
    state.asked += 1
    state.question = Question(f"q{state.asked}", text, choices, kind, refs or [])


def _human_question(state: TriageState, ctx: Context, text: str) -> None:
    refs = _refs(ctx, text, state.entry)
    who = state.facts.get("suspect")
    if _GC.search(text) and who is not None:
        _ask(
            state,
            f"Did the GC log of broker {who} show long pauses lined up with the ISR shrinks?",
            ["yes", "no", "unknown"],
            "gc",
            refs or ([GC_PAUSES] if state.entry != GC_PAUSES else []),
        )
    elif "?" in text:
        _ask(state, text, ["yes", "no", "unknown"], "step", refs)
    else:
        _ask(state, f"{text} What did you find?", ["confirms", "rules-out", "skip"], "step", refs)


def _apply(state: TriageState, ctx: Context, o: Outcome, text: str, step: int) -> None:
    state.records.append(Record(state.entry, step, text, o.answer, o.source, o.status))
    if step >= 0:
        state.step += 1
    if o.points_to and o.points_to in ctx.kb.failure_modes:
        state.support.setdefault(o.points_to, []).append(o.answer)
        # Follow the evidence to another entry, once: coming back would loop.
        if o.points_to != state.entry and o.points_to not in state.visited and o.points_to not in state.ruled_out:
            state.entry, state.step = o.points_to, 0
            state.visited.append(o.points_to)
            return
    if o.rules_out:
        state.ruled_out.append(state.entry)
        nxt = next((c for c in state.candidates if c not in state.ruled_out and c not in state.visited), None)
        if nxt is None:
            state.conclusion = {
                "entry": None,
                "reason": "the cluster and your answers ruled out every runbook explanation for "
                f"'{state.symptom}': " + ", ".join(state.ruled_out),
            }
        else:
            state.entry, state.step = nxt, 0
            state.visited.append(nxt)


def _conclude(state: TriageState, ctx: Context) -> None:
    missing = state.facts.get("brokers", {}).get("missing")
    if state.entry == BROKER_LOSS and missing and "maintenance" not in state.facts and state.asked < MAX_QUESTIONS:
        _ask(
            state,
            f"Is broker {broker_list(missing)} down for planned maintenance (a rolling restart, an upgrade)?",
            ["yes", "no", "unknown"],
            "maintenance",
        )
        return
    why = state.support.get(state.entry) or ["walked its triage steps and nothing ruled it out"]
    state.conclusion = {"entry": state.entry, "reason": "; ".join(dict.fromkeys(why))}


def _merge(outcomes: list[Outcome]) -> Outcome:
    """Several probes answered one step: one record, the worst status, the first pointer."""
    status: Status = (
        "bad"
        if any(o.status == "bad" for o in outcomes)
        else "ok"
        if all(o.status == "ok" for o in outcomes)
        else "neutral"
    )
    return Outcome(
        "; ".join(o.answer for o in outcomes),
        " / ".join(dict.fromkeys(o.source for o in outcomes)),
        status,
        next((o.points_to for o in outcomes if o.points_to), None),
        any(o.rules_out for o in outcomes),
    )


async def _walk(state: TriageState, ctx: Context, live: LiveProbes | None) -> TriageState:
    for _ in range(MAX_PASSES):
        if state.done or state.question is not None:
            break
        entry = ctx.kb.failure_modes[state.entry]
        if state.step >= len(entry.triage):
            _conclude(state, ctx)
            continue
        text = entry.triage[state.step]
        matching = [PROBES[name] for name in entry.checks.triage.get(state.step, [])]
        outcomes: list[Outcome] = []
        for probe in matching:
            if probe.fact not in state.facts:
                if live is None:
                    continue
                try:
                    found = await probe.gather(live, state)
                except GatewayError as exc:
                    state.records.append(Record(state.entry, -1, text, f"could not read: {exc}", "live", "neutral"))
                    if isinstance(exc, ClusterUnreachable):
                        live = None  # the remaining steps become questions instead of each timing out
                    continue
                if found is None:
                    continue
                state.facts[probe.fact] = found
            outcomes.append(probe.judge(state.facts[probe.fact], state.entry))
        who = suspect(state)
        if who is not None:
            state.facts["suspect"] = who  # the GC question names this broker
        if not outcomes:
            if state.asked >= MAX_QUESTIONS:
                _apply(state, ctx, Outcome("not checked (question limit reached)", "bot"), text, state.step)
            elif any(probe.fact == "urp_shape" for probe in matching):
                _ask(
                    state,
                    "Is the URP count level since it rose (flat), or moving up and down?",
                    ["level", "moving", "unknown"],
                    "urp-shape",
                )
            else:
                _human_question(state, ctx, text)
            continue
        _apply(state, ctx, _merge(outcomes), text, state.step)
    return state


async def _live(ctx: Context, cluster: str | None) -> LiveProbes | None:
    if ctx.live is None:
        return None  # no cluster: every step becomes a question
    return LiveProbes(await gateway(ctx, cluster), ctx)


async def start(symptom: str, ctx: Context, cluster: str | None = None) -> TriageState:
    matches = ctx.lookup.search(symptom, limit=6)
    if not matches:
        raise BadInput(
            f"The runbook has nothing for '{symptom}'.",
            [f"triage {s}" for s in ctx.lookup.did_you_mean(symptom)] or ["help triage"],
        )
    candidates = [m.entry.id for m in matches]
    state = TriageState(
        token=secrets.token_hex(6),
        symptom=symptom,
        cluster=cluster,
        candidates=candidates,
        entry=candidates[0],
        visited=[candidates[0]],
    )
    return await _walk(state, ctx, await _live(ctx, cluster))


async def answer(state: TriageState, question_id: str, choice: str, ctx: Context) -> TriageState:
    q = state.question
    if q is None or q.id != question_id:
        raise BadInput(ALREADY_ANSWERED, ["triage " + state.symptom])
    if choice not in q.choices:
        raise BadInput(f"'{choice}' is not an answer to this question; choose one of: {', '.join(q.choices)}.")
    state.question = None
    label = LABELS.get(choice, choice)
    step = state.step if q.kind in ("step", "gc", "urp-shape") else -1
    text = ctx.kb.failure_modes[state.entry].triage[state.step] if step >= 0 else q.text
    if q.kind == "maintenance":
        state.facts["maintenance"] = choice
        state.records.append(Record(state.entry, -1, q.text, label, "you"))
        return await _walk(state, ctx, await _live(ctx, state.cluster))
    yes, no = choice in ("yes", "confirms", "level"), choice in ("no", "rules-out")
    target = None
    if q.kind == "urp-shape":
        target = BROKER_LOSS if choice == "level" else SLOW_FOLLOWER if choice == "moving" else None
    elif yes:
        target = q.refs[0] if q.refs else state.entry
    # "No" to a question rules nothing out by itself (the step asked about one branch); "it rules
    # this out" to an instruction does, and so does "no" to the GC question inside gc-pauses.
    rules_out = choice == "rules-out" or (no and q.kind == "gc" and state.entry == GC_PAUSES)
    _apply(
        state,
        ctx,
        Outcome(
            f"{q.text if q.kind != 'step' else 'you answered'}: {label}",
            "you",
            "bad" if yes else "neutral",
            target,
            rules_out,
        ),
        text,
        step,
    )
    return await _walk(state, ctx, await _live(ctx, state.cluster))
