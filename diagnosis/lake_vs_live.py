"""The metric lake's lines checked against the live read of the same answer.

The lake always ends before the live read: its collector scrapes every few seconds and the
ingest commits a batch a little later, so in the first minute of a fault the lake still shows
the cluster as it was, and after a recovery it still shows the fault. Placed beside the live
evidence unmarked, such a line contradicts it ("ISR churn: no ISR shrinks" under "Broker 102 is
gone"; a "!" URP trend under an OK verdict). Here every lake line of the URP family is compared
with what the live read counted (``findings.LiveFacts``):

* every lake line says how old its data is (where the lake's data ends, and how long before this
  answer), and the lines open with that;
* a healthy lake line while the cluster is unhealthy now is labelled as from before the lake's
  data ended, and no longer counts as "ok";
* an unhealthy lake line while the cluster is healthy now is labelled as past (recovered), and
  no longer counts as "bad";
* a line about a broker the cluster no longer has says that its samples stop when it left;
* the line naming the broker that reports most of the URP is dropped, with a note, when the live
  read finds the missing replicas elsewhere: the lake counts URP by the partitions' leaders, so
  with broker 102 dead it said "URP concentrates on broker 103: 56%";
* a chart of the symptom whose newest values contradict the live count (the lake's "now 11"
  beside the live read's 0 after a recovery) is dropped, with a note.
"""

from __future__ import annotations

import dataclasses
import re

from diagnosis.findings import LiveFacts
from diagnosis.lake_evidence import LakeFindings, hms
from diagnosis.lake_evidence.findings import age, data_age
from framework.reply import Evidence, Series

_BROKER = re.compile(r"\bbroker (\d+)\b")
#: The lake's lines about under-replication, by source (a line's evidence source).
URP_SOURCES = frozenset({"lake: urp_trend", "lake: urp_concentration", "lake: isr_churn"})
OFFLINE_SOURCES = frozenset({"lake: offline_timeline"})
#: The charted metrics the live read counts (``why``'s trend beside the lake's findings).
_CHARTED = {"UnderReplicatedPartitions": "under-replicated", "OfflinePartitionsCount": "offline"}


def _hm(epoch: float) -> str:
    return f"{hms(epoch)} UTC"


def data_end_line(lake: LakeFindings, now: float) -> Evidence | None:
    """ "Metric lake: data to 10:42:10 UTC, 35 s before this answer" (None without data)."""
    if lake.newest is None or not lake.has_data:
        return None
    return Evidence(
        "Metric lake",
        f"data to {_hm(lake.newest)}, {age(now - lake.newest)} before this answer",
        "lake: freshness",
        "neutral",
    )


def _count(state: str, live: LiveFacts) -> int:
    return live.under_replicated if state == "under-replicated" else live.offline


def _unhealthy_now(source: str, live: LiveFacts) -> tuple[int, str] | None:
    """How many partitions the live read found in the state the line's source measures, and
    what that state is called."""
    if source in URP_SOURCES:
        return live.under_replicated, "under-replicated"
    if source in OFFLINE_SOURCES:
        return live.offline, "offline"
    return None


def _where_missing(live: LiveFacts) -> list[int]:
    """The brokers the live read finds the missing replicas on: those gone from the cluster, and
    those holding the most replicas out of their ISR."""
    most = max(live.out_of_isr.values(), default=0)
    lagging = {b for b, n in live.out_of_isr.items() if n > 0 and n == most}
    return sorted(live.missing_brokers | lagging)


def _disowned(e: Evidence, live: LiveFacts) -> str | None:
    """Why the lake's line naming the broker(s) that report most of the URP is dropped, or None
    when it stands: the live read finds the missing replicas on other brokers."""
    if e.source != "lake: urp_concentration" or live.under_replicated == 0:
        return None
    where = _where_missing(live)
    named = {int(b) for b in _BROKER.findall(e.value)}
    if not where or named & set(where):
        return None
    gone = [b for b in where if b in live.missing_brokers]
    places = ", ".join(str(b) for b in where) + (" (not in the cluster now)" if gone else "")
    line = e.value.split(", as the leader")[0]
    return (
        f"Left out the lake's '{e.label} {line}': URP is counted by each partition's leader, and the live "
        f"read finds the missing replicas on broker(s) {places}."
    )


def _as_of(newest: float | None, now: float) -> str:
    return f"as of {_hm(newest)}, {age(now - newest)} old" if newest is not None else "in the lake's window"


def _checked(e: Evidence, live: LiveFacts, newest: float | None, now: float) -> Evidence:
    counted = _unhealthy_now(e.source, live)
    if counted is None:
        return e
    now_count, state = counted
    asof = _as_of(newest, now)
    brokers = {int(b) for b in _BROKER.findall(f"{e.label} {e.value}")}
    gone = sorted(brokers & live.missing_brokers)
    if gone:
        who = ", ".join(str(b) for b in gone)
        return dataclasses.replace(
            e,
            value=f"{e.value} [broker {who} is not in the cluster now: the lake holds its samples from before it left]",
            status="neutral",
        )
    if e.status == "ok" and now_count > 0:
        return dataclasses.replace(
            e,
            value=f"{e.value} [{asof}: from before the live read, which finds {now_count:,} partition(s) {state} now]",
            status="neutral",
        )
    if e.status == "bad" and now_count == 0:
        return dataclasses.replace(
            e, value=f"{e.value} [{asof}: the live read finds none {state} now: recovered since]", status="neutral"
        )
    return e


def _aged(e: Evidence, newest: float | None, now: float) -> Evidence:
    """The line with its data's age, unless it says it already (the freshness line, a marked line)."""
    if newest is None or e.source == "lake: freshness" or _as_of(newest, now) in e.value:
        return e
    return dataclasses.replace(e, value=f"{e.value} ({data_age(newest, now)})")


def _chart_contradicts(series: list[Series], live: LiveFacts, newest: float | None) -> str | None:
    """Why the symptom's chart is left out: its newest values say unhealthy where the live read
    finds none, or healthy where it finds some (the chart's "now" is the lake's, not now)."""
    charted = [s for s in series if s.points and s.title in _CHARTED]
    if not charted:
        return None
    state = _CHARTED[charted[0].title]
    last = max(s.points[-1][1] for s in charted)
    count = _count(state, live)
    if (last > 0) == (count > 0):
        return None
    to = f" (its data ends {_hm(newest)})" if newest is not None else ""
    return (
        f"The lake's {charted[0].title} chart is left out: it ends at {last:,.0f}{to}, and the live read "
        f"finds {count:,} partition(s) {state} now."
    )


def check_against_live(lake: LakeFindings, live: LiveFacts | None, now: float) -> LakeFindings:
    """``lake`` with its lines checked against ``live`` (see the module docstring), each with its
    data's age, and the line that names where its data ends first; ``lake`` itself is left as it
    was."""
    evidence = list(lake.evidence)
    notes = list(lake.notes)
    series = list(lake.series)
    if live is not None:
        kept = []
        for e in evidence:
            why = _disowned(e, live)
            if why is None:
                kept.append(_checked(e, live, lake.newest, now))
            else:
                notes.append(why)
        evidence = kept
        why = _chart_contradicts(series, live, lake.newest)
        if why is not None:
            series = []
            notes.append(why)
    if lake.has_data:
        evidence = [_aged(e, lake.newest, now) for e in evidence]
    header = data_end_line(lake, now)
    if header is not None and not any(e.source == "lake: freshness" for e in evidence):
        evidence.insert(0, header)
    return dataclasses.replace(lake, evidence=evidence, notes=notes, series=series)
