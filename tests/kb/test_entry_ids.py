"""The code names the runbook's entries in one place (diagnosis/entry_ids.py), and every name there
is an entry of runbook_kb/data/failure_modes: a renamed or removed entry fails here instead of a
rule silently never matching it (issue 27)."""

import ast
import io
import tokenize
from pathlib import Path
from typing import get_args

from diagnosis import entry_ids
from diagnosis.rules import ChurnCause, URPCause, replica_causes
from runbook_kb import default_kb

ROOT = Path(__file__).resolve().parents[2]
KB_IDS = {p.stem for p in (ROOT / "runbook_kb" / "data" / "failure_modes").glob("*.yaml")}
# the Literal types of the causes the rules give: a type cannot name a constant, so they spell them
TYPE_LINES = ("URPCause = Literal[", "ChurnCause = Literal[")
NOT_ENTRIES = {"reassignment"}  # a cause the rules give that is no fault, so has no entry


def _named() -> dict[str, str]:
    return {k: v for k, v in vars(entry_ids).items() if k.isupper() and isinstance(v, str)}


def test_every_id_the_code_names_is_an_entry_of_the_kb():
    named = _named()
    assert named, "diagnosis/entry_ids.py names no entry"
    missing = {k: v for k, v in named.items() if v not in KB_IDS}
    assert not missing, f"diagnosis/entry_ids.py names entries runbook_kb/data/failure_modes lacks: {missing}"
    assert set(named.values()) == entry_ids.ALL
    assert KB_IDS == set(default_kb().failure_modes), "the file names and the entries' ids differ"


def test_the_cause_types_name_entries():
    for alias in (URPCause, ChurnCause):
        unknown = set(get_args(alias)) - KB_IDS - NOT_ENTRIES
        assert not unknown, f"{alias}: no entry with id {sorted(unknown)}"
    # the causes that are no entry are exactly the KB's rows without one
    no_entry = {c.id for c in replica_causes().causes if c.entry is None}
    assert no_entry == set(get_args(URPCause)) & NOT_ENTRIES


def _id_literals(path: Path) -> list[str]:
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type != tokenize.STRING or tok.string[:1] not in "\"'":  # f-strings and the like are prose
            continue
        if lines[tok.start[0] - 1].lstrip().startswith(TYPE_LINES):
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):
            continue
        if value in KB_IDS:
            found.append(f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.string}")
    return found


def test_no_entry_id_is_spelled_outside_entry_ids():
    """diagnosis/, commands/ and framework/ take entry ids from diagnosis.entry_ids, never as literals."""
    files = [p for d in ("diagnosis", "commands", "framework") for p in sorted((ROOT / d).rglob("*.py"))]
    found = [hit for p in files if p.name != "entry_ids.py" or p.parent.name != "diagnosis" for hit in _id_literals(p)]
    assert not found, "entry ids spelled as literals (use diagnosis.entry_ids):\n" + "\n".join(found)
