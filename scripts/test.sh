#!/usr/bin/env bash
# Set up (if needed), run the static checks, then the whole test suite. Extra arguments go to pytest.
# The suite runs on two workers (KBOT_TEST_WORKERS; 0 runs it in this one process): tests/conftest.py
# keeps every test of a shared cluster or Spark session on the worker that holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check.sh
exec .venv/bin/python -m pytest -n "${KBOT_TEST_WORKERS:-2}" "$@"
