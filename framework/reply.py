"""The transport-neutral answer every command returns.

Commands build a Reply out of plain data; renderers (bot/render.py) turn it into Slack Block Kit,
terminal text or JSON. Nothing here knows about Slack.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Literal, Optional

# "unknown": the bot could not see whether the symptom is present (no cluster, a source down).
Severity = Literal["ok", "info", "warning", "critical", "error", "unknown"]
# How the answer came about, for scripts (JSON) and the audit log.
Outcome = Literal["answered", "partial", "source_down", "bad_input", "failed"]
# Bumped when a field of the JSON form changes meaning or goes away (adding one does not).
SCHEMA_VERSION = 2
Cell = str | int | float | None


@dataclass
class Evidence:
    """One thing the bot observed, and where it observed it."""

    label: str
    value: str
    source: str  # "kb", "live: <admin call>", "lake: <query>"
    status: Literal["ok", "bad", "neutral"] = "neutral"


# How a source of evidence fared for one answer (framework/sources.py): answered ("read", or "slow"
# when it answered late), did not answer in time, answered with an error, or is not set up here.
SourceState = Literal["read", "slow", "no answer", "failed", "not configured"]


@dataclass
class SourceRead:
    """One evidence source the answer read: "admin", "metadata 103", "exporter 101", "lake", "probe 102"."""

    source: str
    state: SourceState
    seconds: float | None = None  # how long the read took, or waited before giving up
    detail: str = ""  # why it failed, when it did
    node: int | None = None  # the node a per-node read asked


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
    destroys_data: bool = False  # never offered as a numbered "do now" step
    # moves data or weakens durability (or follows such a step): withheld while the cause is undecided
    confirmed_only: bool = False


@dataclass
class Table:
    """Rows of plain values (numbers stay numbers) under named columns: rendered as a Block Kit
    table, aligned terminal columns, or a JSON array of objects."""

    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    more: int = 0  # rows left out of ``rows`` (the full answer or a narrower question has them)

    def records(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


@dataclass
class Series:
    """A time series to chart: points are (UTC ISO time, value)."""

    title: str
    unit: str
    points: list[tuple[str, float]] = field(default_factory=list)
    window: tuple[str, str] | None = None  # the incident window to mark, UTC ISO times
    label: str = ""  # the series' name in a legend ("broker 101")


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
    mechanism_note: str = ""  # why no source line applies, for an entry without mechanism lines
    # titles of the causes the evidence cannot tell this one apart from (its look-alikes): its
    # steps are then the ones that gather the deciding evidence
    undecided_with: list[str] = field(default_factory=list)


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
class Ask:
    """People the answer asks for something (a second approver): Slack user ids (U…/W…) and user
    group ids (S…). Slack posts ``text`` as a new message in the thread that mentions them, so
    they are notified; the terminal names them."""

    users: list[str]
    groups: list[str]
    text: str


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
    # parts of the answer not read for want of a right, each naming the grant (framework/partial.py)
    missing: list[str] = field(default_factory=list)
    window: str | None = None  # the time window the evidence covers, when it has one
    tables: list[Table] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    outcome: Outcome = "answered"
    # the symptom is absent now and what the reading showed is explained (a cluster's own start, a
    # broker back from a restart): the causes are possibilities to know, not steps to take now
    settled: bool = False
    more_command: str | None = None  # the /kafka text that gives the full answer (--full)
    ask: Ask | None = None  # whom to notify in the thread (a high-risk action's approvers)
    # every evidence source this answer read and how each fared (framework/sources.py)
    sources: list[SourceRead] = field(default_factory=list)
    # Not data: set when slower evidence (the metric lake) is still being gathered; resolves to
    # the complete Reply. Transports that can show it later do; others wait (framework.dispatch).
    later: Optional[Awaitable["Reply"]] = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (plain dicts, lists and scalars); its values differ per field."""
        data = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "later"}
        data["schema_version"] = SCHEMA_VERSION
        data["tables"] = [
            {"title": t.title, "columns": t.columns, "rows": t.records(), "more": t.more} for t in self.tables
        ]
        data["series"] = [{**asdict(s), "points": [{"time": t, "value": v} for t, v in s.points]} for s in self.series]
        return data


def _plain(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def error_reply(message: str, suggestions: list[str] | None = None, title: str = "Cannot answer that") -> Reply:
    """A short, clear refusal: what went wrong and what to try instead."""
    return Reply(
        title=title,
        severity="error",
        outcome="bad_input",
        verdict=message,
        followups=[f"Try: {s}" for s in (suggestions or [])],
    )
