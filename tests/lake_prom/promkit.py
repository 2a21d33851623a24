"""Settings the Prometheus-source tests share (imported by the tests and their conftest)."""

from __future__ import annotations

from bot.alerts_stack import Timing

# Scrape every 4 s with a 4 s timeout (the alert tests' figures: a loaded machine renders an
# exporter page in 1-2 s); the collector's step is the same 4 s.
SCRAPE_S = 4.0
TIMING = Timing(
    scrape="4s", scrape_timeout="4s", evaluation="15s", group_wait="1m", group_interval="5m", repeat_interval="4h"
)
