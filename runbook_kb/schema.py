"""The runbook knowledge base's schema.

Knowledge lives in YAML files under ``runbook_kb/data``; these pydantic models are the only
place its shape is defined. Every model forbids unknown keys so a typo in a data file is an
error, not silently ignored knowledge.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

Family = Literal["replication", "storage", "control-plane", "saturation", "client"]
LimitClass = Literal["HARD", "SOFT", "EMERGENT"]

_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# "Partition.scala:1133" or "ReplicationConfigs.java:55" - one file, one line.
_SOURCE_LOC = re.compile(r"^(?P<file>[A-Za-z0-9_]+\.(?:scala|java)):(?P<line>\d+)$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceRef(Strict):
    """One place in the Kafka source that produces (part of) a behaviour."""

    file: str = Field(description="File name as listed in kafka-source-paths.tsv, e.g. Partition.scala")
    lines: list[int] = Field(min_length=1, description="Line number(s) at the knowledge base's source commit")
    symbol: str = Field(min_length=1, description="Method, constant or class at those lines")
    does: str = Field(min_length=10, description="What that code does, in our words")
    commit: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{7,40}$",
        description=(
            "The apache/kafka commit the lines were read at, when it is not the knowledge base's source "
            "commit (meta.yaml): causes the runbook does not cover are sourced from the code directly"
        ),
    )

    @field_validator("lines")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(n <= 0 for n in v):
            raise ValueError("line numbers must be positive")
        return v

    @property
    def label(self) -> str:
        return f"{self.file}:{', '.join(str(n) for n in self.lines)}"


def parse_source_loc(text: str) -> tuple[str, int]:
    m = _SOURCE_LOC.match(text)
    if not m:
        raise ValueError(f"expected 'File.scala:LINE' or 'File.java:LINE', got {text!r}")
    return m["file"], int(m["line"])


def _check_loc(v: str | None) -> str | None:
    if v is not None:
        parse_source_loc(v)
    return v


# A single "File.java:LINE" pointer (config defaults, constants), or nothing.
OptionalSourceLoc = Annotated[str | None, AfterValidator(_check_loc)]


class Symptom(Strict):
    metric: str = Field(min_length=2, description="Metric name, error or log line the operator sees")
    mbean: str | None = Field(default=None, description="Full JMX MBean name where the metric has one")
    condition: str = Field(min_length=2, description="When it counts as the symptom, e.g. '> 0 and flat'")
    signature: str | None = Field(default=None, description="What tells this failure apart from look-alikes")


class Lever(Strict):
    """Something an operator can change, and what kind of limit it is."""

    name: str = Field(min_length=2)
    limit_class: LimitClass
    default: str | None = None
    source: OptionalSourceLoc = Field(
        default=None, description="File.java:LINE where the default or constant is defined"
    )
    effect: str = Field(min_length=10)


class Step(Strict):
    action: str = Field(min_length=5)
    command: str | None = Field(default=None, description="Exact command line, if the step has one")
    config: dict[str, str] | None = Field(default=None, description="Exact config keys and values to set")
    destroys_data: bool = Field(
        default=False,
        description=(
            "The step can throw acknowledged records away (an unclean election): answers never put it in "
            "the numbered 'do now' list, only beside the warnings as a last resort"
        ),
    )
    confirmed_only: bool = Field(
        default=False,
        description=(
            "The step moves data or weakens durability (replicas reassigned away, min ISR lowered), or "
            "follows one: answers show it only when the evidence confirms this entry's cause, never while "
            "a look-alike (look_alikes) cannot be ruled out"
        ),
    )

    @model_validator(mode="after")
    def _unclean_is_marked(self) -> "Step":
        # Turning unclean election on is the one data-destroying lever the runbook offers; an entry
        # that forgets the flag would put it in an on-call engineer's numbered list.
        enables_unclean = (self.config or {}).get("unclean.leader.election.enable") == "true" or (
            "unclean.leader.election.enable=true" in (self.command or "")
        )
        if enables_unclean and not self.destroys_data:
            raise ValueError("a step that enables unclean leader election must say destroys_data: true")
        return self


class DoNot(Strict):
    action: str = Field(min_length=5)
    why: str = Field(min_length=10)


class LookAlike(Strict):
    """Another entry that the same outside evidence fits: what makes the two look the same, and
    the observation (and the steps to get it) that tells them apart."""

    entry: str = Field(description="The other failure mode's id")
    when: str = Field(min_length=10, description="What the bot sees from outside that both causes produce")
    decides: str = Field(min_length=10, description="The observation that tells them apart, where to read it")
    steps: list[Step] = Field(min_length=1, description="What gathers the deciding evidence, first")


class Empirical(Strict):
    claim: str = Field(min_length=10)
    source: str = Field(min_length=2, description="The named source of an empirical figure")


class Bindings(Strict):
    """Which of the bot's functions gather evidence for an entry, by the names they are registered
    under (diagnosis/*_checks.py, diagnosis/lake_evidence.py, commands/triage/probes.py). The runbook says
    what to check; the Python side only holds the functions. A test fails when a name here has no
    function or a function is bound to no entry."""

    live: str | None = Field(default=None, description="the live check run by `why` for this entry")
    lake: str | None = Field(default=None, description="the metric-lake check run by `why` for this entry")
    triage: dict[int, list[str]] = Field(
        default_factory=dict,
        description=("triage step index (0-based) -> the probes that answer that step from the cluster"),
    )
    thresholds: dict[str, float] = Field(
        default_factory=dict,
        description=("numbers the checks and suggested actions of this entry use, by name (units in the name)"),
    )


class FailureMode(Strict):
    id: str
    title: str = Field(min_length=3)
    aliases: list[str] = Field(min_length=1)
    family: Family
    cause: str = Field(min_length=20)
    symptoms: list[Symptom] = Field(min_length=1)
    errors: list[str] = Field(default_factory=list, description="Client errors / exceptions that point here")
    configs: list[str] = Field(default_factory=list, description="Config keys involved")
    mechanism: list[SourceRef] = Field(default_factory=list)
    mechanism_notes: list[str] = Field(
        default_factory=list, description="Mechanism without a source line (architecture)"
    )
    no_source_line: str | None = Field(
        default=None,
        min_length=40,
        description=(
            "Required when mechanism is empty: why no line of Kafka's broker source produces this "
            "behaviour (it lives in the client, the OS ...), naming what does"
        ),
    )
    levers: list[Lever] = Field(min_length=1)
    triage: list[str] = Field(min_length=1, description="First diagnostic steps, in order")
    mitigation: list[Step] = Field(min_length=1)
    do_not: list[DoNot] = Field(default_factory=list)
    empirical: list[Empirical] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    look_alikes: list[LookAlike] = Field(
        default_factory=list,
        description="Entries the bot cannot tell this one apart from by what it reads from outside",
    )
    checks: Bindings = Field(default_factory=Bindings)

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("id must be lower-case words joined by '-'")
        return v

    @model_validator(mode="after")
    def _mechanism_or_why_none(self) -> "FailureMode":
        # Every answer cites the line that produces the behaviour; an entry without one says why.
        if not self.mechanism and not self.no_source_line:
            raise ValueError("an entry without mechanism source lines must say why in no_source_line")
        if self.mechanism and self.no_source_line:
            raise ValueError("no_source_line is only for entries without mechanism source lines")
        return self

    @model_validator(mode="after")
    def _triage_bindings_in_range(self) -> "FailureMode":
        bad = [i for i in self.checks.triage if not 0 <= i < len(self.triage)]
        if bad:
            raise ValueError(f"checks.triage binds step(s) {bad}, but the entry has {len(self.triage)} triage steps")
        return self


# ---- reference knowledge (seeds 001-004 and the runbook's tables) ---------------------------


class PartitionCategory(Strict):
    id: str
    name: str
    definition: str = Field(min_length=10)
    metric: str
    mbean: str | None = None
    client_impact: str = Field(min_length=5)


class ExampleStep(Strict):
    event: str
    isr: list[int]
    categories: list[str] = Field(min_length=1)


class WorkedExample(Strict):
    title: str
    replication_factor: int = Field(ge=1)
    min_insync_replicas: int = Field(ge=1)
    initial_isr: list[int]
    steps: list[ExampleStep] = Field(min_length=1)
    lesson: str


class Fact(Strict):
    """A single statement of reference knowledge with an optional named source."""

    topic: str
    text: str = Field(min_length=10)
    source: str | None = None


class PartitionCategories(Strict):
    categories: list[PartitionCategory] = Field(min_length=4)
    examples: list[WorkedExample] = Field(min_length=1)
    facts: list[Fact] = Field(default_factory=list)


class DurabilityRow(Strict):
    acks: str
    min_insync_replicas: str
    replication_factor: str
    tolerates: str
    outcome: str


class RfRecommendation(Strict):
    use_case: str
    replication_factor: int
    min_insync_replicas: int
    rationale: str


class Durability(Strict):
    matrix: list[DurabilityRow] = Field(min_length=1)
    rf_recommendations: list[RfRecommendation] = Field(min_length=1)
    facts: list[Fact] = Field(default_factory=list)


class LatencyComponent(Strict):
    metric: str
    entries: list[str] = Field(
        default_factory=list, description="Failure-mode ids a high value of this part points at, most likely first"
    )
    mbean: str | None = None
    stage: str
    high_means: str
    look_at: list[str] = Field(default_factory=list)


class Latency(Strict):
    components: list[LatencyComponent] = Field(min_length=1)
    alert_p99_ms: dict[str, float] = Field(
        default_factory=dict,
        description="Request type -> the TotalTimeMs p99 (ms) above which a broker is warned about",
    )
    facts: list[Fact] = Field(default_factory=list)


class ConfigDefault(Strict):
    key: str
    default: str
    scope: Literal["broker", "topic", "producer", "consumer", "controller", "client"]
    source: OptionalSourceLoc = None
    meaning: str = Field(min_length=5)
    guidance: str | None = None


class Configs(Strict):
    configs: list[ConfigDefault] = Field(min_length=1)


class Metric(Strict):
    name: str
    mbean: str | None = None
    kind: str | None = Field(default=None, description="gauge, meter, histogram, client metric ...")
    meaning: str = Field(min_length=5)
    healthy: str | None = None


class Alert(Strict):
    metric: str
    condition: str
    severity: Literal["critical", "warning", "info"]
    meaning: str
    runbook: list[str] = Field(default_factory=list, description="Failure-mode ids to open")


class Signals(Strict):
    metrics: list[Metric] = Field(min_length=1)
    alerts: list[Alert] = Field(min_length=1)


def _fields_of(template: str) -> set[str]:
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(template) if name is not None}


class ReplicaCause(Strict):
    """One reason a replica is out of its ISR that the live checks tell apart (diagnosis/rules.py
    missing_replicas), and how an answer states it: ``broker {b} is <state>`` where the rules say
    why, ``<state>; <count>`` beside the broker in the evidence."""

    id: str = Field(description="The cause as the rules name it: a failure-mode id, or a finer case of one")
    entry: str | None = Field(
        description="The failure mode it concludes; none for a cause that is no fault (a reassignment)"
    )
    rank: int = Field(ge=0, description="When several causes are present, which to chase first (lowest first)")
    state: str = Field(min_length=10, description="Completes 'broker {b} is ...'; {dirs}: its failed log directories")
    count: str = Field(min_length=10, description="What it costs; {n}: the replicas (or partitions) concerned")

    @field_validator("state")
    @classmethod
    def _state_fields(cls, v: str) -> str:
        if not _fields_of(v) <= {"dirs"}:
            raise ValueError(f"state may only use {{dirs}}, not {sorted(_fields_of(v) - {'dirs'})}")
        return v

    @field_validator("count")
    @classmethod
    def _count_fields(cls, v: str) -> str:
        if _fields_of(v) != {"n"}:
            raise ValueError("count must use {n} (the replicas or partitions concerned), and nothing else")
        return v


class MissingReplicas(Strict):
    """Why replicas are out of their ISRs: one row per cause, each stated once."""

    causes: list[ReplicaCause] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "MissingReplicas":
        ids = [c.id for c in self.causes]
        if len(ids) != len(set(ids)):
            raise ValueError(f"cause ids must be unique: {sorted({i for i in ids if ids.count(i) > 1})}")
        return self

    def cause(self, cause_id: str) -> ReplicaCause:
        return next(c for c in self.causes if c.id == cause_id)


class Topics(Strict):
    """Free reference topics (ISR membership, HW/LEO, elections...) as lists of facts."""

    facts: list[Fact] = Field(min_length=1)


# ---- answerable reference topics --------------------------------------------------------------


class TopicSource(Strict):
    """Which part of a reference file a topic answers with."""

    file: str = Field(description="Reference file name without .yaml, e.g. durability")
    facts: list[str] = Field(default_factory=list, description="Fact topics of that file to show; empty = none")
    table: bool = Field(default=False, description="Show the file's table (matrix, categories, components, alerts ...)")
    rows: list[str] = Field(
        default_factory=list, description="Only these rows of the table (config keys, metric names)"
    )


class ReferenceTopic(Strict):
    """A reference subject an on-call engineer asks about, answerable like a failure mode.

    Its own vocabulary (aliases, keys, terms) makes it findable; its sources say which reference
    facts and tables the answer shows.
    """

    id: str
    title: str = Field(min_length=3)
    aliases: list[str] = Field(min_length=1, description="Names people use for the subject (matched as phrases)")
    keys: list[str] = Field(default_factory=list, description="Metric, MBean, error or config names that point here")
    terms: list[str] = Field(default_factory=list, description="Words typical of questions on this subject")
    intent: list[str] = Field(
        default_factory=list,
        description="Words (or word groups, all present) that mark a question as being about this topic: "
        "'default' for config defaults, 'messages time' for KIP-16",
    )
    summary: str = Field(min_length=40, description="The short answer, in our words")
    sources: list[TopicSource] = Field(min_length=1)
    related: list[str] = Field(default_factory=list, description="Failure-mode ids to open next")
    live: str | None = Field(
        default=None, description="the live check `why` runs for this topic, shown above the reference answer"
    )

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("id must be lower-case words joined by '-'")
        return v


class ReferenceTopics(Strict):
    topics: list[ReferenceTopic] = Field(min_length=1)


# The reference files and the model each must satisfy.
REFERENCE_FILES: dict[str, type[Strict]] = {
    "partition_categories.yaml": PartitionCategories,
    "durability.yaml": Durability,
    "latency.yaml": Latency,
    "configs.yaml": Configs,
    "signals.yaml": Signals,
    "replication.yaml": Topics,
    "isr_membership.yaml": Topics,
    "broker_internals.yaml": Topics,
    "topics.yaml": ReferenceTopics,
    "missing_replicas.yaml": MissingReplicas,
}
