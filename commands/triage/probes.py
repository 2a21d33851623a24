"""The triage probes: what the cluster (or the lake) can answer of a runbook step.

A probe is bound to a step by name, in the runbook entry (``checks.triage``: step index -> probe
names); ``PROBES`` is the registry those names resolve against (tests/kb/test_kb_bindings.py
checks both ways). Each probe is (fact, gather, judge): ``gather`` reads the cluster once and
returns JSON data that the walk caches under ``fact`` in the state, so several probes (and later
steps, and other entries) share one read; ``judge`` reads those facts for the entry being walked
and says what they show (an ``Outcome``), with no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from commands.triage.state import Outcome, TriageState
from diagnosis.entry_ids import (
    BROKER_LOSS,
    CONTROLLER_QUORUM_LOSS,
    FULL_DISK,
    HANGING_TRANSACTION,
    LOG_DIR_FAILURE,
    NETWORK_PARTITION,
    OFFLINE_PARTITIONS,
    SLOW_FOLLOWER,
    UNDER_MIN_ISR,
)
from diagnosis.lake_summary import lake_rows
from diagnosis.snapshot import Snapshot, broker_list, name_partitions, snapshot
from diagnosis.txn_evidence import read_open_transactions
from framework.context import Context

if TYPE_CHECKING:  # types only: the gateway module pulls in the Kafka clients
    from live.gateway import AdminGateway

SHARE = 0.6  # share of out-of-sync replicas on one broker that makes it "the" suspect
FULL_BELOW = 0.05  # a log dir with less than this share of its bytes usable is "nearly full"


class LiveProbes:
    """The gateway and one snapshot shared by the probes of one walk (not stored in the state)."""

    def __init__(self, gw: AdminGateway, ctx: Context):
        self.gw, self.ctx = gw, ctx
        self._snap: Snapshot | None = None

    async def snap(self) -> Snapshot:
        if self._snap is None:
            self._snap = await snapshot(self.gw, min_isr="all")
        return self._snap


Fact = dict[str, Any]
Gather = Callable[[LiveProbes, TriageState], Awaitable[Fact | None]]  # None: this source cannot tell
Judge = Callable[[Fact, str], Outcome]  # (the fact, the entry being walked) -> what it shows


class Probe(NamedTuple):
    fact: str  # the name the gathered fact is cached under in TriageState.facts
    gather: Gather
    judge: Judge


async def _g_brokers(live: LiveProbes, state: TriageState) -> Fact:
    s = await live.snap()
    not_preferred = sorted(
        {
            p.topic
            for p in s.states
            if p.leader is not None and p.replicas and p.leader != p.replicas[0] and not p.topic.startswith("__")
        }
    )
    return {
        "missing": sorted(s.brokers.expected - s.brokers.registered),
        "registered": sorted(s.brokers.registered),
        "not_preferred": not_preferred[:5],
    }


def _j_brokers(f: Fact, entry: str) -> Outcome:
    if f["missing"]:
        return Outcome(
            f"broker {broker_list(f['missing'])} not registered ({len(f['registered'])} registered: "
            f"{broker_list(f['registered'])})",
            "live: describe_cluster",
            "bad",
            points_to=BROKER_LOSS,
        )
    return Outcome(
        f"all {len(f['registered'])} expected brokers are registered",
        "live: describe_cluster",
        "ok",
        rules_out=entry == BROKER_LOSS,
    )


async def _g_concentration(live: LiveProbes, state: TriageState) -> Fact:
    s = await live.snap()
    by: dict[str, int] = {}
    for p in s.states:
        for b in p.replicas:
            if b not in p.isr and b in s.brokers.registered:
                by[str(b)] = by.get(str(b), 0) + 1
    return {"by_broker": by}


def _j_concentration(f: Fact, entry: str) -> Outcome:
    by: dict[str, int] = f["by_broker"]
    total = sum(by.values())
    if not total:
        return Outcome(
            "no replica on a live broker is out of its ISR right now", "live: metadata", "ok", rules_out=True
        )
    top, n = max(by.items(), key=lambda kv: kv[1])
    if n / total >= SHARE:
        return Outcome(
            f"{n} of {total} out-of-sync replicas are on broker {top}", "live: metadata", "bad", points_to=entry
        )
    return Outcome(
        "out-of-sync replicas are spread: " + ", ".join(f"broker {b}: {c}" for b, c in sorted(by.items())),
        "live: metadata",
        "neutral",
    )


def suspect(state: TriageState) -> str | None:
    """The broker most out-of-sync replicas sit on, when one holds most of them (the GC question names it)."""
    by: dict[str, int] = state.facts.get("concentration", {}).get("by_broker") or {}
    total = sum(by.values())
    if total:
        top, n = max(by.items(), key=lambda kv: kv[1])
        if n / total >= SHARE:
            return top
    found = state.facts.get("suspect")
    return str(found) if found is not None else None


async def _g_min_isr(live: LiveProbes, state: TriageState) -> Fact:
    cats = (await live.snap()).by_category()
    return {"under": [[p.topic, p.partition] for p in cats["UnderMinIsr"]], "at": len(cats["AtMinIsr"])}


def _j_min_isr(f: Fact, entry: str) -> Outcome:
    under = [(str(t), int(p)) for t, p in f["under"]]
    text = (
        f"{len(under)} partition(s) under min ISR ({name_partitions(under, 4)}): acks=all writes fail there"
        if under
        else "no partition is under min ISR"
    ) + f"; {f['at']} at min ISR"
    return Outcome(
        text,
        "live: metadata + topic configs",
        "bad" if under or f["at"] else "ok",
        rules_out=entry == UNDER_MIN_ISR and not under,
    )


async def _g_hanging(live: LiveProbes, state: TriageState) -> Fact:
    # Every open transaction that holds a partition's last stable offset back, however young: the
    # person triaging stuck read_committed consumers needs to see it now. Whether it is hanging
    # (nothing will abort it) or will be aborted by its coordinator is judged per transaction.

    report = await read_open_transactions(live.gw)
    now = report.now_ms
    return {
        "open": [
            {
                "tid": t.transactional_id,
                "producer_id": t.producer_id,
                "where": t.where,
                "age_s": (t.age_ms(now) or 0) // 1000,
                "lso_lag": t.offsets.lso_lag if t.offsets else None,
                "status": t.status(now),
                "abort_at_ms": t.abort_at_ms,
            }
            for t in report.open
        ],
        "hanging": [
            {
                "tid": t.transactional_id,
                "producer_id": t.producer_id,
                "age_s": (t.age_ms(now) or 0) // 1000,
                "coordinator": t.coordinator_id,
                "state": "Ongoing",
                "partitions": [[t.topic, t.partition]],
            }
            for t in report.open
            if t.transactional_id is not None
        ],
        "producers": [
            {
                "topic": t.topic,
                "partition": t.partition,
                "producer_id": t.producer_id,
                "epoch": t.producer_epoch,
                "start": t.start_offset,
            }
            for t in report.open
        ],
        "unread": sorted(report.unread),
    }


def _j_hanging(f: Fact, entry: str) -> Outcome:
    if f["open"]:
        t = f["open"][0]
        lag = f", LSO {t['lso_lag']:,} records behind" if t["lso_lag"] is not None else ""
        return Outcome(
            f"{len(f['open'])} open transaction(s) hold a partition's last stable offset back, e.g. producer "
            f"{t['producer_id']} on {t['where']}"
            + (f" ({t['tid']})" if t["tid"] else "")
            + f", open {t['age_s']:,} s{lag}",
            "live: list_offsets + describe_producers + describe_transactions",
            "bad",
            points_to=HANGING_TRANSACTION,
        )
    partial = f" (not read: {', '.join(f['unread'])})" if f.get("unread") else ""
    return Outcome(
        "no open transaction holds any partition's last stable offset back" + partial,
        "live: list_offsets + describe_producers",
        "neutral" if partial else "ok",
        rules_out=entry == HANGING_TRANSACTION and not partial,
    )


def _j_producers(f: Fact, entry: str) -> Outcome:
    if not f["producers"]:
        return Outcome(
            "no producer holds a transaction open on the partitions of those transactions",
            "live: describe_producers",
            "ok" if not f["hanging"] else "neutral",
        )
    return Outcome(
        "; ".join(
            f"{p['topic']}-{p['partition']}: producer {p['producer_id']} (epoch {p['epoch']}) holds a "
            f"transaction open from offset {p['start']:,}"
            for p in f["producers"][:3]
        ),
        "live: describe_producers",
        "bad",
        points_to=HANGING_TRANSACTION,
    )


def _j_coordinator(f: Fact, entry: str) -> Outcome:
    if not f["open"]:
        return Outcome("no open transaction to ask the coordinators about", "live: list/describe_transactions", "ok")
    t = f["open"][0]
    if t["status"] == "unknown-to-coordinator":
        return Outcome(
            f"no coordinator knows producer {t['producer_id']}'s transaction on {t['where']}: nothing will "
            "abort it by itself",
            "live: list/describe_transactions",
            "bad",
            points_to=HANGING_TRANSACTION,
        )
    if t["status"] == "past-timeout":
        return Outcome(
            f"its coordinator lists {t['tid']} yet it is past its timeout after {t['age_s']:,} s: it will not "
            "end by itself",
            "live: list/describe_transactions",
            "bad",
            points_to=HANGING_TRANSACTION,
        )
    at = time.strftime("%H:%M:%S UTC", time.gmtime(t["abort_at_ms"] / 1000)) if t["abort_at_ms"] else "its timeout"
    return Outcome(
        f"its coordinator still tracks {t['tid']}: it aborts it by itself at {at}, so waiting may be enough",
        "live: list/describe_transactions",
        "neutral",
    )


async def _g_offline(live: LiveProbes, state: TriageState) -> Fact:
    s = await live.snap()
    return {"offline": [[p.topic, p.partition] for p in s.states if not p.has_leader]}


def _j_offline(f: Fact, entry: str) -> Outcome:
    off = [(str(t), int(p)) for t, p in f["offline"]]
    if off:
        return Outcome(
            f"{len(off)} partition(s) without a leader: {name_partitions(off, 4)}",
            "live: metadata",
            "bad",
            points_to=OFFLINE_PARTITIONS if entry == OFFLINE_PARTITIONS else None,
        )
    return Outcome("every partition has a leader", "live: metadata", "ok", rules_out=entry == OFFLINE_PARTITIONS)


async def _g_quorum(live: LiveProbes, state: TriageState) -> Fact:
    q = await live.gw.metadata_quorum()
    return {"leader": q.leader_id, "voters": [v.id for v in q.voters], "lagging": [v.id for v in q.voters if v.lag > 0]}


def _j_quorum(f: Fact, entry: str) -> Outcome:
    if f["leader"] < 0:
        return Outcome(
            f"the controller quorum has no leader (voters {broker_list(f['voters'])})",
            "live: describe_metadata_quorum",
            "bad",
            points_to=CONTROLLER_QUORUM_LOSS,
        )
    return Outcome(
        f"controller quorum leader {f['leader']}, voters {broker_list(f['voters'])}"
        + (f", lagging {broker_list(f['lagging'])}" if f["lagging"] else ""),
        "live: describe_metadata_quorum",
        "ok",
        rules_out=entry == CONTROLLER_QUORUM_LOSS,
    )


async def _g_log_dirs(live: LiveProbes, state: TriageState) -> Fact:
    dirs = await live.gw.log_dirs()
    full = [
        [d.broker, d.path]
        for d in dirs
        if d.total_bytes and d.usable_bytes is not None and d.usable_bytes < FULL_BELOW * d.total_bytes
    ]
    return {"failed": [[d.broker, d.path, d.error] for d in dirs if d.error], "full": full, "count": len(dirs)}


def _j_log_dirs(f: Fact, entry: str) -> Outcome:
    if f["full"]:
        return Outcome(
            "nearly full: " + ", ".join(f"broker {b} {p}" for b, p in f["full"]),
            "live: describe_log_dirs",
            "bad",
            points_to=FULL_DISK,
        )
    if f["failed"]:
        return Outcome(
            "failed log dir(s): " + ", ".join(f"broker {b} {p} ({e})" for b, p, e in f["failed"]),
            "live: describe_log_dirs",
            "bad",
            points_to=LOG_DIR_FAILURE,
        )
    if not f["count"]:
        return Outcome("no broker reported a log dir", "live: describe_log_dirs", "neutral")
    return Outcome(
        f"all {f['count']} log dirs are online with space left",
        "live: describe_log_dirs",
        "ok",
        rules_out=entry in (LOG_DIR_FAILURE, FULL_DISK),
    )


async def _g_racks(live: LiveProbes, state: TriageState) -> Fact:
    s = await live.snap()
    affected = sorted(
        (s.brokers.expected - s.brokers.registered) | {b for p in s.states for b in p.replicas if b not in p.isr}
    )
    racks = {str(b.id): b.rack for b in s.cluster.brokers}
    return {"affected": affected, "racks": {str(b): racks.get(str(b)) for b in affected}}


def _j_racks(f: Fact, entry: str) -> Outcome:
    if not f["affected"]:
        return Outcome(
            "no broker is missing and no replica is out of its ISR: nothing is cut off",
            "live: metadata",
            "ok",
            rules_out=entry == NETWORK_PARTITION,
        )
    racks: dict[str, str | None] = f["racks"]
    known = {r for r in racks.values() if r}
    where = (
        f"all in rack {known.pop()}"
        if len(known) == 1 and all(racks.values())
        else "racks: " + ", ".join(f"{b}: {r or 'unset'}" for b, r in racks.items())
    )
    return Outcome(
        f"affected brokers {broker_list(f['affected'])}, {where}", "live: describe_cluster + metadata", "neutral"
    )


async def _g_urp_shape(live: LiveProbes, state: TriageState) -> Fact | None:
    """From the lake when there is one; implied by a missing broker; else the human is asked."""
    if live.ctx.lake is not None:
        try:
            rows = await lake_rows(live.ctx, live.gw.name, 1, "urp_trend")
        except Exception:  # noqa: BLE001 - a lake failure only means falling back to the next source
            rows = None
        shapes = {r["shape"] for r in rows or []} - {"zero"}
        if shapes:
            return {"shape": "flat" if shapes == {"flat"} else "fluctuating", "source": "lake: urp_trend, last hour"}
    missing = state.facts.get("brokers", {}).get("missing")
    if missing:
        return {
            "shape": "flat",
            "source": f"implied: broker {broker_list(missing)} is gone, so its replicas stay out of ISR",
        }
    return None


def _j_urp_shape(f: Fact, entry: str) -> Outcome:
    if f["shape"] == "flat":
        return Outcome("URP is level (flat)", f["source"], "bad", points_to=BROKER_LOSS)
    return Outcome("URP moves up and down", f["source"], "bad", points_to=SLOW_FOLLOWER)


# The probes by the name the runbook binds them to triage steps under (an entry's
# `checks.triage`: step index -> probe names). Several probes may answer one step; several judges
# may read the same fact.
PROBES: dict[str, Probe] = {
    "brokers": Probe("brokers", _g_brokers, _j_brokers),
    "urp_shape": Probe("urp_shape", _g_urp_shape, _j_urp_shape),
    "concentration": Probe("concentration", _g_concentration, _j_concentration),
    "min_isr": Probe("min_isr", _g_min_isr, _j_min_isr),
    "hanging": Probe("hanging", _g_hanging, _j_hanging),
    "producers": Probe("hanging", _g_hanging, _j_producers),
    "coordinator": Probe("hanging", _g_hanging, _j_coordinator),
    "offline": Probe("offline", _g_offline, _j_offline),
    "quorum": Probe("quorum", _g_quorum, _j_quorum),
    "log_dirs": Probe("log_dirs", _g_log_dirs, _j_log_dirs),
    "racks": Probe("racks", _g_racks, _j_racks),
}
