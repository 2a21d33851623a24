"""What a live check found: the shape every check returns, for `why` and the category commands."""

from __future__ import annotations

from dataclasses import dataclass, field

from .reply import Action, Evidence, Severity


@dataclass(frozen=True)
class LiveFacts:
    """What a live read counted, for checking the metric lake's lines in the same answer against
    it (``commands.lake_vs_live``): the lake's data always ends before the live read, and a line
    that disagrees with the cluster as it is now must say so."""

    under_replicated: int
    offline: int
    missing_brokers: frozenset[int]  # expected but not registered now (gone, fenced, cut off)


@dataclass
class LiveFindings:
    verdict: str
    severity: Severity
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (entry id, what the data showed)
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: LiveFacts | None = None
