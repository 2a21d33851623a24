#!/usr/bin/env bash
# Set up (if needed) and run the bot on the embedded default: `kbot run` (local Kafka cluster when
# none is configured, then the Slack app or, without Slack tokens, the interactive console).
# Extra arguments go to `kbot`, e.g. `scripts/run.sh ask "why URP"`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ $# -eq 0 ]; then set -- run; fi
exec .venv/bin/kbot "$@"
