#!/usr/bin/env bash
# The static checks (issue 12), run before the tests by scripts/test.sh and by the pre-commit hook:
# ruff (lint + import order), ruff's formatter, mypy strict on commands/, framework/, diagnosis/, runbook_kb/, live/, gate/,
# kbot_settings/, window_queries/ (configured in pyproject.toml). Needs .venv (scripts/setup.sh installs the tools).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "check: ruff (lint, import order)" >&2
.venv/bin/ruff check .
echo "check: ruff format" >&2
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --diff . | head -40; echo "check: run .venv/bin/ruff format ." >&2; exit 1; }
echo "check: mypy (strict)" >&2
.venv/bin/mypy
