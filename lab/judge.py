"""Judge the bot's answer from the outside of its JSON (Reply.to_dict()).

A good answer: the expected runbook entry first (a failure mode, or the reference topic of an
operation that explains the symptom, e.g. a reassignment in progress), the entity the fault hit
named in the verdict or evidence, that entry's mechanism source lines exactly as the knowledge base
lists them (read from the KB, never restated here; a reference topic has none), the expected severity, and all of it within 3 s of asking on an idle
machine (longer in proportion on a busy one: see answer_budget).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass

ANSWER_BUDGET_S = 3.0


def answer_budget(load: float | None = None, cores: int | None = None, idle_s: float = ANSWER_BUDGET_S) -> float:
    """``idle_s`` (ANSWER_BUDGET_S), stretched by how many runnable processes share each core: at
    load 15 on 2 cores the bot gets about a seventh of the CPU it has idle, and a lab run on a busy
    machine (CI, a developer's laptop) must judge the answer, not the machine. The seconds are
    reported either way."""
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    return idle_s * max(1.0, load / cores)


@dataclass(frozen=True)
class Judgement:
    top1: str | None
    top1_ok: bool
    named: list[str]  # what the answer had to name
    named_missing: list[str]
    mechanism_ok: bool
    severity: str | None
    severity_ok: bool
    seconds: float
    fast: bool
    budget_s: float = ANSWER_BUDGET_S

    @property
    def named_ok(self) -> bool:
        return not self.named_missing

    @property
    def passed(self) -> bool:
        return self.top1_ok and self.named_ok and self.mechanism_ok and self.severity_ok and self.fast

    def failures(self) -> list[str]:
        out = []
        if not self.top1_ok:
            out.append(f"top-1 {self.top1!r}")
        if self.named_missing:
            out.append(f"does not name {', '.join(self.named_missing)}")
        if not self.mechanism_ok:
            out.append("mechanism lines differ from the runbook entry's")
        if not self.severity_ok:
            out.append(f"severity {self.severity!r}")
        if not self.fast:
            out.append(f"{self.seconds:.1f} s > {self.budget_s:.3g} s")
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "named_ok": self.named_ok, "passed": self.passed, "failures": self.failures()}


def answer_text(reply: dict) -> str:
    """The parts of a reply where an engineer reads what was hit: verdict and evidence."""
    parts = [reply.get("verdict") or ""]
    for e in reply.get("evidence") or []:
        parts.append(f"{e.get('label', '')}: {e.get('value', '')}")
    return "\n".join(parts)


def names(text: str, entity: str) -> bool:
    """``entity`` appears as a whole token: '102' must not match inside '1,102' or 'lab-102x';
    a topic counts as named by one of its partitions ('orders' in 'orders-3')."""
    return re.search(rf"(?<![\w.,-]){re.escape(entity)}(?!\w|-[^\d])", text, re.IGNORECASE) is not None


def judge(
    reply: dict,
    seconds: float,
    *,
    expect_entry: str,
    expect_severity: str,
    named: list[str],
    kb,
    expect_verdict: str = "",
    not_top: str = "",
    budget_s: float | None = None,
) -> Judgement:
    budget = answer_budget() if budget_s is None else budget_s
    diagnoses = reply.get("diagnoses") or []
    top = diagnoses[0] if diagnoses else None
    top1 = top.get("entry_id") if top else None
    text = answer_text(reply)
    if not expect_entry:
        # No runbook entry is the cause: the verdict must say what is, and the entry a wrong
        # answer would lead with must not come first. There is no mechanism line to compare.
        ok = expect_verdict in (reply.get("verdict") or "") and top1 != not_top
        return Judgement(
            top1=top1 if not ok else f"verdict: {expect_verdict}",
            top1_ok=ok,
            named=list(named),
            named_missing=[n for n in named if not names(text, str(n))],
            mechanism_ok=True,
            severity=reply.get("severity"),
            severity_ok=reply.get("severity") == expect_severity,
            seconds=seconds,
            fast=seconds <= budget,
            budget_s=budget,
        )
    # A reference topic (an operation such as a reassignment, not a fault) has no mechanism lines.
    entry = kb.failure_modes.get(expect_entry)
    want_lines = [ref.label for ref in entry.mechanism] if entry is not None else []
    got_lines = [m.get("label") for m in (top.get("mechanism") or [])] if top else None
    # an entry that comes first may still have to say something in the verdict (that its cause
    # cannot be told from a look-alike from here, say)
    said = expect_verdict in (reply.get("verdict") or "")
    return Judgement(
        top1=top1 if said else f"{top1}, verdict without: {expect_verdict}",
        top1_ok=top1 == expect_entry and said,
        named=list(named),
        named_missing=[n for n in named if not names(text, str(n))],
        mechanism_ok=top1 == expect_entry and got_lines == want_lines,
        severity=reply.get("severity"),
        severity_ok=reply.get("severity") == expect_severity,
        seconds=seconds,
        fast=seconds <= budget,
        budget_s=budget,
    )
