"""Open transactions and the partitions whose last stable offset they hold back.

Two views are joined, because each alone is wrong in a real incident:
- the partitions: LSO < high watermark on a partition means read_committed consumers are stuck
  there, and DescribeProducers on that partition names the producer whose transaction starts at
  the LSO (current_txn_start_offset). This finds every blocking transaction, including one no
  coordinator remembers (the KIP-664 "hanging" case);
- the coordinators: ListTransactions + DescribeTransactions give the transactional id, the start
  time and the transaction's own timeout, hence when the coordinator will abort it by itself.
A transaction the coordinator still lists but that holds no partition (after `abort-txn` wrote
the markers, the coordinator keeps it "Ongoing" until its timeout) blocks nobody and is reported
as such, not as critical.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from live.gateway import AdminGateway, GatewayError
from live.model import PartitionOffsets, ProducerState, TopicInfo, TransactionDescription

# The coordinator checks for expired transactions periodically (transaction.abort.timed.out.
# transaction.cleanup.interval.ms, 10 s by default); past its timeout plus this slack, a
# transaction that is still open was not aborted by its coordinator: it is hanging.
EXPIRY_SLACK_MS = 60_000
MAX_SCAN_PARTITIONS = 20_000  # LSO scan bound: two ListOffsets reads of this many partitions
MAX_DESCRIBE = 50  # DescribeProducers calls per answer

TxnStatus = Literal["within-timeout", "past-timeout", "unknown-to-coordinator"]


@dataclass(frozen=True)
class OpenTxn:
    """One producer's open transaction on one partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    offsets: PartitionOffsets | None
    transactional_id: str | None = None
    coordinator_id: int | None = None
    start_time_ms: int | None = None
    timeout_ms: int | None = None
    last_write_ms: int | None = None

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def holds_lso(self) -> bool:
        return self.offsets is not None and self.offsets.last_stable == self.start_offset and self.offsets.lso_lag > 0

    @property
    def abort_at_ms(self) -> int | None:
        if self.start_time_ms is None or self.timeout_ms is None:
            return None
        return self.start_time_ms + self.timeout_ms

    def age_ms(self, now_ms: int) -> int | None:
        if self.start_time_ms is not None:
            return max(0, now_ms - self.start_time_ms)
        return max(0, now_ms - self.last_write_ms) if self.last_write_ms else None

    def status(self, now_ms: int) -> TxnStatus:
        if self.transactional_id is None:
            return "unknown-to-coordinator"
        at = self.abort_at_ms
        return "past-timeout" if at is not None and now_ms > at + EXPIRY_SLACK_MS else "within-timeout"


@dataclass
class TxnReport:
    open: list[OpenTxn] = field(default_factory=list)
    coordinator_only: list[TransactionDescription] = field(default_factory=list)  # listed, holding no partition
    unread: dict[str, str] = field(default_factory=dict)  # what could not be read -> why
    now_ms: int = 0

    @property
    def hanging(self) -> list[OpenTxn]:
        return [t for t in self.open if t.status(self.now_ms) != "within-timeout"]

    @property
    def partial(self) -> bool:
        return bool(self.unread)


def utc_clock(ms: int) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ms / 1000))


def _secs(ms: int | None) -> str:
    if ms is None:
        return "?"
    s = ms / 1000
    return f"{s:,.0f} s" if s < 120 else f"{s / 60:,.1f} min"


def describe_txn(t: OpenTxn, now_ms: int) -> str:
    """One evidence line: who, where, how far the LSO lags, and what happens next."""
    lag = t.offsets.lso_lag if t.offsets is not None else None
    who = f"producer {t.producer_id} (epoch {t.producer_epoch})" + (
        f", transactional id {t.transactional_id}" if t.transactional_id else ""
    )
    held = (
        f"LSO {t.offsets.last_stable:,} lags the high watermark {t.offsets.high_watermark:,} by {lag:,} records"
        if t.offsets is not None
        else f"open from offset {t.start_offset:,}"
    )
    age = t.age_ms(now_ms)
    status = t.status(now_ms)
    at = t.abort_at_ms
    if status == "within-timeout":
        fate = (
            (
                f"within its {_secs(t.timeout_ms)} timeout: the coordinator aborts it at {utc_clock(at)} (in {_secs(at - now_ms)}) "
                "unless the producer finishes it"
            )
            if at is not None
            else "within its timeout"
        )
    elif status == "past-timeout":
        fate = f"HANGING: past its {_secs(t.timeout_ms)} timeout by {_secs(now_ms - at if at is not None else None)} and still open"
    else:
        fate = "HANGING: no transaction coordinator knows this transaction, so nothing will ever abort it"
    return f"{who}: {held} for {_secs(age)}; {fate}"


async def read_open_transactions(
    gw: AdminGateway, *, topics: list[TopicInfo] | None = None, clock: Callable[[], float] = time.time
) -> TxnReport:
    """``topics``: the partition layout when the caller already read it (the digest's snapshot)."""
    report = TxnReport(now_ms=int(clock() * 1000))
    # The coordinators and the partitions are read at the same time.
    listing_task = asyncio.ensure_future(_coordinator_view(gw, report))
    try:
        if topics is None:
            topics = await gw.describe_topics()
    except BaseException:
        listing_task.cancel()
        raise
    descs = await listing_task
    tps = [(p.topic, p.partition) for t in topics for p in t.partitions if p.leader is not None]
    if len(tps) > MAX_SCAN_PARTITIONS:
        report.unread["partitions"] = f"only the first {MAX_SCAN_PARTITIONS:,} of {len(tps):,} partitions were scanned"
        tps = tps[:MAX_SCAN_PARTITIONS]
    seen = set(tps)
    for d in descs.values():  # partitions the coordinators name are always looked at
        tps.extend(tp for tp in d.partitions if tp not in seen)
    offsets = await gw.stable_offsets(tps)
    blocked = sorted((k for k, o in offsets.items() if o.lso_lag > 0), key=lambda k: -offsets[k].lso_lag)
    if len(blocked) > MAX_DESCRIBE:
        report.unread["producers"] = (
            f"producers read on the {MAX_DESCRIBE} most-lagging of {len(blocked)} blocked partitions"
        )
        blocked = blocked[:MAX_DESCRIBE]
    states = await asyncio.gather(*(gw.describe_producers(t, p) for t, p in blocked), return_exceptions=True)
    by_pid = {d.producer_id: d for d in descs.values()}
    holding: set[int] = set()
    for (topic, partition), res in zip(blocked, states):
        if isinstance(res, BaseException):
            if not isinstance(res, GatewayError):
                raise res
            report.unread[f"{topic}-{partition}"] = f"producers not readable: {res}"
            continue
        for s in res:
            if s.has_open_transaction:
                report.open.append(
                    _open_txn(topic, partition, s, offsets.get((topic, partition)), by_pid.get(s.producer_id))
                )
                holding.add(s.producer_id)
    report.coordinator_only = [d for d in descs.values() if d.producer_id not in holding]
    report.open.sort(
        key=lambda t: (t.status(report.now_ms) == "within-timeout", -(t.offsets.lso_lag if t.offsets else 0))
    )
    return report


def _open_txn(
    topic: str, partition: int, s: ProducerState, offsets: PartitionOffsets | None, d: TransactionDescription | None
) -> OpenTxn:
    return OpenTxn(
        topic,
        partition,
        s.producer_id,
        s.producer_epoch,
        s.coordinator_epoch,
        s.current_txn_start_offset,
        offsets,
        transactional_id=d.transactional_id if d else None,
        coordinator_id=d.coordinator_id if d else None,
        start_time_ms=d.start_time_ms if d and d.start_time_ms >= 0 else None,
        timeout_ms=d.timeout_ms if d else None,
        last_write_ms=s.last_timestamp if s.last_timestamp > 0 else None,
    )


async def _coordinator_view(gw: AdminGateway, report: TxnReport) -> dict[str, TransactionDescription]:
    """Open transactions as their coordinators describe them; gaps are recorded, not fatal."""
    done_states = {"Empty", "CompleteCommit", "CompleteAbort", "Dead"}
    try:
        listings, failed = await gw.list_transactions_partial()
    except GatewayError as exc:
        report.unread["coordinators"] = f"no transaction coordinator could be read: {exc}"
        return {}
    for bid, why in failed.items():
        report.unread[f"coordinator on broker {bid}"] = why
    ids = sorted({t.transactional_id for t in listings if t.state not in done_states})
    if not ids:
        return {}
    try:
        descs = await gw.describe_transactions(ids)
    except GatewayError as exc:
        report.unread["transaction descriptions"] = str(exc)
        return {}
    return {tid: d for tid, d in descs.items() if d.state not in done_states}
