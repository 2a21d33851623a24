"""The runbook's numbers for the checks: its alert thresholds (reference/signals.yaml) and the
thresholds its entries hold for their checks (checks.thresholds), read here once so that the live
checks and the lake's agree: the bot pages on the same bounds the runbook tells people to alert on."""

from __future__ import annotations

import re
from dataclasses import dataclass

from diagnosis import entry_ids
from runbook_kb import KnowledgeBase, default_kb
from runbook_kb.schema import Signals

_BOUND = re.compile(r"^\s*(?:SUM[^<>]*)?([<>]=?)\s*([0-9.]+)\s*(%?)")

#: the alert whose bounds say when the request handlers are saturated (live and lake)
HANDLER_IDLE_ALERT = "RequestHandlerAvgIdlePercent"
#: hot-partition's checks.thresholds: how many times its topic's median a hot partition is written
HOT_SKEW_KEY = "hot_skew_x_topic_median"
#: hot-partition's checks.thresholds: the write rate (records/s) below which nothing is hot
HOT_MIN_RATE_KEY = "hot_min_records_per_s"


def alert_bounds(metric: str, kb: KnowledgeBase | None = None) -> dict[str, tuple[str, float]]:
    """severity -> (comparison, number) from the runbook's alert table, e.g. RequestHandlerAvgIdlePercent
    -> {"warning": ("<", 0.2), "critical": ("<", 0.1)}. Percentages are returned as fractions."""
    out: dict[str, tuple[str, float]] = {}
    signals = (kb or default_kb()).reference["signals"]
    for alert in signals.alerts if isinstance(signals, Signals) else []:
        if alert.metric != metric:
            continue
        m = _BOUND.match(alert.condition)
        if m:
            value = float(m.group(2)) / (100 if m.group(3) else 1)
            out[alert.severity] = (m.group(1), value)
    return out


def entry_threshold(entry: str, key: str, kb: KnowledgeBase | None = None) -> float:
    """A number an entry holds for its checks (``checks.thresholds.<key>``)."""
    return float((kb or default_kb()).failure_modes[entry].checks.thresholds[key])


def handler_idle_saturated_below(kb: KnowledgeBase | None = None) -> float:
    """The idle fraction under which the request handlers count as saturated: the alert table's
    warning bound on RequestHandlerAvgIdlePercent. The live check classifies every broker's current
    idle against the table (warning, critical); the lake calls a broker saturated whose mean idle
    over the window is under this."""
    return alert_bounds(HANDLER_IDLE_ALERT, kb)["warning"][1]


@dataclass(frozen=True)
class HotRule:
    """When a partition is hot: written ``skew`` times faster than its topic's median, at least
    ``min_rate`` records/s (an idle topic's unevenness is nothing)."""

    skew: float
    min_rate: float

    def is_hot(self, rate: float | None, skew: float | None) -> bool:
        """``skew``: the rate over its topic's median (None when that median is 0)."""
        return rate is not None and skew is not None and rate >= self.min_rate and skew >= self.skew


def hot_rule(kb: KnowledgeBase | None = None) -> HotRule:
    return HotRule(
        skew=entry_threshold(entry_ids.HOT_PARTITION, HOT_SKEW_KEY, kb),
        min_rate=entry_threshold(entry_ids.HOT_PARTITION, HOT_MIN_RATE_KEY, kb),
    )
