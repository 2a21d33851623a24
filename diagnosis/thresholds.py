"""The runbook's alert thresholds (reference/signals.yaml) as numbers, for the live checks that
page on the same bounds the runbook tells people to alert on."""

from __future__ import annotations

import re

from runbook_kb import default_kb
from runbook_kb.schema import Signals

_BOUND = re.compile(r"^\s*(?:SUM[^<>]*)?([<>]=?)\s*([0-9.]+)\s*(%?)")


def alert_bounds(metric: str) -> dict[str, tuple[str, float]]:
    """severity -> (comparison, number) from the runbook's alert table, e.g. RequestHandlerAvgIdlePercent
    -> {"warning": ("<", 0.2), "critical": ("<", 0.1)}. Percentages are returned as fractions."""
    out: dict[str, tuple[str, float]] = {}
    signals = default_kb().reference["signals"]
    for alert in signals.alerts if isinstance(signals, Signals) else []:
        if alert.metric != metric:
            continue
        m = _BOUND.match(alert.condition)
        if m:
            value = float(m.group(2)) / (100 if m.group(3) else 1)
            out[alert.severity] = (m.group(1), value)
    return out
