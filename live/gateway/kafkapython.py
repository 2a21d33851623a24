"""The kafka-python transport: its ``KafkaAdminClient`` and how the gateway drives it.

kafka-python serves what librdkafka lacks (transactions, DescribeProducers, the KRaft quorum,
log dirs, reassignments, ELR, the cluster-wide broker default) and the group-coordinator reads
(see ``live.gateway.groups``). Its client is created (= connected) on first use, from the
bootstrap addresses that answer first; its blocking calls run in ``asyncio.to_thread`` under the
gateway's timeout (``_blocking``), its exceptions are mapped onto the gateway's taxonomy, and a
call that names stale metadata or a moved coordinator is retried while the deadline allows.
The "kafka" logger is set to CRITICAL unless the application configured it: refused
connections are reported as ClusterUnreachable instead of ERROR lines.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import KafkaException

from kbot_settings import KbotSettings
from live import probe
from live.config import ClusterConfig
from live.gateway.confluent import ConfluentTransport
from live.gateway.errors import (
    AUTHZ_RESOURCE,
    AuthenticationFailed,
    ClusterUnreachable,
    GatewayError,
    UnknownTopic,
    UnknownTransactionalId,
)

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient  # an untyped library: Any to mypy

log = logging.getLogger(__name__)

T = TypeVar("T")

COORDINATOR_RETRY_S = 0.25
STALE_RETRY_S = 0.3

# kafka-python error class names meaning "its cached metadata is out of date: refresh, retry"
KP_STALE_METADATA = {
    "UnknownBrokerIdError",
    "NotLeaderOrFollowerError",
    "NotLeaderForPartitionError",
    "LeaderNotAvailableError",
    "NodeNotReadyError",
    "KafkaConnectionError",
}
# kafka-python error class names meaning "ask FindCoordinator again, retry"
KP_COORDINATOR_RETRIABLE = {
    "NotCoordinatorError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "KafkaConnectionError",
    "NodeNotReadyError",
}


class KafkaPythonTransport(ConfluentTransport):
    """The kafka-python admin client of one cluster, next to the librdkafka one it builds on."""

    def __init__(
        self, config: ClusterConfig | str | None = None, timeout_s: float = 10, *, settings: KbotSettings | None = None
    ):
        super().__init__(config, timeout_s, settings=settings)
        self._kp: KafkaAdminClient | None = None  # created on first use
        self._kp_failure: tuple[float, GatewayError] | None = None
        self._kp_lock = asyncio.Lock()

    async def _blocking(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call in a thread under wait_for, mapping kafka-python errors."""
        started = time.monotonic()
        import kafka.errors as E

        try:
            result = await self._bounded(asyncio.to_thread(fn, *args, **kwargs), started)
        except asyncio.TimeoutError:
            raise await self._failure(what, started) from None
        except KafkaException as e:
            raise await self._translate(e, what, started) from None
        except E.UnknownTopicOrPartitionError as e:
            raise UnknownTopic(self._topics_in(e), self.config.name, str(e)) from None
        except E.TransactionalIdNotFoundError as e:
            raise UnknownTransactionalId(["?"], self.config.name, str(e)) from None
        except (E.KafkaTimeoutError, E.KafkaConnectionError, E.RequestTimedOutError, E.NodeNotReadyError) as e:
            raise await self._failure(what, started, f"{type(e).__name__}: {e}", type(e).__name__) from None
        except E.AuthorizationError as e:
            name = type(e).__name__
            if name in AUTHZ_RESOURCE:
                raise self._not_authorized(name, what, self._topics_in(e) if name.startswith("Topic") else ()) from None
            raise AuthenticationFailed(f"{what} on cluster {self.config.name!r}: {e}", self.config.name, name) from None
        except E.SaslAuthenticationFailedError as e:
            raise await self._failure(what, started, f"SASL authentication error: {e}", type(e).__name__) from None
        except E.KafkaError as e:
            raise GatewayError(
                f"{what} failed on cluster {self.config.name!r}: {type(e).__name__}: {e}",
                self.config.name,
                type(e).__name__,
            ) from None
        self._ok()
        return result

    @staticmethod
    def _topics_in(exc: BaseException) -> list[str]:
        found = re.findall(r"topic='([^']+)'", str(exc)) or re.findall(r"TopicPartition\(([^,]+),", str(exc))
        return found or ["?"]

    async def _kafka_python(self) -> KafkaAdminClient:
        """The kafka-python admin client, created (= connected) on first use.
        Callers that queued behind a failed attempt get its error instead of
        each bootstrapping again (which would add up the timeouts)."""
        self._check_open()
        if self._kp is not None:
            return self._kp
        queued_at = time.monotonic()
        async with self._kp_lock:
            if self._kp is not None:
                return self._kp
            failed = self._kp_failure
            if failed is not None and failed[0] >= queued_at:
                raise failed[1]
            try:
                bootstrap = await self._answering_bootstrap()
                await self._blocking("connecting (kafka-python admin client)", self._make_kp, bootstrap)
            except GatewayError as e:
                self._kp_failure = (time.monotonic(), e)
                raise
            if self._kp is None:  # pragma: no cover - _make_kp raises instead
                raise GatewayError("kafka-python admin client unavailable", self.config.name)
            return self._kp

    async def _answering_bootstrap(self) -> list[str]:
        """The configured bootstrap servers, those that answer a probe first. kafka-python
        bootstraps from one address at a time and gives up at its timeout, so a paused broker
        first in the list (exactly the incident being asked about) would cost every transaction
        and quorum read. Nothing answering: the list as configured (kafka-python reports why)."""
        configured = list(self.config.bootstrap_list)
        targets: dict[int, tuple[str, int]] = {}
        for i, hp in enumerate(configured):
            host, _, port = hp.rpartition(":")
            if port.isdigit():
                targets[i] = (host, int(port))
        results = await probe.probe_all(targets)
        answering = [configured[i] for i, r in sorted(results.items()) if r.state == "answers"]
        return answering + [hp for hp in configured if hp not in answering]

    def _make_kp(self, bootstrap: list[str] | None = None) -> None:
        """Thread body: build the client and publish it, even when the awaiting
        coroutine already gave up (it will be reused or closed by close())."""
        from kafka.admin import KafkaAdminClient

        class _Client(KafkaAdminClient):  # type: ignore[misc]  # kafka-python has no type information
            # KafkaAdminClient starts its IO thread before bootstrapping; when
            # bootstrap fails, stop that thread instead of leaking it.
            def __init__(self, **configs: Any) -> None:
                try:
                    super().__init__(**configs)
                except BaseException:
                    for attr in ("_client", "_net"):
                        obj = getattr(self, attr, None)
                        try:
                            obj is not None and (obj.close() if attr == "_client" else obj.stop())
                        except Exception:
                            pass
                    raise

        # kafka-python logs every refused connection at ERROR/WARNING; the
        # gateway reports those as ClusterUnreachable/Timeout. Quiet it unless
        # the application configured the "kafka" logger itself.
        kafka_logger = logging.getLogger("kafka")
        if kafka_logger.level == logging.NOTSET:
            kafka_logger.setLevel(logging.CRITICAL)
        ms = max(1000, int(self.timeout_s * 1000))
        conf = self.config.kafka_python_conf()
        if bootstrap:
            conf["bootstrap_servers"] = bootstrap
        client = _Client(**conf, request_timeout_ms=ms, bootstrap_timeout_ms=ms, reconnect_backoff_max_ms=2000)
        if self._closed:
            client.close()
            return
        self._kp = client

    async def _kp_call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """A kafka-python admin call. kafka-python routes by its own cached metadata, which a
        long-running bot keeps across broker restarts: a request then names a broker id or a
        leader the cache no longer has right (UnknownBrokerIdError, NotLeaderOrFollower). Refresh
        the metadata and try again while the deadline allows, instead of answering from part of
        the cluster. The result is whatever kafka-python returns (an untyped library)."""
        client = await self._kafka_python()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await self._blocking(what, getattr(client, method), *args, **kwargs)
            except (ClusterUnreachable, UnknownTopic, UnknownTransactionalId):
                raise
            except GatewayError as e:
                if e.code not in KP_STALE_METADATA or time.monotonic() + STALE_RETRY_S >= deadline:
                    raise
                log.info("%s on %r: %s; refreshing kafka-python metadata and retrying", what, self.name, e.code)
                await asyncio.sleep(STALE_RETRY_S)
                try:
                    await self._blocking(
                        "metadata refresh (kafka-python)", client._manager.run, client._manager.cluster.refresh_metadata
                    )
                except GatewayError:
                    pass  # the retry reports what is wrong

    def _forget_coordinators(self, keys: Iterable[str], key_type: int) -> None:
        """kafka-python's admin client caches group/transaction coordinators
        forever; after a coordinator error drop the entries so the next try
        sends FindCoordinator again (private attribute, guarded)."""
        client = self._kp
        coords = getattr(getattr(getattr(client, "_manager", None), "cluster", None), "_coordinators", None)
        if not isinstance(coords, dict):
            return
        for k in list(coords):
            if isinstance(k, tuple) and len(k) == 2 and int(k[0]) == key_type and k[1] in set(keys):
                coords.pop(k, None)

    async def _kp_coordinator_call(self, what: str, method: str, keys: list[str], key_type: int, *args: Any) -> Any:
        """A kafka-python call routed to a group/transaction coordinator:
        retried (with a fresh FindCoordinator) while the coordinator is
        loading, moving or unavailable, until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await self._kp_call(what, method, *args)
            except (ClusterUnreachable, UnknownTopic, UnknownTransactionalId):
                raise
            except GatewayError as e:
                self._forget_coordinators(keys, key_type)
                if e.code in KP_COORDINATOR_RETRIABLE and time.monotonic() + COORDINATOR_RETRY_S < deadline:
                    await asyncio.sleep(COORDINATOR_RETRY_S)
                    continue
                raise

    async def _close_other_clients(self) -> None:
        kp, self._kp = self._kp, None
        if kp is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(kp.close), self.timeout_s)
            except Exception as e:  # closing must not raise
                log.debug("closing kafka-python admin client: %s", e)


def alter_cluster_default(client: KafkaAdminClient, key: str, value: str | None, validate_only: bool) -> None:
    """Thread body: SET (or DELETE, ``value=None``) ``key`` as the cluster-wide broker default.
    That is the BROKER resource with an empty name, which librdkafka refuses ("Invalid
    ConfigResource") and kafka-python's alter_configs will not send (it wants an integer broker
    name), so the IncrementalAlterConfigsRequest is built here."""
    import kafka.errors as E
    from kafka.protocol.admin import IncrementalAlterConfigsRequest

    op = 1 if value is None else 0  # AlterConfigOp DELETE / SET
    request = IncrementalAlterConfigsRequest(
        resources=[(4, "", [(key, op, None if value is None else str(value))])],  # 4 = BROKER
        validate_only=validate_only,
    )
    response = client._manager.run(client._manager.send, request)
    for r in response.responses:
        if r.error_code:
            raise E.for_code(r.error_code)(r.error_message or "")
