"""What one failure mode of the lab is: how to cause it, how to see it, what to ask, what the
right answer is. Each module in lab/modes/ builds one Mode; lab/modes/__init__.py lists them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Facts = dict[str, Any]  # what the injection did: broker id, topic, partitions, transactional id ...


@dataclass(frozen=True)
class Mode:
    name: str  # the `kbot lab run <name>` word
    summary: str  # what the lab does, in one line
    # the runbook entry id that must come first: a failure mode, or a reference topic when an
    # operation (a reassignment) explains the symptom; "": none applies, see expect_verdict
    expect_entry: str
    expect_severity: str  # the Reply severity a good answer has
    questions: tuple[str, ...]  # as an engineer would ask; the first one is judged
    inject: Callable[[Any], Facts] | None = None  # (cluster) -> facts, from outside
    wait_for_symptom: Callable[[Any, Facts], Any] | None = None  # a condition seen from outside
    named: Callable[[Facts], list[str]] = lambda facts: []  # strings the answer must name
    heal: Callable[[Any, Facts], None] | None = None  # mode-specific undo (before the generic heal)
    topics: tuple[str, ...] = ()  # topics the mode creates: deleted at heal even if inject failed half-way
    topology: str = "standard"  # which lab cluster (lab/topology.py)
    feasible: bool = True
    note: str = ""  # why not reproducible here, or what the lab substitutes
    needs: tuple[str, ...] = field(default_factory=tuple)  # e.g. ("tmpfs",): checked before running
    # When no runbook entry is the cause (consumers that stopped are the application's fault, not
    # Kafka's): what the verdict must say, and the entry that must NOT come first. With an
    # expect_entry, what the verdict must say besides (e.g. that the cause cannot be told from a
    # look-alike from outside).
    expect_verdict: str = ""
    not_top: str = ""
    # The idle answer time the judge allows (lab/judge.py ANSWER_BUDGET_S unless the fault itself
    # costs time to see: a port that gives no answer is known silent only once a probe times out),
    # stretched by the load as every budget is.
    answer_budget_s: float | None = None

    def questions_for(self, facts: Facts) -> list[str]:
        """Questions may name what the injection made, e.g. 'lag {group}'."""
        return [q.format(**facts) for q in self.questions]
