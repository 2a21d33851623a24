"""The admin gateway to a real Kafka cluster: the only package that talks to Kafka's admin APIs.
Commands get plain dataclasses (``live.model``) or one of the ``GatewayError`` exceptions
(``live.gateway.errors``), never a client-library object.

Which library serves what
-------------------------
* confluent-kafka ``AdminClient`` (librdkafka) for what it does well:
  describe_cluster, metadata (``list_topics``: topics, leaders, replicas, ISR),
  describe_configs, incremental_alter_configs (topic / one broker),
  list_offsets (log end offsets), preferred leader election. Its calls return
  ``concurrent.futures.Future``s, awaited with
  ``asyncio.wait_for(asyncio.wrap_future(fut), ...)``; ``list_topics`` is a
  blocking C call (it releases the GIL) and runs in ``asyncio.to_thread``.
* kafka-python 3.x ``KafkaAdminClient`` for what librdkafka lacks:
  transactions (list / describe / find hanging / abort via WriteTxnMarkers),
  DescribeProducers, the KRaft metadata quorum, log dirs, partition
  reassignments, KIP-966 ELR (DescribeTopicPartitions) and the cluster-wide
  broker config default (librdkafka rejects the empty BROKER resource name)
  - plus the group-coordinator reads (OffsetFetch, DescribeGroups), because
  librdkafka 2.16 crashes the process there when the coordinator is not
  ready (see ``live.gateway.groups``). It is created on first use (its
  constructor connects), its blocking calls run in ``asyncio.to_thread``
  under ``asyncio.wait_for``, and the "kafka" logger is set to CRITICAL
  unless the application configured it (refused connections are reported
  as ClusterUnreachable instead of ERROR lines).

Timeouts: every call is bounded by ``timeout_s`` (librdkafka's own request
timeout = ``socket.timeout.ms``, plus ``asyncio.wait_for`` as a backstop at
timeout_s + 1 s). librdkafka reconnects forever on its own; the gateway never
waits on that. When a call times out or fails with a transport error, a quick
TCP probe of the bootstrap addresses (and librdkafka's "all brokers down"
event) decide between :class:`ClusterUnreachable` and :class:`Timeout`.

How the package is put together
-------------------------------
One class per concern, stacked, and :class:`AdminGateway` composes them::

    core.GatewayCore                  shared state, error log, failure diagnosis
      confluent.ConfluentTransport    the librdkafka client, callbacks, futures -> asyncio
        kafkapython.KafkaPythonTransport   the kafka-python client's lifecycle and calls
          reads.ReadsMixin            cluster, topics, configs, quorum, log dirs
            groups.GroupsMixin        consumer groups
            quotas.QuotasMixin        client quotas
            transactions.TransactionsMixin   transactions, producers
          actions.ActionsMixin        config changes, leader elections, aborts

Mixins rather than a gateway holding a transport object: the two transports share one error
log, one timeout and one closed flag, and each failure is diagnosed from what *both* saw (a
kafka-python timeout is classified with librdkafka's "all brokers down" event and the TCP
probe), so they are one object's state; the read and action modules only add methods over it.
Each layer names the one below it as its base class, so mypy checks every call across the
seams. ``errors`` and ``convert`` hold no state and are plain modules.
"""

from __future__ import annotations

from live.gateway.actions import ActionsMixin
from live.gateway.core import GRACE_S, PROBE_TIMEOUT_S
from live.gateway.errors import (
    CLUSTER_RESOURCE,
    AuthenticationFailed,
    ClusterUnreachable,
    GatewayError,
    NotAuthorized,
    Timeout,
    TlsFailed,
    UnknownGroup,
    UnknownTopic,
    UnknownTransactionalId,
    required_operation,
)
from live.gateway.groups import GroupsMixin
from live.gateway.kafkapython import COORDINATOR_RETRY_S, STALE_RETRY_S
from live.gateway.quotas import QuotasMixin
from live.gateway.transactions import TransactionsMixin

__all__ = [
    "AdminGateway",
    "AuthenticationFailed",
    "CLUSTER_RESOURCE",
    "COORDINATOR_RETRY_S",
    "ClusterUnreachable",
    "GRACE_S",
    "GatewayError",
    "NotAuthorized",
    "PROBE_TIMEOUT_S",
    "STALE_RETRY_S",
    "Timeout",
    "TlsFailed",
    "UnknownGroup",
    "UnknownTopic",
    "UnknownTransactionalId",
    "required_operation",
]


class AdminGateway(ActionsMixin, TransactionsMixin, GroupsMixin, QuotasMixin):
    """Async admin access to one cluster. ``config`` is a ClusterConfig, a
    cluster name from the clusters file, or None for the default cluster."""

    async def __aenter__(self) -> AdminGateway:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
