"""The librdkafka transport: confluent-kafka's ``AdminClient`` and everything needed to use it
from asyncio.

* the client itself, configured so no call outlives ``timeout_s`` and describing a topic never
  creates it;
* its callbacks: ``error_cb`` and the log lines feed the error log ``GatewayCore`` diagnoses
  failures from, and a daemon thread polls the handle so they are delivered;
* its ``concurrent.futures.Future`` results bridged to asyncio (``_await``, ``_await_all``) and
  the blocking ``list_topics`` run in a thread (``_metadata``);
* librdkafka errors mapped onto the gateway's taxonomy (``_translate``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

# confluent_kafka.admin re-exports these from private modules without listing them in __all__
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec  # type: ignore[attr-defined]

from kbot_settings import KbotSettings
from live.config import ClusterConfig
from live.gateway.core import GatewayCore
from live.gateway.errors import AUTHZ_RESOURCE, GatewayError, UnknownTopic

log = logging.getLogger(__name__)
rdlog = logging.getLogger("live.rdkafka")

K = TypeVar("K")
T = TypeVar("T")

# librdkafka error codes meaning "could not talk to a broker (in time)"
CONNECTIVITY = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,
    KafkaError.NETWORK_EXCEPTION,
}
_AUTH = {
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError._SSL,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


class _RdkafkaLogger:
    """librdkafka's log lines (delivered on ``poll()``): kept at DEBUG on the
    ``live.rdkafka`` logger, so an unreachable cluster doesn't flood stderr;
    the last error-level line is remembered for error messages."""

    def __init__(self, sink: ConfluentTransport):
        self._sink = weakref.ref(sink)

    def log(self, level: int, fmt: str, *args: object) -> None:
        msg = fmt % args if args else fmt
        sink = self._sink()
        if sink is not None and level >= logging.WARNING:
            sink._note_log(msg)
        rdlog.debug(msg)


class _DebugOnly:
    """librdkafka's log lines of a short-lived client, kept at DEBUG on ``live.rdkafka``."""

    def log(self, level: int, fmt: str, *args: object) -> None:
        rdlog.debug(fmt % args if args else fmt)


_QUIET = _DebugOnly()


class _Poller:
    """Serves librdkafka's queued log/error callbacks every ~0.5 s on a
    daemon thread while the gateway is open (they pile up otherwise). Holds
    the gateway weakly: the thread ends with close() or when the gateway is
    garbage-collected."""

    def __init__(self, gateway: ConfluentTransport, interval: float = 0.5):
        self._gw, self._interval = weakref.ref(gateway), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-rdkafka-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            gw = self._gw()
            admin = getattr(gw, "_admin", None)
            del gw
            if admin is None:
                return
            try:
                admin.poll(0)
            except Exception:  # pragma: no cover - a dying handle
                return
            del admin

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


class ConfluentTransport(GatewayCore):
    """The librdkafka admin client of one cluster; see the module docstring."""

    def __init__(
        self, config: ClusterConfig | str | None = None, timeout_s: float = 10, *, settings: KbotSettings | None = None
    ):
        super().__init__(config, timeout_s, settings=settings)
        config = self.config
        ms = max(1000, int(self.timeout_s * 1000))
        conf: dict[str, str | int | float | bool] = {
            **config.confluent_conf(),
            # the default timeout of every admin request (overridden per call)
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": min(ms, 10_000),
            "reconnect.backoff.ms": 200,
            "reconnect.backoff.max.ms": 2000,
            # describing a topic must never create it (the admin handle is a
            # producer-type handle in librdkafka, which defaults to true)
            "allow.auto.create.topics": False,
        }
        # kept for the one-broker clients of metadata_from (the same credentials and timeouts)
        self._conf = dict(conf)
        missing = config.missing_tls_files()
        if missing:
            raise GatewayError(
                f"cannot connect to cluster {config.name!r}: {'; '.join(missing)}. Point the setting at the "
                "PEM file (the CA that signed the brokers' certificates, or the bot's own certificate and key).",
                config.name,
            )
        try:
            # The callbacks go as keyword arguments, which confluent-kafka merges into the
            # configuration: its stub types the conf dict as plain values only.
            self._admin: AdminClient | None = AdminClient(conf, error_cb=self._on_error, logger=_RdkafkaLogger(self))
        except KafkaException as e:
            raise GatewayError(
                f"cannot create a Kafka admin client for cluster {config.name!r}: {e.args[0].str() if e.args else e}",
                config.name,
            ) from None
        self._poller = _Poller(self)

    def _rdkafka(self) -> AdminClient:
        """The librdkafka admin client of an open gateway (GatewayError once it is closed)."""
        self._check_open()
        if self._admin is None:  # pragma: no cover - close() sets the flag before dropping it
            raise self._closed_error()
        return self._admin

    # ---- callbacks (delivered by poll) ---------------------------------------------------
    def _on_error(self, err: KafkaError) -> None:
        now = time.monotonic()
        with self._lock:
            self._errors.append((now, err.name(), err.str()))
            if err.code() == KafkaError._ALL_BROKERS_DOWN and not err.str().startswith("0/"):
                self._all_down_at = now
        log.debug("librdkafka error on %s: %s", self.config.name, err)

    def _note_log(self, msg: str) -> None:
        with self._lock:
            self._errors.append((time.monotonic(), "LOG", msg))

    def _serve_callbacks(self) -> None:
        try:
            if self._admin is not None:
                self._admin.poll(0)
        except Exception:
            pass

    # ---- futures and blocking calls --------------------------------------------------------
    async def _await(self, fut: Future[T], what: str, started: float | None = None, topics: Iterable[str] = ()) -> T:
        """Await one librdkafka future under the gateway's timeout, mapping its errors."""
        started = time.monotonic() if started is None else started
        try:
            result = await self._bounded(asyncio.wrap_future(fut), started)
        except asyncio.TimeoutError:
            raise await self._failure(what, started) from None
        except KafkaException as e:
            raise await self._translate(e, what, started, topics) from None
        self._ok()
        return result

    async def _await_all(
        self, futs: Mapping[K, Future[T]], what: str, topics: Iterable[str] = ()
    ) -> dict[K, T | KafkaError]:
        """Await a dict of futures; returns key -> result or KafkaError (per-key errors)."""
        started = time.monotonic()
        keys = list(futs)
        try:
            done = await self._bounded(
                asyncio.gather(*(asyncio.wrap_future(futs[k]) for k in keys), return_exceptions=True), started
            )
        except asyncio.TimeoutError:
            raise await self._failure(what, started) from None
        out: dict[K, T | KafkaError] = {}
        for k, r in zip(keys, done):
            if isinstance(r, KafkaException) and r.args and isinstance(r.args[0], KafkaError):
                if r.args[0].code() in CONNECTIVITY and not any(not isinstance(x, BaseException) for x in done):
                    raise await self._translate(r, what, started, topics)
                out[k] = r.args[0]
            elif isinstance(r, BaseException):
                raise r
            else:
                out[k] = r
        if any(not isinstance(v, KafkaError) for v in out.values()):
            self._ok()
        return out

    async def _translate(
        self, exc: KafkaException, what: str, started: float, topics: Iterable[str] = ()
    ) -> GatewayError:
        err: KafkaError | None = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None:
            return GatewayError(f"{what} failed on cluster {self.config.name!r}: {exc}", self.config.name)
        code = err.code()
        if code in CONNECTIVITY:
            return await self._failure(what, started, err.str(), err.name())
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return UnknownTopic(topics or ["?"], self.config.name, err.str())
        if err.name() in AUTHZ_RESOURCE:
            return self._not_authorized(err.name(), what, topics)
        if code in _AUTH:
            return await self._failure(what, started, err.str(), err.name())
        return GatewayError(
            f"{what} failed on cluster {self.config.name!r}: {err.name()}: {err.str()}", self.config.name, err.name()
        )

    async def _metadata(self, topic: str | None = None) -> ClusterMetadata:
        """One Metadata request (all topics, or one topic) via list_topics."""
        admin = self._rdkafka()
        started = time.monotonic()
        kwargs: dict[str, Any] = {}
        if topic is not None:
            kwargs["topic"] = topic
        stop = threading.Event()
        deadline = time.monotonic() + self.timeout_s

        def sliced() -> ClusterMetadata:
            # list_topics blocks its thread for the whole timeout, and a thread cannot be
            # cancelled: asking in 1 s slices lets a call _bounded gave up on (rejected
            # credentials) end within a second instead of holding the process's exit.
            while True:
                left = deadline - time.monotonic()
                try:
                    return admin.list_topics(timeout=max(0.1, min(1.0, left)), **kwargs)
                except KafkaException as e:
                    err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                    # one long list_topics would have waited through these too
                    if err is None or err.code() not in CONNECTIVITY or stop.is_set() or left <= 1.0:
                        raise

        try:
            md = await self._bounded(asyncio.to_thread(sliced), started)
        except asyncio.TimeoutError:
            raise await self._failure("metadata request", started) from None
        except KafkaException as e:
            raise await self._translate(e, "metadata request", started) from None
        finally:
            stop.set()
        self._ok()
        return md

    def metadata_from(
        self, address: str, timeout_s: float, topic: str | None = None
    ) -> tuple[int | None, ClusterMetadata]:
        """One Metadata request (all topics, or ``topic``: the client never creates it) answered by
        the broker at ``address`` (blocking: run it in a thread), and who answered: None for that
        broker, else the id of the broker librdkafka sent it to.  A new client has only
        ``address`` to start from, and librdkafka reports an answer through the bootstrap
        connection as broker -1; it may still have learnt the other brokers first and asked one
        of them, which the id says."""
        conf = {**self._conf, "bootstrap.servers": address, "socket.timeout.ms": max(100, int(timeout_s * 1000))}
        client = AdminClient(conf, logger=_QUIET)
        md = client.list_topics(timeout=timeout_s) if topic is None else client.list_topics(topic, timeout=timeout_s)
        return (None if md.orig_broker_id < 0 else md.orig_broker_id), md

    # ---- lifecycle ----------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._poller.stop()
        await self._close_other_clients()
        try:
            if self._admin is not None:
                self._admin.poll(0)
        except Exception:
            pass
        self._admin = None

    async def _close_other_clients(self) -> None:
        """Hook for the transports built on this one: close their clients (must not raise)."""


def latest_offset() -> OffsetSpec:
    """ListOffsets' "latest" spec (the log end offset, or the LSO under read_committed)."""
    spec: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # unannotated in confluent-kafka
    return spec


def earliest_offset() -> OffsetSpec:
    """ListOffsets' "earliest" spec (the log start offset: retention deletes below it)."""
    spec: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # unannotated in confluent-kafka
    return spec
