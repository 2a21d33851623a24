"""Rules the schema enforces on every runbook entry, so an answer never shows the wrong thing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from runbook_kb import default_kb
from runbook_kb.schema import FailureMode, Step

ENTRY = Path(__file__).resolve().parents[2] / "runbook_kb" / "data" / "failure_modes" / "hot-partition.yaml"


def test_a_step_that_enables_unclean_election_must_be_marked_as_destroying_data():
    with pytest.raises(ValidationError, match="destroys_data"):
        Step(action="Turn it on", config={"unclean.leader.election.enable": "true"})
    with pytest.raises(ValidationError, match="destroys_data"):
        Step(action="Turn it on", command="kafka-configs.sh --add-config unclean.leader.election.enable=true")
    assert Step(
        action="Turn it on", config={"unclean.leader.election.enable": "true"}, destroys_data=True
    ).destroys_data
    kb = default_kb()
    marked = [(e.id, s.action) for e in kb.failure_modes.values() for s in e.mitigation if s.destroys_data]
    assert [eid for eid, _ in marked] == ["offline-partitions"], marked


def test_an_entry_without_source_lines_must_say_why():
    raw = yaml.safe_load(ENTRY.read_text())
    assert raw["mechanism"] == [] and raw["no_source_line"]
    FailureMode.model_validate(raw)
    del raw["no_source_line"]
    with pytest.raises(ValidationError, match="no_source_line"):
        FailureMode.model_validate(raw)
    for entry in default_kb().failure_modes.values():
        assert entry.mechanism or entry.no_source_line, entry.id
