"""The changes the gateway can make, each only ever on what the caller names: a topic's or a
broker's config (IncrementalAlterConfigs, or the cluster-wide broker default through
kafka-python), a PREFERRED leader election on explicit partitions, and an ABORT marker for one
producer's open transaction on one partition (WriteTxnMarkers, kafka-python). Commands run
these through the operator's gateway (``live.pool.GatewayPool.operator``)."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition

# confluent_kafka.admin re-exports these from private modules without listing them in __all__
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]

from live import model
from live.gateway.convert import enum_name, tp_list
from live.gateway.errors import UnknownTopic
from live.gateway.kafkapython import KafkaPythonTransport, alter_cluster_default


class ActionsMixin(KafkaPythonTransport):
    """Config changes, preferred leader elections and transaction aborts; see the module docstring."""

    async def alter_topic_config(self, topic: str, key: str, value: str | None, validate_only: bool = False) -> None:
        """SET ``key=value`` on a topic (``value=None`` deletes the override,
        i.e. back to the broker default) via IncrementalAlterConfigs."""
        await self._alter_config(ResourceType.TOPIC, topic, key, value, validate_only, topics=[topic])

    async def alter_broker_config(
        self, broker: int | None, key: str, value: str | None, validate_only: bool = False
    ) -> None:
        """SET ``key=value`` as a dynamic config of one broker, or as the
        cluster-wide broker default when ``broker`` is None (``value=None``
        deletes the override)."""
        if broker is not None:
            await self._alter_config(ResourceType.BROKER, str(int(broker)), key, value, validate_only)
            return
        # The cluster-wide default is the BROKER resource with an empty name: librdkafka and
        # kafka-python's alter_configs both refuse it (see alter_cluster_default).
        self._check_open()
        what = f"incremental_alter_configs cluster-wide broker default {key}"
        client = await self._kafka_python()
        await self._blocking(what, alter_cluster_default, client, key, value, bool(validate_only))

    async def _alter_config(
        self,
        restype: ResourceType,
        name: str,
        key: str,
        value: str | None,
        validate_only: bool,
        topics: Iterable[str] = (),
    ) -> None:
        self._check_open()
        op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        entry = ConfigEntry(key, None if value is None else str(value), incremental_operation=op)
        res = ConfigResource(restype, name, incremental_configs=[entry])
        futs = self._rdkafka().incremental_alter_configs(
            [res], validate_only=bool(validate_only), request_timeout=self.timeout_s
        )
        what = f"incremental_alter_configs {enum_name(restype).lower()} {name or '<cluster default>'!r} {key}"
        await self._await(futs[res], what, topics=topics)

    async def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an ABORT marker for the producer's open transaction on one
        partition (WriteTxnMarkers to the leader, like
        ``kafka-transactions.sh abort``). Take producer id/epoch and
        coordinator epoch from :meth:`describe_producers`."""
        from kafka.admin._transactions import AbortTransactionSpec
        from kafka.structs import TopicPartition as KTP

        spec = AbortTransactionSpec(
            KTP(topic, int(partition)), int(producer_id), int(producer_epoch), int(coordinator_epoch)
        )
        try:
            await self._kp_call(
                f"abort_transaction {topic}-{partition} producer {producer_id}", "abort_transaction", spec
            )
        except UnknownTopic:
            raise UnknownTopic([topic], self.name, f"partition {partition}") from None

    async def elect_preferred_leaders(self, topic_partitions: Iterable[object] | None) -> list[model.ElectionResult]:
        """PREFERRED leader election on an explicit, non-empty list of
        (topic, partition). Never UNCLEAN, never "all partitions"."""
        self._check_open()
        if topic_partitions is None:
            raise ValueError(
                "elect_preferred_leaders needs an explicit list of (topic, partition); "
                "electing on all partitions implicitly is not allowed"
            )
        tps = list(dict.fromkeys(tp_list(topic_partitions)))
        if not tps:
            raise ValueError("elect_preferred_leaders needs at least one (topic, partition)")
        # No request_timeout/operation_timeout kwargs: confluent-kafka 2.16's
        # elect_leaders raises SystemError ("more argument specifiers than
        # keyword list entries") for either; both default to socket.timeout.ms,
        # which __init__ sets to timeout_s.
        fut = self._rdkafka().elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in tps])
        res = await self._await(fut, "elect_leaders (preferred)", topics=[t for t, _ in tps])
        by_tp = {(tp.topic, tp.partition): err for tp, err in res.items()}
        out: list[model.ElectionResult] = []
        for t, p in tps:
            err = by_tp.get((t, p))
            kerr = err.args[0] if isinstance(err, KafkaException) and err.args else err
            if kerr is None:
                out.append(model.ElectionResult(t, p, "elected", None))
            elif isinstance(kerr, KafkaError) and kerr.code() == KafkaError.ELECTION_NOT_NEEDED:
                out.append(model.ElectionResult(t, p, "already_preferred", None))
            else:
                text = f"{kerr.name()}: {kerr.str()}" if isinstance(kerr, KafkaError) else str(kerr)
                out.append(model.ElectionResult(t, p, "failed", text))
        return out
