"""Validate knowledge-base files: ``python -m runbook_kb.validate [FILE ...]``.

Without arguments the whole KB is loaded (as at start-up). With file arguments each file is checked
on its own against its model, which is handy while writing a new entry.
"""

from __future__ import annotations

import sys
from pathlib import Path

from runbook_kb.loader import DATA_DIR, KBError, _check_sources, _read_source_paths, _validate, load_kb
from runbook_kb.lookup import Lookup
from runbook_kb.schema import REFERENCE_FILES, FailureMode


def validate_file(path: Path) -> str:
    if path.parent.name == "reference":
        model = REFERENCE_FILES.get(path.name)
        if model is None:
            raise KBError(f"{path.name}: not a known reference file ({', '.join(REFERENCE_FILES)})")
        _validate(path, model)
        return f"{path.name}: ok"
    mode = _validate(path, FailureMode)
    _check_sources(path.name, mode, _read_source_paths(DATA_DIR / "kafka-source-paths.tsv"))
    return f"{path.name}: ok ({mode.id})"


def main(argv: list[str]) -> int:
    try:
        if not argv:
            kb = load_kb()

            Lookup(kb)  # the search's word model trains on the example-question files: check them too
            print(f"knowledge base ok: {len(kb.failure_modes)} failure modes, {len(kb.reference)} reference files")
        for arg in argv:
            print(validate_file(Path(arg)))
    except KBError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
