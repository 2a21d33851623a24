"""What a live check found: the shape every check returns, for `why` and the category commands."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.reply import Action, Evidence, Severity, Step


@dataclass(frozen=True)
class LiveFacts:
    """What a live read counted, for checking the metric lake's lines in the same answer against
    it (``diagnosis.lake_vs_live``): the lake's data always ends before the live read, and a line
    that disagrees with the cluster as it is now must say so."""

    under_replicated: int
    offline: int
    missing_brokers: frozenset[int]  # expected but not registered now (gone, fenced, cut off)
    # broker -> how many of its replicas are out of their partition's ISR now: where the missing
    # replicas are (the lake only knows which leaders report URP)
    out_of_isr: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ExpectedCause:
    """What the cluster shows is an operation someone started, not a fault (a reassignment still
    copying): no runbook failure mode covers it, so the live check writes the steps from what it
    read, and the runbook's reference topic ``topic`` explains the behaviour. `why` puts it first,
    with the failure modes the symptom also matches as the causes considered."""

    topic: str  # a reference topic id (runbook_kb/data/reference/topics.yaml)
    title: str
    reason: str  # what the data showed: "live: ..."
    steps: list[Step] = field(default_factory=list)
    do_not: list[str] = field(default_factory=list)  # "what: why"


@dataclass(frozen=True)
class Undecided:
    """What the cluster shows fits the cause ranked first and its look-alikes (the runbook's
    ``look_alikes``) alike, and nothing read from here tells them apart. `why` then withholds that
    cause's confirmed_only steps (moving replicas away on a guess), puts ``steps`` first (they
    gather the deciding evidence), and lists each look-alike with its reason."""

    entry: str  # the cause ranked first (the runbook's triage order)
    reasons: dict[str, str]  # look-alike entry id -> "undecided: cannot be told from here ...: <what decides>"
    steps: list[Step] = field(default_factory=list)


@dataclass
class LiveFindings:
    verdict: str
    severity: Severity
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (entry id, what the data showed)
    actions: list[Action] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: LiveFacts | None = None
    expected: ExpectedCause | None = None  # set when no fault explains the symptom, only an operation
    undecided: Undecided | None = None  # set when the evidence cannot tell the top cause from a look-alike
    settled: bool = False  # nothing is wrong now and the reading is explained: no steps to take (Reply.settled)
