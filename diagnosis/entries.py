"""Turn runbook entries into the Reply's Diagnosis items (shared by `why`, `runbook` and live checks)."""

from __future__ import annotations

from dataclasses import replace

from framework.reply import Diagnosis, SourceLine, Step
from runbook_kb import KnowledgeBase
from runbook_kb.schema import FailureMode


def source_lines(kb: KnowledgeBase, entry: FailureMode) -> list[SourceLine]:
    return [
        SourceLine(label=ref.label, symbol=ref.symbol, does=ref.does, url=kb.ref_link(ref)) for ref in entry.mechanism
    ]


def diagnosis(kb: KnowledgeBase, entry: FailureMode, reason: str = "", first_steps: int | None = 3) -> Diagnosis:
    """One entry as a diagnosis; ``first_steps`` limits the triage shown (None = all)."""
    return Diagnosis(
        entry_id=entry.id,
        title=entry.title,
        cause=entry.cause,
        mechanism=source_lines(kb, entry),
        mitigation=[
            Step(
                text=s.action,
                command=s.command,
                config=s.config,
                destroys_data=s.destroys_data,
                confirmed_only=s.confirmed_only,
            )
            for s in entry.mitigation
        ],
        do_not=[f"{d.action}: {d.why}" for d in entry.do_not],
        first_steps=list(entry.triage if first_steps is None else entry.triage[:first_steps]),
        why_ranked=reason,
        mechanism_note=" ".join((entry.no_source_line or "").split()),
    )


def hold_unconfirmed(d: Diagnosis) -> tuple[Diagnosis, list[str]]:
    """The diagnosis without the steps the runbook gives only for a confirmed cause (they move data
    or weaken durability: reassign away, unclean election), and the first sentence of each one held
    back. A cause reached without the confirming evidence (an undecided `why`, a triage walk on
    the engineer's answers) must not advise them."""
    held = [s.text.split(". ")[0].rstrip(".") for s in d.mitigation if s.confirmed_only]
    return replace(d, mitigation=[s for s in d.mitigation if not s.confirmed_only]), held
