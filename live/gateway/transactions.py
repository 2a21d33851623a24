"""Transaction reads (kafka-python's KIP-664 admin APIs, which librdkafka lacks): the
transactions each broker's coordinator knows, their descriptions, the hanging ones (open longer
than the coordinator should allow), and the producers active on a partition. Aborting one is an
action (``live.gateway.actions``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from live import model
from live.gateway.errors import GatewayError, UnknownTopic, UnknownTransactionalId
from live.gateway.kafkapython import COORDINATOR_RETRY_S
from live.gateway.reads import ReadsMixin

log = logging.getLogger(__name__)


class TransactionsMixin(ReadsMixin):
    """Transaction reads; see the module docstring."""

    async def list_transactions(
        self, broker_ids: Iterable[int] | None = None, states: Iterable[str] | None = None
    ) -> list[model.TransactionListing]:
        """Transactions known to each broker's transaction coordinator. By
        default asks every registered broker (one request each, in parallel),
        so a dead broker does not fail the whole listing; it is logged."""
        return (await self.list_transactions_partial(broker_ids, states))[0]

    async def list_transactions_partial(
        self, broker_ids: Iterable[int] | None = None, states: Iterable[str] | None = None
    ) -> tuple[list[model.TransactionListing], dict[int, str]]:
        """list_transactions, plus the brokers whose coordinator could not be read (id -> error):
        an answer built on a listing with gaps is partial and must say which brokers it lacks."""
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()
        states = list(states) if states else None

        async def one(bid: int) -> dict[int, list[Any]]:
            # A coordinator that is loading its __transaction_state partitions (just after a
            # failover moved them to it) answers in a moment: ask again rather than leave it unread.
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    # coordinator id -> kafka-python's TransactionListing objects
                    listed: dict[int, list[Any]] = await self._kp_call(
                        f"list_transactions on broker {bid}",
                        "list_transactions",
                        broker_ids=[bid],
                        state_filters=states,
                    )
                    return listed
                except GatewayError as e:
                    if e.code != "CoordinatorLoadInProgressError" or time.monotonic() + COORDINATOR_RETRY_S >= deadline:
                        raise
                    await asyncio.sleep(COORDINATOR_RETRY_S)

        results = await asyncio.gather(*(one(b) for b in ids), return_exceptions=True)
        out: list[model.TransactionListing] = []
        failures: list[tuple[int, GatewayError]] = []
        for bid, r in zip(ids, results):
            if isinstance(r, BaseException):
                if not isinstance(r, GatewayError):
                    raise r
                failures.append((bid, r))
                continue
            for coord, listings in r.items():
                out.extend(
                    model.TransactionListing(
                        t.transactional_id, t.producer_id, getattr(t.state, "value", str(t.state)), coord
                    )
                    for t in listings
                )
        if failures and len(failures) == len(ids):
            raise failures[0][1]
        for bid, exc in failures:
            log.warning("list_transactions: broker %s of cluster %r failed: %s", bid, self.name, exc)
        return sorted(out, key=lambda t: t.transactional_id), {bid: str(exc) for bid, exc in failures}

    @staticmethod
    def _txn_desc(tid: str, d: Any) -> model.TransactionDescription:
        """``d``: kafka-python's TransactionDescription (an untyped library)."""
        return model.TransactionDescription(
            transactional_id=tid,
            coordinator_id=d.coordinator_id,
            state=getattr(d.state, "value", str(d.state)),
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            timeout_ms=d.transaction_timeout_ms,
            start_time_ms=d.transaction_start_time_ms,
            partitions=sorted((tp.topic, tp.partition) for tp in d.topic_partitions),
        )

    async def describe_transactions(self, ids: Iterable[str]) -> dict[str, model.TransactionDescription]:
        ids = list(dict.fromkeys([ids] if isinstance(ids, str) else ids))
        if not ids:
            return {}
        try:
            res = await self._kp_coordinator_call("describe_transactions", "describe_transactions", ids, 1, ids)
        except UnknownTransactionalId as e:
            raise UnknownTransactionalId(ids, self.name, str(e).split("(", 1)[-1].rstrip(")")) from None
        return {tid: self._txn_desc(tid, d) for tid, d in res.items()}

    async def find_hanging_transactions(
        self,
        broker_ids: Iterable[int] | None = None,
        max_transaction_timeout_ms: int = 900_000,
        min_age_ms: int | None = None,
    ) -> list[model.HangingTransaction]:
        """Open transactions older than a threshold (list + describe).

        Default threshold, like kafka-python's ``find_hanging_transactions``
        and ``kafka-transactions.sh --find-hanging``: the broker's
        ``transaction.max.timeout.ms`` (default 15 min) + 5 min; a
        transaction that old should have been aborted by its coordinator.
        ``min_age_ms`` overrides it (e.g. the topic's expected txn duration)."""
        threshold = min_age_ms if min_age_ms is not None else max_transaction_timeout_ms + 5 * 60_000
        listings = await self.list_transactions(broker_ids)
        done_states = {"Empty", "CompleteCommit", "CompleteAbort", "Dead"}
        ids = sorted({t.transactional_id for t in listings if t.state not in done_states})
        if not ids:
            return []
        descs = await self.describe_transactions(ids)
        now_ms = int(time.time() * 1000)
        out: list[model.HangingTransaction] = []
        for tid, d in sorted(descs.items()):
            if d.state in done_states or d.start_time_ms < 0:
                continue
            age = now_ms - d.start_time_ms
            if age >= threshold:
                out.append(
                    model.HangingTransaction(
                        tid, d.producer_id, d.producer_epoch, d.state, age, d.coordinator_id, d.partitions
                    )
                )
        return out

    async def describe_producers(
        self, topic: str, partition: int, broker_id: int | None = None
    ) -> list[model.ProducerState]:
        """Active producers on a partition (from its leader, or ``broker_id``):
        ``current_txn_start_offset >= 0`` marks an open transaction."""
        from kafka.structs import TopicPartition as KTP

        tp = KTP(topic, int(partition))
        try:
            res = await self._kp_call(f"describe_producers {topic}-{partition}", "describe_producers", [tp], broker_id)
        except UnknownTopic:
            raise UnknownTopic([topic], self.name, f"partition {partition}") from None
        state = res.get(tp)
        if state is None:
            return []
        return [
            model.ProducerState(
                p.producer_id,
                p.producer_epoch,
                p.last_sequence,
                p.last_timestamp,
                p.coordinator_epoch,
                p.current_transaction_start_offset,
            )
            for p in state.active_producers
        ]
