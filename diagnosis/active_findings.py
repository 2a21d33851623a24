"""What else is going on besides the brokers and partitions: open or hanging transactions,
reassignments (running or stalled), client quotas in force. `status` reads them beside its
snapshot so an answer about one fault does not hide another (a dead broker and a hanging
transaction at once). Each read is bounded and reported as not read when it fails: a finding
that could not be read is never shown as absent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from diagnosis.quota_checks import quota_evidence, quota_sentence, read_quotas
from diagnosis.reassignment_findings import read_reassignments, reassignment_evidence, reassignment_sentence
from diagnosis.txn_evidence import OpenTxn, TxnReport, read_open_transactions, utc_clock
from framework.reply import Action, Evidence
from live.gateway import AdminGateway, GatewayError
from live.model import TopicInfo

TXN_SOURCE = "live: list_offsets + describe_producers + describe_transactions"


@dataclass
class ActiveFindings:
    problems: list[str] = field(default_factory=list)  # make the cluster "not healthy"
    notices: list[str] = field(default_factory=list)  # in force, worth naming, not a fault by itself
    evidence: list[Evidence] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    critical: bool = False


def transactions_by_producer(open_txns: list[OpenTxn]) -> dict[int, list[OpenTxn]]:
    """One transaction per producer: a transaction spanning three partitions is one transaction."""
    out: dict[int, list[OpenTxn]] = {}
    for t in open_txns:
        out.setdefault(t.producer_id, []).append(t)
    return out


def _txn_part(report: TxnReport, into: ActiveFindings) -> None:
    now = report.now_ms
    for what, why in sorted(report.unread.items()):
        into.evidence.append(Evidence(f"Transactions not read: {what}", why, "live", "bad"))
    by_pid = transactions_by_producer(report.open)
    if not by_pid:
        return
    hanging = {pid: ts for pid, ts in by_pid.items() if any(t.status(now) != "within-timeout" for t in ts)}
    for pid, ts in by_pid.items():
        where = ", ".join(t.where for t in ts)
        tid = ts[0].transactional_id
        state = "hanging (nothing will abort it)" if pid in hanging else "open, within its timeout"
        into.evidence.append(
            Evidence(
                f"Transaction of producer {pid}" + (f" ({tid})" if tid else ""),
                f"{state}; holds the last stable offset of {where}",
                TXN_SOURCE,
                "bad",
            )
        )
    if hanging:
        parts = sum(len(ts) for ts in hanging.values())
        into.problems.append(
            f"{len(hanging)} hanging transaction(s) holding {parts} partition(s) "
            f"({', '.join(t.where for ts in hanging.values() for t in ts)}): read_committed consumers are stuck there"
        )
        into.critical = True
        into.actions.append(Action("Hanging transactions", "hanging-txns"))
    stalled = {pid: ts for pid, ts in by_pid.items() if pid not in hanging and any(_stalled(t, now) for t in ts)}
    if stalled:
        # within its timeout, but its producer has gone quiet while others' records pile up behind
        # it: read_committed consumers wait now (chaos trial 1129:6, a producer SIGKILLed mid-
        # transaction, was answered "Healthy" while `why hanging transaction` said warning)
        held = [t for ts in stalled.values() for t in ts]
        first = min((t.abort_at_ms for t in held if t.abort_at_ms is not None), default=None)
        into.problems.append(
            f"{len(stalled)} open transaction(s) whose producer stopped writing hold read_committed consumers "
            f"back on {', '.join(t.where for t in held)}"
            + (f" (within the timeout: the coordinator aborts it at {utc_clock(first)})" if first is not None else "")
        )
        into.actions.append(Action("Hanging transactions", "hanging-txns"))
    within = len(by_pid) - len(hanging) - len(stalled)
    if within:
        into.notices.append(f"{within} open transaction(s) within their timeout")


# A producer in a transaction normally writes or commits within a second or two (Kafka Streams
# commits every 100 ms under exactly-once): one quiet this long while its open transaction holds a
# partition's last stable offset is holding read_committed consumers back.
STALLED_TXN_IDLE_MS = 5_000


def _stalled(t: OpenTxn, now_ms: int) -> bool:
    idle = now_ms - t.last_write_ms if t.last_write_ms else t.age_ms(now_ms)
    return t.holds_lso and idle is not None and idle >= STALLED_TXN_IDLE_MS


# `status` answers within seconds even with no active controller (ListPartitionReassignments and
# DescribeClientQuotas then wait the whole admin timeout): what is not read in time is said so
ACTIVE_BUDGET_S = 3.0


async def read_active(
    gw: AdminGateway, registered: frozenset[int], topics: list[TopicInfo] | None = None
) -> ActiveFindings:
    """Transactions, reassignments and client quotas, read at the same time."""
    out = ActiveFindings()
    txn, moves, quotas = await asyncio.gather(
        asyncio.wait_for(read_open_transactions(gw, topics=topics), ACTIVE_BUDGET_S),
        asyncio.wait_for(read_reassignments(gw, registered), ACTIVE_BUDGET_S),
        asyncio.wait_for(read_quotas(gw), ACTIVE_BUDGET_S),
        return_exceptions=True,
    )
    late = f"not read within {ACTIVE_BUDGET_S:g} s"
    if isinstance(txn, asyncio.TimeoutError):
        out.evidence.append(Evidence("Transactions", late, TXN_SOURCE, "bad"))
    elif isinstance(txn, GatewayError):
        out.evidence.append(Evidence("Transactions", f"not read ({txn})", TXN_SOURCE, "bad"))
    elif isinstance(txn, BaseException):
        raise txn
    else:
        _txn_part(txn, out)
    if isinstance(moves, asyncio.TimeoutError):
        # no active controller answers ListPartitionReassignments: status must not wait for it
        out.evidence.append(Evidence("Reassignments", late, "live: list_partition_reassignments", "bad"))
    elif isinstance(moves, BaseException):
        raise moves
    else:
        out.evidence += reassignment_evidence(moves)
        sentence = reassignment_sentence(moves)
        if moves.stalled:
            out.problems.append(sentence.rstrip("."))
            out.critical = True
            out.actions.append(Action("Why is the reassignment stuck", "why stalled reassignment"))
        elif sentence:
            out.notices.append(sentence.rstrip("."))
    if isinstance(quotas, asyncio.TimeoutError):
        out.evidence.append(Evidence("Client quotas", late, "live: describe_client_quotas", "bad"))
    elif isinstance(quotas, BaseException):
        raise quotas
    else:
        out.evidence += quota_evidence(quotas)
        if quotas.throttling:
            out.notices.append(quota_sentence(quotas).rstrip(".") + " (clients above it are throttled)")
    return out
