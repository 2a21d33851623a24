"""Open and hanging transactions, and producer fencing, read live from the transaction
coordinators."""

from __future__ import annotations

import time

from diagnosis.entry_ids import (
    HANGING_TRANSACTION,
    PRODUCER_FENCING,
)
from diagnosis.findings import LiveFindings
from diagnosis.snapshot import broker_list
from diagnosis.txn_evidence import OpenTxn, TxnReport, describe_txn, read_open_transactions
from framework.reply import Action, Evidence, Severity
from live.gateway import AdminGateway
from live.model import TransactionDescription


def transaction_findings(report: TxnReport, min_age_ms: int | None = None) -> LiveFindings:
    """Open transactions -> verdict. Severity: a transaction nothing will abort (past its timeout,
    or unknown to every coordinator) is critical; one its coordinator will abort on its own still
    blocks read_committed consumers until then (warning); none is ok, unless part of the cluster
    could not be read, in which case the answer says it is partial instead of claiming health."""
    now = report.now_ms
    shown = [t for t in report.open if min_age_ms is None or (t.age_ms(now) or 0) >= min_age_ms]
    evidence = [
        Evidence(
            f"{t.where}", describe_txn(t, now), "live: list_offsets + describe_producers + describe_transactions", "bad"
        )
        for t in shown
    ]
    for d in report.coordinator_only:
        evidence.append(
            Evidence(
                f"Transaction {d.transactional_id}",
                f"producer {d.producer_id}: its coordinator still lists it as {d.state}, but it holds no partition's LSO "
                "(aborted or completed on the partitions); the coordinator expires it"
                + (
                    f" at {time.strftime('%H:%M:%S UTC', time.gmtime((d.start_time_ms + d.timeout_ms) / 1000))}"
                    if d.start_time_ms >= 0
                    else ""
                ),
                "live: describe_transactions",
                "neutral",
            )
        )
    for what, why in sorted(report.unread.items()):
        evidence.append(Evidence(f"Not read: {what}", why, "live", "bad"))
    hanging = [t for t in shown if t.status(now) != "within-timeout"]

    def lag(t: OpenTxn) -> str:
        return f"{t.offsets.lso_lag:,}" if t.offsets is not None else "?"

    lead = [(HANGING_TRANSACTION, "live: " + describe_txn(t, now)) for t in shown[:1]]
    actions = [Action(f"Abort on {t.where}", abort_command(t, now), mutating=True) for t in (hanging or shown)[:3]]
    # one transaction may hold several partitions: count producers, name their partitions
    txns = {t.producer_id for t in shown}
    stuck = {t.producer_id for t in hanging}

    def held(pid: int) -> str:
        parts = [t.where for t in shown if t.producer_id == pid]
        return parts[0] if len(parts) == 1 else f"{len(parts)} partitions ({', '.join(parts[:6])})"

    partial = (
        " This answer is partial: " + "; ".join(f"{k} not read" for k in sorted(report.unread)) + "."
        if report.partial
        else ""
    )
    if hanging:
        worst = hanging[0]
        verdict = (
            f"{len(stuck)} hanging transaction(s): producer {worst.producer_id} holds "
            + (
                f"{worst.where}'s last stable offset {lag(worst)} records behind"
                if held(worst.producer_id) == worst.where
                else f"the last stable offsets of {held(worst.producer_id)}, {lag(worst)} records behind on {worst.where},"
            )
            + " and nothing will abort it; "
            "read_committed consumers are stuck there until it is aborted."
        )
        severity: Severity = "critical"
    elif shown:
        first = shown[0]
        at = first.abort_at_ms
        verdict = (
            f"{len(txns)} open transaction(s) hold read_committed consumers back: producer {first.producer_id} on "
            f"{held(first.producer_id)}, {lag(first)} records behind the high watermark"
            + ("" if held(first.producer_id) == first.where else f" on {first.where}")
            + ". "
            + (
                f"Still within its timeout: its coordinator aborts it at "
                f"{time.strftime('%H:%M:%S UTC', time.gmtime(at / 1000))} if its producer does not finish it."
                if at is not None
                else ""
            )
        )
        severity = "warning"
    else:
        verdict = "No open transaction holds any partition's last stable offset back; read_committed consumers are not blocked by one."
        severity = "ok"
    if report.partial and severity == "ok":
        severity = "warning"
    return LiveFindings(verdict + partial, severity, evidence, lead, actions)


def abort_command(t: OpenTxn, now_ms: int) -> str:
    """The abort a reply offers, runnable as offered: abort-txn refuses a transaction younger than
    its --min-age-ms (default: the brokers' transaction.max.timeout.ms, 15 min), so the offer
    carries the transaction's own age, rounded down to the second, when it is known."""
    cmd = f"abort-txn {t.topic} {t.partition} --producer-id {t.producer_id}"
    # abort-txn measures the age from the producer's last write to the partition
    idle = now_ms - t.last_write_ms if t.last_write_ms else t.age_ms(now_ms)
    return cmd if idle is None else f"{cmd} --min-age-ms {max(0, idle) // 1000 * 1000}"


async def check_hanging(gw: AdminGateway) -> LiveFindings:
    return transaction_findings(await read_open_transactions(gw))


# How many transactional ids the fencing check describes (newest transactions first).
MAX_FENCING_IDS = 200


def fencing_findings(descs: list[TransactionDescription], now_ms: int) -> LiveFindings:
    """Pure: transactional ids as their coordinators describe them -> the ones whose producer was
    re-initialised. Every InitProducerId for a transactional.id bumps its epoch and fences the
    instance before it: an epoch above 0 means a second instance (or a restart) took the id over,
    and the one with the older epoch now fails with PRODUCER_FENCED."""
    bumped = sorted(
        (d for d in descs if d.producer_epoch >= 1),
        key=lambda d: (-(d.start_time_ms if d.start_time_ms >= 0 else 0), -d.producer_epoch),
    )
    evidence = []
    for d in bumped[:10]:
        age = (
            f", its current transaction began {(now_ms - d.start_time_ms) / 1000:,.0f} s ago"
            if d.start_time_ms >= 0
            else ""
        )
        evidence.append(
            Evidence(
                f"Transactional id {d.transactional_id}",
                f"producer id {d.producer_id}, epoch {d.producer_epoch} ({initialisations(d.producer_epoch)}), "
                f"state {d.state}, coordinator {d.coordinator_id}{age}",
                "live: list/describe_transactions",
                "bad",
            )
        )
    if not bumped:
        return LiveFindings(
            f"No transactional id was re-initialised ({len(descs)} described): nothing shows one "
            "instance fencing another.",
            "ok",
            evidence,
        )
    top = bumped[0]
    verdict = (
        f"Transactional id {top.transactional_id} was taken over: producer id {top.producer_id} is at epoch "
        f"{top.producer_epoch}, so an instance initialised it after another one. With two live instances on "
        "one transactional.id every InitProducerId fences the other and the older one's sends and commits fail "
        "with PRODUCER_FENCED. Give each instance its own transactional.id; a fenced producer must be closed, "
        "not retried."
    )
    return LiveFindings(
        verdict,
        "warning",
        evidence,
        [
            (
                PRODUCER_FENCING,
                f"live: {top.transactional_id} re-initialised (producer {top.producer_id}, epoch {top.producer_epoch})",
            )
        ],
    )


def initialisations(epoch: int) -> str:
    """What an epoch says about how often the id was initialised. Not epoch + 1: an InitProducerId
    that finds a transaction still open bumps the epoch twice (once to abort that transaction, once
    for the new producer), so two init_transactions calls can leave epoch 2. Each initialisation
    after the first bumps it once or twice, so the epoch gives a lower bound."""
    return f"initialised at least {1 + (epoch + 1) // 2} times"


async def check_fencing(gw: AdminGateway) -> LiveFindings:
    listings, unread = await gw.list_transactions_partial()
    ids = list(dict.fromkeys(t.transactional_id for t in listings))[:MAX_FENCING_IDS]
    descs = list((await gw.describe_transactions(ids)).values()) if ids else []
    found = fencing_findings(descs, int(time.time() * 1000))
    if unread:
        found.notes.append(
            f"Coordinators on broker(s) {broker_list(unread)} were not read: their transactional ids are missing."
        )
    return found
