"""What a short answer shows, and in what order: the part every transport shares.

An on-call engineer reads the first lines and acts, so a diagnosis answer is laid out as
1. the verdict line (severity, top cause, the entity),
2. do now: the first mitigation steps of the top cause, with the "do not" warnings right beside
   them (a step that destroys data is never numbered: it sits with the warnings, as a last resort),
3. the evidence, 4. why (one source line), 5. other causes considered (one line each),
6. more (the full runbook, next commands, actions).
The renderers (bot/render.py, bot/render_slack.py) draw this for the terminal and for Slack; ``--full`` renders the
whole Reply instead. Nothing here formats for a transport.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from framework.reply import Diagnosis, Reply, SourceLine, Step

DO_NOW_STEPS = 3
SHORT_STEP_CHARS = 200
SHORT_WHY_CHARS = 160
EVIDENCE_ROWS = 8
SECTION_LINES = 20
SEVERITY_WORD = {
    "critical": "CRITICAL",
    "warning": "WARNING",
    "ok": "OK",
    "unknown": "UNKNOWN",
    "error": "ERROR",
    "info": "INFO",
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def first_sentence(text: str, limit: int) -> str:
    """The first sentence of ``text`` (all of it when short), clipped at ``limit`` on a word."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(text) > limit:
        cut = text.rfind(" ", 0, limit - 1)
        text = text[: cut if cut > limit // 2 else limit - 1].rstrip(",;: ") + "…"
    return text


@dataclass
class Caution:
    """A "do not" (what, why) or a last-resort step that destroys data."""

    what: str
    why: str = ""
    last_resort: bool = False


@dataclass
class ShortAnswer:
    severity: str
    verdict: str
    heading: str  # "Do now: Broker loss", "Check first: ..." or ""
    steps: list[Step] = field(default_factory=list)
    warnings: list[Caution] = field(default_factory=list)
    why: SourceLine | None = None
    why_note: str = ""  # the top cause's mechanism when it has no source line
    others: list[str] = field(default_factory=list)  # "Slow follower: ranks lower: ..."
    others_heading: str = "Other causes considered"
    evidence_left_out: int = 0
    sections_left_out: int = 0
    more: list[str] = field(default_factory=list)

    @property
    def shortened(self) -> bool:
        return bool(self.evidence_left_out or self.sections_left_out)


def _split_do_not(text: str) -> Caution:
    what, sep, why = text.partition(": ")
    return Caution(what.rstrip("."), first_sentence(why, SHORT_WHY_CHARS) if sep else "")


def _short_step(step: Step) -> Step:
    return Step(
        first_sentence(step.text, SHORT_STEP_CHARS), step.command, step.config, step.destroys_data, step.confirmed_only
    )


UNDECIDED = "undecided: "  # a cause's why_ranked when the evidence cannot tell it from the top one


def _rank_note(top: Diagnosis, other: Diagnosis) -> str:
    """Why ``other`` ranks below ``top``: the evidence behind the top one, or the runbook's order."""
    top_live = top.why_ranked.startswith(("live", "lake"))
    other_live = other.why_ranked.startswith(("live", "lake"))
    if other.why_ranked.startswith(UNDECIDED):
        # a look-alike of the top cause the evidence cannot rule out: say what would decide it
        basis = other.why_ranked.removeprefix(UNDECIDED)
    elif top_live and not other_live:
        basis = (
            f"no evidence points at it (runbook match: {other.why_ranked})"
            if other.why_ranked
            else "no evidence points at it"
        )
    elif other.why_ranked:
        basis = other.why_ranked
    else:
        basis = "lower in the runbook's ranking"
    return f"{other.title}: {basis}"


def short_answer(reply: Reply) -> ShortAnswer:
    """The short layout of ``reply``. Severity "ok" means the symptom is absent now, and a settled
    reply that what the reading showed is explained: no steps, and the causes become one-line
    possibilities. Without live evidence ("unknown"), the top cause's first checks come before its
    mitigation."""
    answer = ShortAnswer(severity=reply.severity, verdict=reply.verdict, heading="")
    top = reply.diagnoses[0] if reply.diagnoses else None
    if top is not None:
        if reply.severity == "ok" or reply.settled:
            answer.others_heading = "Possible causes if it comes back"
            answer.others = [f"{d.title}: {first_sentence(d.cause, SHORT_WHY_CHARS)}" for d in reply.diagnoses]
        else:
            doable = [s for s in top.mitigation if not s.destroys_data]
            if reply.severity == "unknown" and top.first_steps:
                answer.heading = f"Check first: {top.title}"
                answer.steps = [Step(first_sentence(s, SHORT_STEP_CHARS)) for s in top.first_steps[:DO_NOW_STEPS]]
            elif top.undecided_with:
                # the evidence fits look-alikes too: its first steps gather what decides between them
                answer.heading = f"Check first: {' or '.join([top.title, *top.undecided_with])}"
                answer.steps = [_short_step(s) for s in doable[:DO_NOW_STEPS]]
            else:
                answer.heading = f"Do now: {top.title}"
                answer.steps = [_short_step(s) for s in doable[:DO_NOW_STEPS]]
            answer.warnings = [_split_do_not(x) for x in top.do_not]
            answer.warnings += [
                Caution(first_sentence(s.text, SHORT_STEP_CHARS), last_resort=True)
                for s in top.mitigation
                if s.destroys_data
            ]
            answer.others = [_rank_note(top, d) for d in reply.diagnoses[1:]]
        if top.mechanism:
            answer.why = top.mechanism[0]
        elif top.mechanism_note:
            answer.why_note = first_sentence(top.mechanism_note, 2 * SHORT_WHY_CHARS)
        answer.more.append(f"/kafka runbook {top.entry_id}")
    answer.evidence_left_out = max(0, len(reply.evidence) - EVIDENCE_ROWS)
    answer.sections_left_out = sum(max(0, len(s.lines) - SECTION_LINES) for s in reply.sections)
    for f in reply.followups:
        cmd = f.removeprefix("Try: ")
        if cmd not in answer.more:
            answer.more.append(cmd)
    if reply.more_command and (top is not None or answer.shortened):
        answer.more.append(f"/kafka {reply.more_command}")
    return answer


# ---- advice per transport ------------------------------------------------------------------------
# A message may carry advice that only makes sense where it is read: "run `kbot cluster up`" helps
# at the bot's terminal and confuses a Slack user. Such parts are written [[terminal: ...]] or
# [[slack: ...]]; each renderer keeps its own and drops the other's.
_ADVICE = re.compile(r"\s*\[\[(terminal|slack): (.*?)\]\]", re.S)


def for_transport(text: str, transport: str) -> str:
    return _ADVICE.sub(lambda m: f" {m.group(2)}" if m.group(1) == transport else "", text)


def localize(reply: Reply, transport: str) -> Reply:
    """A copy of ``reply`` whose user-facing text keeps only ``transport``'s advice."""
    import dataclasses

    def fix(text: str) -> str:
        return for_transport(text, transport) if "[[" in text else text

    return dataclasses.replace(
        reply,
        verdict=fix(reply.verdict),
        notes=[fix(n) for n in reply.notes],
        followups=[fix(f) for f in reply.followups],
        evidence=[dataclasses.replace(e, value=fix(e.value)) for e in reply.evidence],
        sections=[dataclasses.replace(s, lines=[fix(line) for line in s.lines]) for s in reply.sections],
    )
