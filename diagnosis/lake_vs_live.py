"""The metric lake's lines checked against the live read of the same answer.

The lake always ends before the live read: its collector scrapes every few seconds and the
ingest commits a batch a little later, so in the first minute of a fault the lake still shows
the cluster as it was, and after a recovery it still shows the fault. Placed beside the live
evidence unmarked, such a line contradicts it ("ISR churn: no ISR shrinks" under "Broker 102 is
gone"; a "!" URP trend under an OK verdict). Here every lake line of the URP family is compared
with what the live read counted (``findings.LiveFacts``):

* the lake's lines say where its data ends (the minute, and how long before this answer);
* a healthy lake line while the cluster is unhealthy now is labelled as from before the lake's
  data ended, and no longer counts as "ok";
* an unhealthy lake line while the cluster is healthy now is labelled as past (recovered), and
  no longer counts as "bad";
* a line about a broker the cluster no longer has says that its samples stop when it left.

Nothing is dropped: the engineer sees what the lake holds, marked for what it is.
"""

from __future__ import annotations

import dataclasses
import re

from diagnosis.findings import LiveFacts
from diagnosis.lake_evidence import LakeFindings, hms
from framework.reply import Evidence

_BROKER = re.compile(r"\bbroker (\d+)\b")
#: The lake's lines about under-replication, by source (a line's evidence source).
URP_SOURCES = frozenset({"lake: urp_trend", "lake: urp_concentration", "lake: isr_churn"})
OFFLINE_SOURCES = frozenset({"lake: offline_timeline"})


def _hm(epoch: float) -> str:
    return f"{hms(epoch)} UTC"


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else f"{s // 60} min"


def data_end_line(lake: LakeFindings, now: float) -> Evidence | None:
    """ "Metric lake: data to 10:42:10 UTC, 35 s before this answer" (None without data)."""
    if lake.newest is None or not lake.has_data:
        return None
    return Evidence(
        "Metric lake",
        f"data to {_hm(lake.newest)}, {_age(now - lake.newest)} before this answer",
        "lake: freshness",
        "neutral",
    )


def _unhealthy_now(source: str, live: LiveFacts) -> tuple[int, str] | None:
    """How many partitions the live read found in the state the line's source measures, and
    what that state is called."""
    if source in URP_SOURCES:
        return live.under_replicated, "under-replicated"
    if source in OFFLINE_SOURCES:
        return live.offline, "offline"
    return None


def _checked(e: Evidence, live: LiveFacts, newest: float | None) -> Evidence:
    counted = _unhealthy_now(e.source, live)
    if counted is None:
        return e
    now_count, state = counted
    asof = f"as of {_hm(newest)}" if newest is not None else "in the lake's window"
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


def check_against_live(lake: LakeFindings, live: LiveFacts | None, now: float) -> LakeFindings:
    """``lake`` with its lines checked against ``live`` (see the module docstring) and the line
    that names where its data ends first; ``lake`` itself is left as it was."""
    evidence = list(lake.evidence)
    if live is not None:
        evidence = [_checked(e, live, lake.newest) for e in evidence]
    header = data_end_line(lake, now)
    if header is not None and not any(e.source == "lake: freshness" for e in evidence):
        evidence.insert(0, header)
    return dataclasses.replace(lake, evidence=evidence)
