"""What a live check found: the shape every check returns, for `why` and the category commands."""

from __future__ import annotations

from dataclasses import dataclass, field

from .reply import Action, Evidence, Severity


@dataclass
class LiveFindings:
    verdict: str
    severity: Severity
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (entry id, what the data showed)
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
