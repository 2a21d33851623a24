"""A metric's history as chart series: the bucket width for a window, and one series per broker."""

from __future__ import annotations

import datetime as dt

from diagnosis import lake_evidence as lake
from framework.reply import Series

MAX_POINTS = 120  # buckets a trend shows: the bucket width grows with the window to stay under it
BUCKETS_S = (60, 120, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400)


def bucket_for(since: dt.timedelta) -> int:
    secs = since.total_seconds()
    return next((b for b in BUCKETS_S if secs / b <= MAX_POINTS), BUCKETS_S[-1])


def by_bucket(rows: list[lake.Row]) -> dict[int, dict[int, float]]:
    """History rows (bucket, broker, value) as {bucket: {broker: value}}."""
    out: dict[int, dict[int, float]] = {}
    for r in rows:
        out.setdefault(r["bucket"], {})[r["broker"]] = r["value"]
    return out


def trend_series(metric: str, rows: list[lake.Row], unit: str, mark: tuple[str, str] | None = None) -> list[Series]:
    """A metric's history rows as one series per broker, for a chart; the incident window ``mark``
    (UTC ISO times) is shaded.  Rows with the bucket's newest sample (``last_value``, ``last_ts``:
    ``window_queries.trend``) end each line on it when the newest bucket's worst differs: a
    chart's last value reads as "now", and the minute's worst is not now."""
    series = broker_series(metric, "", unit, by_bucket(rows), sorted({r["broker"] for r in rows}), mark)
    newest: dict[int, lake.Row] = {}
    for r in rows:
        if r.get("last_ts") is not None and (r["broker"] not in newest or r["bucket"] > newest[r["broker"]]["bucket"]):
            newest[r["broker"]] = r
    by_label = {("cluster" if b == -1 else f"broker {b}"): r for b, r in newest.items()}
    for s in series:
        last = by_label.get(s.label)
        if last is not None and s.points and float(last["last_value"]) != s.points[-1][1]:
            s.points.append((last["last_ts"].astimezone(dt.timezone.utc).isoformat(), float(last["last_value"])))
    return series


def broker_series(
    metric: str,
    scope: str,
    unit: str,
    by_bucket: dict[int, dict[int, float]],
    brokers: list[int],
    mark: tuple[str, str] | None = None,
    scale: float = 1,
) -> list[Series]:
    """One line per broker (the busiest few when there are many), for the chart; values times
    ``scale`` (a meter's per-second rate as events per bucket)."""
    totals = {b: sum(v.get(b, 0.0) for v in by_bucket.values()) for b in brokers}
    shown = sorted(brokers, key=lambda b: -totals[b])[:MAX_CHART_LINES]

    def iso(ts: int) -> str:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat()

    return [
        Series(
            f"{metric}{scope}",
            unit,
            [(iso(t), float(by_bucket[t][b]) * scale) for t in sorted(by_bucket) if b in by_bucket[t]],
            window=mark,
            label="cluster" if b == -1 else f"broker {b}",
        )
        for b in sorted(shown)
    ]


MAX_CHART_LINES = 8  # lines a chart stays readable with at Slack's thumbnail size
