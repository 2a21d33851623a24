"""What the lake's evidence for a symptom is made of (:class:`LakeFindings`), and its freshness.

Freshness: a lake that stopped receiving samples (collector or ingest down) shows an old,
possibly healthy trend.  When its newest sample in the window is older than the symptom (or,
when the caller does not know when the symptom began, older than :data:`FRESH_S` before the
end of the window), the answer says so instead of showing the old trend as evidence.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from diagnosis.lake_evidence.window import Row, Window
from framework.reply import Evidence, Series, Severity


def num(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "?"
    if digits == 0 and float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.{digits or 1}f}"


def who(row: Row, many_clusters: bool) -> str:
    return f"broker {row['broker']}" + (f" ({row['cluster']})" if many_clusters else "")


def many_clusters(rows: list[Row]) -> bool:
    return len({r.get("cluster") for r in rows}) > 1


@dataclass
class LakeFindings:
    window: Window
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (runbook entry, what the lake showed)
    verdict: str | None = None  # used when there is no live verdict
    severity: Severity = "info"
    notes: list[str] = field(default_factory=list)
    has_data: bool = True
    available: bool = True
    details: list[str] = field(default_factory=list)  # per-item lines, for a Section
    data_end: float | None = None  # set when the lake's data ends before the symptom (stale)
    newest: float | None = None  # the window's newest sample (epoch s), whenever the lake had one
    series: list[Series] = field(default_factory=list)  # the symptom's trend, for a chart
    began: float | None = None  # when the symptom the lake shows began, read from its samples (epoch s)

    @classmethod
    def young(cls, window: Window, source: str) -> "LakeFindings":
        """The answer on a lake with nothing ingested yet: not enough data, not an error."""
        return cls(
            window,
            evidence=[Evidence("Metric lake", "not enough data yet (0 min collected)", source, "neutral")],
            has_data=False,
        )

    @classmethod
    def without_data(cls, window: Window, source: str, what: str) -> "LakeFindings":
        """The answer when the lake has nothing for the window: say so, point nowhere."""
        return cls(window, evidence=[no_data(window, source, what)], has_data=False)


#: With no known start of the symptom, the lake counts as stale when its newest sample in the
#: window is older than this before the window's end (the collector scrapes every 10 s and the
#: ingest commits every minute or so: a lake that is 3 minutes behind has stopped).
FRESH_S = 180.0


def hms(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.timezone.utc):%H:%M:%S}"


def age(seconds: float) -> str:
    """A data age in words: "35 s", "4 min"."""
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else f"{s // 60} min"


def data_age(newest: float, now: float) -> str:
    """How old the lake's data is, for a lake line: "lake data to 10:42:10 UTC, 35 s old"."""
    return f"lake data to {hms(newest)} UTC, {age(now - newest)} old"


def apply_freshness(out: "LakeFindings", data_end: float | None, began: dt.datetime | None = None) -> "LakeFindings":
    """Say so when the lake's data ends before the symptom began (``began``, when the caller
    knows it) or, without a start time, :data:`FRESH_S` before the window's end: a healthy trend
    from before the symptom is no evidence against it, and its healthy items are replaced.

    Without ``began`` nothing says when the symptom began, so the answer does not claim the data
    ends before it: it says how old the data is, and when the lake itself shows the symptom, from
    when (``out.began``, read from its samples: "lake data ends 02:24:31, before this began"
    stood beside a lake that showed the kill of 02:22:10)."""
    out.newest = data_end
    if not out.has_data or data_end is None:
        return out
    if began is not None:
        if data_end >= began.timestamp():
            return out
        line = f"lake data ends {hms(data_end)} UTC, before this began ({hms(began.timestamp())} UTC)"
    else:
        end = out.window.end.timestamp()
        if data_end >= end - FRESH_S:
            return out
        line = f"lake data ends {hms(data_end)} UTC, {age(end - data_end)} before this answer"
    out.data_end = data_end
    shows_it = bool(out.lead) or any(e.status == "bad" for e in out.evidence)
    if not shows_it:
        out.evidence = [e for e in out.evidence if e.status == "bad"]
        out.evidence.insert(
            0,
            Evidence(
                "Metric lake",
                line
                + ": it cannot show what happened since"
                + "[[terminal: (is `kbot lake collect` / ingest running?)]][[slack: (its collector may be stopped)]]",
                "lake: freshness",
                "neutral",
            ),
        )
        out.verdict = f"The metric lake cannot say: {line}."
        out.severity = "info"
    elif began is not None:
        out.notes.append(f"Metric lake: {line}; what it shows is from before that.")
    else:
        since = f" from {hms(out.began)} UTC" if out.began is not None else ""
        out.notes.append(f"Metric lake: {line}; it shows this{since} up to then, not what happened since.")
    return out


def no_data(window: Window, source: str, what: str = "samples") -> Evidence:
    return Evidence(
        "Metric lake", f"no data for this window ({window.label}): no {what} in the lake", source, "neutral"
    )


def unavailable(window: Window, exc: Exception) -> LakeFindings:
    return LakeFindings(
        window, notes=[f"Metric lake: {exc} This answer has no lake evidence."], has_data=False, available=False
    )
