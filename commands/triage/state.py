"""The triage state: plain data a walk resumes from, whichever process or thread picks it up.

A ``TriageState`` holds where the walk is (the entry and its step), what it learnt (probe facts,
the human's answers, one ``Record`` per step answered), the open ``Question`` if any, and the
``conclusion`` once there is one. ``to_dict``/``from_dict`` are exact inverses over JSON, so the
store (store.py) keeps it as one JSON document per thread and the engine (engine.py) never knows
where it was kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

# The triage token: also the thread key in the store. Checked before any lookup, so a token can
# never be anything but 12 hex digits (it once named a file).
TOKEN = re.compile(r"^[0-9a-f]{12}$")

# A stale button, a second click, or two people answering at once: the engine and the store say the same.
ALREADY_ANSWERED = "That question was already answered or belongs to another step of this triage."

# The answer buttons' labels, by the choice a question offers.
LABELS = {
    "yes": "Yes",
    "no": "No",
    "unknown": "Don't know",
    "confirms": "It points here",
    "rules-out": "It rules this out",
    "skip": "Skip",
    "level": "Level (flat)",
    "moving": "Moving up and down",
}

Status = Literal["ok", "bad", "neutral"]
QuestionKind = Literal["step", "gc", "urp-shape", "maintenance"]
# Probe results by probe name (JSON values: lists, numbers, strings), plus the human's answers
# ("maintenance") and the suspect broker: what the walk knows, reused by every later step.
Facts = dict[str, Any]


class Conclusion(TypedDict):
    entry: str | None  # None: every candidate was ruled out
    reason: str


@dataclass
class Question:
    id: str
    text: str
    choices: list[str]
    kind: str  # a QuestionKind; kept a str so a state written by another version still loads
    refs: list[str] = field(default_factory=list)  # entries the step names ("then follow gc-pauses")


@dataclass
class Record:
    entry: str
    step: int  # index in the entry's triage; -1 for the bot's own follow-up question
    text: str
    answer: str
    source: str
    status: str = "neutral"


@dataclass
class Outcome:
    """What one probe's judge (or the human's answer) says about the step being walked."""

    answer: str
    source: str
    status: Status = "neutral"
    points_to: str | None = None  # an entry the evidence points at: the walk switches there, once
    rules_out: bool = False  # the evidence rules the current entry out: the next candidate is walked


@dataclass
class TriageState:
    token: str
    symptom: str
    cluster: str | None
    candidates: list[str]
    entry: str
    step: int = 0
    records: list[Record] = field(default_factory=list)
    facts: Facts = field(default_factory=dict)
    visited: list[str] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)
    support: dict[str, list[str]] = field(default_factory=dict)  # entry -> [what pointed at it]
    question: Question | None = None
    conclusion: Conclusion | None = None
    asked: int = 0

    @property
    def done(self) -> bool:
        return self.conclusion is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TriageState:
        fields = dict(data)
        fields["records"] = [Record(**r) for r in fields.get("records", [])]
        fields["question"] = Question(**fields["question"]) if fields.get("question") else None
        return cls(**fields)
