"""The transport-neutral answer every command returns.

Commands build a Reply out of plain data; renderers (bot/render.py) turn it into Slack Block Kit,
terminal text or JSON. Nothing here knows about Slack.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Severity = Literal["ok", "info", "warning", "critical", "error"]


@dataclass
class Evidence:
    """One thing the bot observed, and where it observed it."""

    label: str
    value: str
    source: str  # "kb", "live: <admin call>", "lake: <query>"
    status: Literal["ok", "bad", "neutral"] = "neutral"


@dataclass
class SourceLine:
    """A line of Kafka source that produces the behaviour, with a link at the cited commit."""

    label: str  # "Partition.scala:232"
    symbol: str
    does: str
    url: str


@dataclass
class Step:
    text: str
    command: str | None = None
    config: dict[str, str] | None = None


@dataclass
class Diagnosis:
    entry_id: str
    title: str
    cause: str
    mechanism: list[SourceLine] = field(default_factory=list)
    mitigation: list[Step] = field(default_factory=list)
    do_not: list[str] = field(default_factory=list)
    first_steps: list[str] = field(default_factory=list)
    why_ranked: str = ""  # what made this entry match: "symptom UnderReplicatedPartitions", ...


@dataclass
class Section:
    """A titled list of lines, for content that is not a diagnosis (help, a full runbook entry)."""

    heading: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Action:
    """Something the user can do next; mutating actions go through the confirmation gate."""

    label: str
    command: str  # the /kafka text that runs it
    mutating: bool = False


@dataclass
class Reply:
    title: str
    severity: Severity = "info"
    verdict: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    followups: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    window: str | None = None  # the time window the evidence covers, when it has one

    def to_dict(self) -> dict:
        return asdict(self)


def error_reply(message: str, suggestions: list[str] | None = None, title: str = "Cannot answer that") -> Reply:
    """A short, clear refusal: what went wrong and what to try instead."""
    return Reply(
        title=title,
        severity="error",
        verdict=message,
        followups=[f"Try: {s}" for s in (suggestions or [])],
    )
