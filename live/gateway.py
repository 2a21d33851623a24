"""The admin gateway to a real Kafka cluster: the only module that talks to
Kafka's admin APIs. Commands get plain dataclasses (``live.model``) or one of
the ``GatewayError`` exceptions below, never a client-library object.

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
  ready (see the consumer-groups section). It is created on first use (its
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
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from confluent_kafka import ElectionType, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, OffsetSpec, ResourceType)

from . import model, probe
from .config import ClusterConfig, get_cluster

log = logging.getLogger(__name__)
rdlog = logging.getLogger("live.rdkafka")

GRACE_S = 1.0            # asyncio backstop beyond librdkafka's own request timeout
PROBE_TIMEOUT_S = 1.0    # TCP probe of the bootstrap addresses after a failure
COORDINATOR_RETRY_S = 0.25
STALE_RETRY_S = 0.3

# librdkafka error codes meaning "could not talk to a broker (in time)"
_CONNECTIVITY = {
    KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT_QUEUE,
    KafkaError.NETWORK_EXCEPTION,
}
_AUTH = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL,
         KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
         KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
# kafka-python error class names meaning "its cached metadata is out of date: refresh, retry"
_KP_STALE_METADATA = {"UnknownBrokerIdError", "NotLeaderOrFollowerError", "NotLeaderForPartitionError",
                      "LeaderNotAvailableError", "NodeNotReadyError", "KafkaConnectionError"}
# kafka-python error class names meaning "ask FindCoordinator again, retry"
_KP_COORDINATOR_RETRIABLE = {"NotCoordinatorError", "CoordinatorLoadInProgressError",
                             "CoordinatorNotAvailableError", "KafkaConnectionError", "NodeNotReadyError"}


# ---- errors ----------------------------------------------------------------------

class GatewayError(Exception):
    """Base of every error the gateway raises."""

    def __init__(self, message: str, cluster: str | None = None, code: str | None = None):
        super().__init__(message)
        self.cluster = cluster
        self.code = code      # Kafka error name when the broker/librdkafka gave one


class ClusterUnreachable(GatewayError):
    """No broker of the cluster answered within the timeout."""


class Timeout(GatewayError):
    """The cluster is reachable but the call did not complete in time."""


class UnknownTopic(GatewayError):
    def __init__(self, topics: Iterable[str], cluster: str | None = None, detail: str = ""):
        self.topics = sorted(set(topics))
        names = ", ".join(self.topics)
        msg = f"unknown topic{'s' if len(self.topics) > 1 else ''} {names} in cluster {cluster!r}"
        super().__init__(msg + (f" ({detail})" if detail else ""), cluster)


class UnknownGroup(GatewayError):
    def __init__(self, group: str, cluster: str | None = None):
        self.group = group
        super().__init__(f"unknown consumer group {group!r} in cluster {cluster!r} "
                         f"(no members and no committed offsets)", cluster)


class UnknownTransactionalId(GatewayError):
    def __init__(self, transactional_ids: Iterable[str], cluster: str | None = None, detail: str = ""):
        self.transactional_ids = sorted(set(transactional_ids))
        super().__init__(f"unknown transactional id(s) {', '.join(self.transactional_ids)} in cluster "
                         f"{cluster!r}" + (f" ({detail})" if detail else ""), cluster)


class AuthenticationFailed(GatewayError):
    """SASL/SSL handshake or authorization failure."""


class TlsFailed(AuthenticationFailed):
    """The TLS handshake with the brokers failed (wrong CA, expired or misnamed certificate)."""


class NotAuthorized(AuthenticationFailed):
    """The broker refused a request: the principal lacks an ACL. Names the right that is missing,
    as an operator grants it: ``the operator principal needs ALTER_CONFIGS on TOPIC orders``."""

    def __init__(self, role: str, principal: str, operation: str, resource_type: str, resource_name: str,
                 what: str, cluster: str | None = None, code: str | None = None):
        self.role, self.principal = role, principal
        self.operation, self.resource_type, self.resource_name = operation, resource_type, resource_name
        self.what = what
        super().__init__(f"the {role} principal needs {operation} on {resource_type} {resource_name}: "
                         f"{what} was refused for {principal} on cluster {cluster!r}", cluster, code)

    def role_line(self) -> str:
        """The grant that is missing, as an operator would write it, without the call's details."""
        return f"the {self.role} principal ({self.principal}) needs {self.operation} on {self.resource_type} {self.resource_name}"


# Which ACL operation a request needs, by the gateway's own name for the call (``what``): the
# broker's error says which resource type refused, not which operation, and a grant needs both.
_REQUIRED_OP = (
    ("incremental_alter_configs", "ALTER_CONFIGS"), ("describe_configs", "DESCRIBE_CONFIGS"),
    ("elect_leaders", "ALTER"), ("abort_transaction", "ALTER"), ("describe_producers", "READ"),
)
# Authorization error (librdkafka name / kafka-python class) -> the resource type that refused it.
_AUTHZ_RESOURCE = {
    "TOPIC_AUTHORIZATION_FAILED": "TOPIC", "TopicAuthorizationFailedError": "TOPIC",
    "GROUP_AUTHORIZATION_FAILED": "GROUP", "GroupAuthorizationFailedError": "GROUP",
    "CLUSTER_AUTHORIZATION_FAILED": "CLUSTER", "ClusterAuthorizationFailedError": "CLUSTER",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TRANSACTIONAL_ID",
    "TransactionalIdAuthorizationFailedError": "TRANSACTIONAL_ID",
}
CLUSTER_RESOURCE = "kafka-cluster"   # the one resource name of Kafka's CLUSTER resource type


def required_operation(what: str) -> str:
    for prefix, op in _REQUIRED_OP:
        if what.startswith(prefix):
            return op
    return "DESCRIBE"


# ---- librdkafka callbacks ------------------------------------------------------------

class _RdkafkaLogger:
    """librdkafka's log lines (delivered on ``poll()``): kept at DEBUG on the
    ``live.rdkafka`` logger, so an unreachable cluster doesn't flood stderr;
    the last error-level line is remembered for error messages."""

    def __init__(self, sink: "AdminGateway"):
        self._sink = weakref.ref(sink)

    def log(self, level: int, fmt: str, *args) -> None:
        msg = fmt % args if args else fmt
        sink = self._sink()
        if sink is not None and level >= logging.WARNING:
            sink._note_log(msg)
        rdlog.debug(msg)


class _Poller:
    """Serves librdkafka's queued log/error callbacks every ~0.5 s on a
    daemon thread while the gateway is open (they pile up otherwise). Holds
    the gateway weakly: the thread ends with close() or when the gateway is
    garbage-collected."""

    def __init__(self, gateway: "AdminGateway", interval: float = 0.5):
        self._gw, self._interval = weakref.ref(gateway), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-rdkafka-poll", daemon=True)
        self._thread.start()

    def _run(self):
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

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=2)


def _kp_errors():
    import kafka.errors as E
    return E


def _tp_list(topic_partitions) -> list[tuple[str, int]]:
    out = []
    for tp in topic_partitions:
        if isinstance(tp, (tuple, list)) and len(tp) == 2:
            out.append((str(tp[0]), int(tp[1])))
        elif hasattr(tp, "topic") and hasattr(tp, "partition"):
            out.append((str(tp.topic), int(tp.partition)))
        else:
            raise TypeError(f"expected (topic, partition) pairs, got {tp!r}")
    return out


def _enum_name(value) -> str:
    return getattr(value, "name", None) or str(value)


def _snake(state: str) -> str:
    """'PreparingRebalance' -> 'PREPARING_REBALANCE' (group states as confluent names them)."""
    import re
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", state).upper()


def _config_source(value) -> str:
    """ConfigEntry.source arrives as a plain int from the C extension."""
    if isinstance(value, int) and not isinstance(value, ConfigSource):
        try:
            return ConfigSource(value).name
        except ValueError:
            return str(value)
    return _enum_name(value)


class AdminGateway:
    """Async admin access to one cluster. ``config`` is a ClusterConfig, a
    cluster name from the clusters file, or None for the default cluster."""

    def __init__(self, config: ClusterConfig | str | None = None, timeout_s: float = 10):
        if config is None or isinstance(config, str):
            config = get_cluster(config)
        self.config = config
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        self._errors: collections.deque[tuple[float, str, str]] = collections.deque(maxlen=20)
        self._all_down_at: float | None = None
        self._last_ok: float | None = None
        self._closed = False
        self._kp = None                   # kafka-python KafkaAdminClient, lazily
        self._kp_failure: tuple[float, GatewayError] | None = None
        self._kp_lock = asyncio.Lock()
        # Where each broker listened when last registered: a fenced broker vanishes from metadata,
        # and its address is what tells a dead process from a paused one (live.probe).
        self._broker_addresses: dict[int, tuple[str, int]] = {}
        self._controller_voters: dict[int, tuple[str, int]] | None = None
        ms = max(1000, int(self.timeout_s * 1000))
        conf = {
            **config.confluent_conf(),
            # the default timeout of every admin request (overridden per call)
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": min(ms, 10_000),
            "reconnect.backoff.ms": 200,
            "reconnect.backoff.max.ms": 2000,
            # describing a topic must never create it (the admin handle is a
            # producer-type handle in librdkafka, which defaults to true)
            "allow.auto.create.topics": False,
            "error_cb": self._on_error,
            "logger": _RdkafkaLogger(self),
        }
        try:
            self._admin = AdminClient(conf)
        except KafkaException as e:
            raise GatewayError(f"cannot create a Kafka admin client for cluster {config.name!r}: "
                               f"{e.args[0].str() if e.args else e}", config.name) from None
        self._poller = _Poller(self)

    # ---- bookkeeping ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    def __repr__(self) -> str:
        return f"AdminGateway({self.config.name!r}, {self.config.bootstrap!r}, timeout_s={self.timeout_s})"

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

    def _ok(self) -> None:
        self._last_ok = time.monotonic()
        self._all_down_at = None

    def _last_error_text(self, since: float) -> str | None:
        with self._lock:
            recent = [e for e in self._errors if e[0] >= since and e[1] != "_ALL_BROKERS_DOWN"]
        if not recent:
            return None
        text = recent[-1][2]
        # "[thrd:...]: 127.0.0.1:1/bootstrap: Connect to ... failed: ..." -> the useful tail
        return text.split("]: ", 1)[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise GatewayError(f"the gateway to cluster {self.config.name!r} is closed", self.config.name)

    async def _bootstrap_states(self) -> list[str]:
        """Each bootstrap address's answer to a TCP connect: "accepts", "refused" (nothing listens
        there) or "unreachable" (no answer in PROBE_TIMEOUT_S, or not an address)."""
        async def one(hp: str) -> str:
            host, _, port = hp.rpartition(":")
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                                   PROBE_TIMEOUT_S)
            except ConnectionRefusedError:
                return "refused"
            except (OSError, asyncio.TimeoutError, ValueError):
                return "unreachable"
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
            return "accepts"
        return list(await asyncio.gather(*(one(hp) for hp in self.config.bootstrap_list)))

    async def _probe(self) -> bool:
        """True if any bootstrap address accepts a TCP connection."""
        return "accepts" in await self._bootstrap_states()

    async def raise_if_nothing_listens(self) -> None:
        """Every bootstrap address refusing TCP connections means no broker runs there: say so now
        instead of after the admin timeout. A connection that is accepted, or that times out (a
        firewall, a paused host), proves nothing, and the caller goes ahead as usual."""
        states = await self._bootstrap_states()
        if states and all(s == "refused" for s in states):
            listed = ", ".join(self.config.bootstrap_list)
            raise ClusterUnreachable(
                f"Cannot reach the Kafka cluster {self.name!r}: every bootstrap address ({listed}) refuses "
                "connections, so no broker is running there."
                "[[terminal: Is it running? `kbot cluster status` shows the local one.]]"
                "[[slack: Whoever runs the bot can check the cluster and the bot's KBOT_BOOTSTRAP setting.]]",
                self.name)

    def _not_authorized(self, error_name: str, what: str, topics: Iterable[str] = ()) -> NotAuthorized:
        rtype = _AUTHZ_RESOURCE[error_name]
        if rtype == "CLUSTER":
            name = CLUSTER_RESOURCE
        elif rtype == "TOPIC":
            import re
            named = sorted(set(topics) - {"?"})
            if not named:  # kafka-python's errors do not name the topic; the call does
                m = re.match(r"describe_producers (.+)-\d+", what)
                named = [m.group(1)] if m else re.findall(r"'([^']+)'", what)
            name = ", ".join(named) or "the topics asked about"
        else:
            import re
            found = re.findall(r"'([^']+)'", what)
            name = found[0] if found else f"the {rtype.lower().replace('_', ' ')}s asked about"
        return NotAuthorized(self.config.role, self.config.principal, required_operation(what), rtype, name,
                             what, self.config.name, error_name)

    def _credentials_problem(self, since: float, lasting_only: bool = False) -> str | None:
        """The last SASL or TLS failure librdkafka reported since ``since`` (its text), if any.
        ``lasting_only``: only rejections that retrying cannot fix (a wrong password or an
        unverifiable certificate), not a handshake cut short by a broker going down."""
        with self._lock:
            texts = [e[2] for e in self._errors if e[0] >= since]
        for text in reversed(texts):
            if "SASL authentication error" in text or "certificate verify failed" in text:
                return text
            if not lasting_only and "SSL handshake failed" in text:
                return text
        return None

    async def _credentials_error(self, text: str, code: str | None) -> GatewayError:
        """One clear line for a failed SASL login or TLS handshake (never the password itself)."""
        c = self.config
        if "SASL" in text and "SSL handshake" not in text:
            return AuthenticationFailed(
                f"SASL authentication to Kafka cluster {c.name!r} failed for {c.principal} ({c.sasl_mechanism}): "
                f"wrong user name or password, or no such SCRAM user (the {c.role}'s sasl_username / sasl_password)",
                c.name, code or "SASL_AUTHENTICATION_FAILED")
        from . import tls
        why = None
        for hp in c.bootstrap_list:
            host, _, port = hp.rpartition(":")
            why = await asyncio.to_thread(tls.diagnose, host.strip("[]"), int(port), cafile=c.ssl_ca,
                                          certfile=c.ssl_cert, keyfile=c.ssl_key, password=c.ssl_key_password,
                                          timeout=PROBE_TIMEOUT_S * 2)
            if why:
                break
        if why is None:
            tail = text.split("SSL handshake failed: ", 1)[-1].split(" (after ", 1)[0]
            why = f"the TLS handshake failed ({tail})"
        return TlsFailed(f"TLS verification of Kafka cluster {c.name!r} failed: {why}", c.name, code or "_SSL")

    async def _failure(self, what: str, started: float, detail: str | None = None,
                       code: str | None = None) -> GatewayError:
        """Turn a timeout / transport failure into ClusterUnreachable or Timeout - or, when the
        brokers refused the credentials or the certificate, into one line saying so."""
        try:
            self._admin.poll(0)   # serve pending error/log callbacks
        except Exception:
            pass
        problem = self._credentials_problem(started)
        if problem is None and detail and ("SASL authentication error" in detail or "SSL handshake failed" in detail
                                           or "certificate verify failed" in detail):
            problem = detail
        if problem is None and code in ("SaslAuthenticationFailedError",):
            problem = "SASL authentication error: " + (detail or "")
        if problem is not None:
            return await self._credentials_error(problem, code if code and "SASL" in code.upper() else None)
        reachable = await self._probe()
        all_down = self._all_down_at is not None and self._all_down_at >= started
        last = self._last_error_text(started)
        bootstrap = ",".join(self.config.bootstrap_list)
        if not reachable or all_down:
            why = last or detail or ("connection refused or timed out" if not reachable else "all brokers down")
            return ClusterUnreachable(
                f"cannot reach the Kafka cluster {self.config.name!r} at {bootstrap} within "
                f"{self.timeout_s:g}s ({why}). Is it running? Try `kbot cluster status`.",
                self.config.name, code)
        return Timeout(
            f"{what} on Kafka cluster {self.config.name!r} ({bootstrap}) did not complete within "
            f"{self.timeout_s:g}s" + (f" ({detail})" if detail else "")
            + "; the brokers accept connections but did not answer in time (overloaded, paused or "
              "a partition/coordinator without a leader?)", self.config.name, code)

    async def _translate(self, exc: KafkaException, what: str, started: float,
                         topics: Iterable[str] = ()) -> GatewayError:
        err: KafkaError | None = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is None:
            return GatewayError(f"{what} failed on cluster {self.config.name!r}: {exc}", self.config.name)
        code = err.code()
        if code in _CONNECTIVITY:
            return await self._failure(what, started, err.str(), err.name())
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return UnknownTopic(topics or ["?"], self.config.name, err.str())
        if err.name() in _AUTHZ_RESOURCE:
            return self._not_authorized(err.name(), what, topics)
        if code in _AUTH:
            return await self._failure(what, started, err.str(), err.name())
        return GatewayError(f"{what} failed on cluster {self.config.name!r}: {err.name()}: {err.str()}",
                            self.config.name, err.name())

    # ---- plumbing: confluent futures, blocking calls -------------------------------------
    async def _bounded(self, aw, started: float):
        """Await ``aw`` for at most timeout_s + GRACE_S, like asyncio.wait_for - but give up at once
        (asyncio.TimeoutError; the caller's _failure then names the cause) when the brokers have
        rejected the credentials or the certificate since ``started``: librdkafka would go on
        retrying until the timeout, and those mistakes do not fix themselves."""
        task = asyncio.ensure_future(aw)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s + GRACE_S
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise asyncio.TimeoutError
                done, _ = await asyncio.wait({task}, timeout=min(0.25, remaining))
                if done:
                    return task.result()
                if self._credentials_problem(started, lasting_only=True) is not None:
                    raise asyncio.TimeoutError
        finally:
            if not task.done():
                task.cancel()

    async def _await(self, fut, what: str, started: float | None = None, topics: Iterable[str] = ()):
        started = time.monotonic() if started is None else started
        try:
            result = await self._bounded(asyncio.wrap_future(fut), started)
        except asyncio.TimeoutError:
            raise await self._failure(what, started) from None
        except KafkaException as e:
            raise await self._translate(e, what, started, topics) from None
        self._ok()
        return result

    async def _await_all(self, futs: dict, what: str, topics: Iterable[str] = ()) -> dict:
        """Await a dict of futures; returns key -> result or KafkaError (per-key errors)."""
        started = time.monotonic()
        keys = list(futs)
        try:
            done = await self._bounded(
                asyncio.gather(*(asyncio.wrap_future(futs[k]) for k in keys), return_exceptions=True), started)
        except asyncio.TimeoutError:
            raise await self._failure(what, started) from None
        out = {}
        for k, r in zip(keys, done):
            if isinstance(r, KafkaException) and r.args and isinstance(r.args[0], KafkaError):
                if r.args[0].code() in _CONNECTIVITY and not any(
                        not isinstance(x, BaseException) for x in done):
                    raise await self._translate(r, what, started, topics)
                out[k] = r.args[0]
            elif isinstance(r, BaseException):
                raise r
            else:
                out[k] = r
        if any(not isinstance(v, KafkaError) for v in out.values()):
            self._ok()
        return out

    async def _blocking(self, what: str, fn, *args, **kwargs):
        """Run a blocking call in a thread under wait_for, mapping kafka-python errors."""
        started = time.monotonic()
        E = _kp_errors()
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
        except (E.KafkaTimeoutError, E.KafkaConnectionError, E.RequestTimedOutError,
                E.NodeNotReadyError) as e:
            raise await self._failure(what, started, f"{type(e).__name__}: {e}", type(e).__name__) from None
        except E.AuthorizationError as e:
            name = type(e).__name__
            if name in _AUTHZ_RESOURCE:
                raise self._not_authorized(name, what, self._topics_in(e) if name.startswith("Topic") else ()) from None
            raise AuthenticationFailed(f"{what} on cluster {self.config.name!r}: {e}", self.config.name, name) from None
        except E.SaslAuthenticationFailedError as e:
            raise await self._failure(what, started, f"SASL authentication error: {e}", type(e).__name__) from None
        except E.KafkaError as e:
            raise GatewayError(f"{what} failed on cluster {self.config.name!r}: {type(e).__name__}: {e}",
                               self.config.name, type(e).__name__) from None
        self._ok()
        return result

    @staticmethod
    def _topics_in(exc) -> list[str]:
        import re
        found = re.findall(r"topic='([^']+)'", str(exc)) or re.findall(r"TopicPartition\(([^,]+),", str(exc))
        return found or ["?"]

    async def _kafka_python(self):
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
        targets = {}
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

        class _Client(KafkaAdminClient):
            # KafkaAdminClient starts its IO thread before bootstrapping; when
            # bootstrap fails, stop that thread instead of leaking it.
            def __init__(self, **configs):
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
        client = _Client(**conf, request_timeout_ms=ms,
                         bootstrap_timeout_ms=ms, reconnect_backoff_max_ms=2000)
        if self._closed:
            client.close()
            return
        self._kp = client

    async def _kp_call(self, what: str, method: str, *args, **kwargs):
        """A kafka-python admin call. kafka-python routes by its own cached metadata, which a
        long-running bot keeps across broker restarts: a request then names a broker id or a
        leader the cache no longer has right (UnknownBrokerIdError, NotLeaderOrFollower). Refresh
        the metadata and try again while the deadline allows, instead of answering from part of
        the cluster."""
        client = await self._kafka_python()
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await self._blocking(what, getattr(client, method), *args, **kwargs)
            except (ClusterUnreachable, UnknownTopic, UnknownTransactionalId):
                raise
            except GatewayError as e:
                if e.code not in _KP_STALE_METADATA or time.monotonic() + STALE_RETRY_S >= deadline:
                    raise
                log.info("%s on %r: %s; refreshing kafka-python metadata and retrying", what, self.name, e.code)
                await asyncio.sleep(STALE_RETRY_S)
                try:
                    await self._blocking("metadata refresh (kafka-python)", client._manager.run,
                                         client._manager.cluster.refresh_metadata)
                except GatewayError:
                    pass  # the retry reports what is wrong

    async def _live_broker_ids(self) -> list[int]:
        return (await self.describe_cluster()).broker_ids

    # ---- cluster & topics ----------------------------------------------------------------
    async def describe_cluster(self) -> model.ClusterInfo:
        self._check_open()
        desc = await self._await(self._admin.describe_cluster(request_timeout=self.timeout_s),
                                 "describe_cluster")
        brokers = sorted((model.Broker(n.id, n.host, n.port, n.rack) for n in desc.nodes),
                         key=lambda b: b.id)
        self._broker_addresses.update({b.id: (b.host, b.port) for b in brokers})
        expected = list(self.config.expected_brokers)
        present = {b.id for b in brokers}
        return model.ClusterInfo(
            cluster_id=desc.cluster_id,
            controller_id=desc.controller.id if desc.controller is not None else None,
            brokers=brokers, expected_brokers=expected,
            missing_brokers=[b for b in expected if b not in present])

    # ---- liveness of nodes the metadata no longer lists (live.probe) -----------------------
    def _unclaimed_bootstrap(self) -> list[tuple[str, int]]:
        """Bootstrap addresses that no known broker id listens on."""
        claimed = set(self._broker_addresses.values())
        out = []
        for hp in self.config.bootstrap_list:
            host, _, port = hp.rpartition(":")
            if port.isdigit() and (host.strip("[]"), int(port)) not in claimed:
                out.append((host.strip("[]"), int(port)))
        return out

    async def broker_liveness(self, broker_ids: Iterable[int]) -> dict[int, probe.ProbeResult]:
        """Probe the listeners of brokers that are missing from the metadata or suspected hung.

        The address is the one the broker had when the gateway last saw it registered; a process
        that never saw it (a one-shot ``kbot ask``) uses the bootstrap addresses no registered
        broker claims, when that is unambiguous (one broker missing, one address left) or when
        every unclaimed address gives the same answer. Brokers whose address is unknown are left
        out of the result: the caller says the probe was not possible instead of guessing."""
        ids = sorted(set(int(b) for b in broker_ids))
        if not ids:
            return {}
        known = {b: self._broker_addresses[b] for b in ids if b in self._broker_addresses}
        results = await probe.probe_all(known) if known else {}
        unknown = [b for b in ids if b not in known]
        leftovers = self._unclaimed_bootstrap() if unknown else []
        if unknown and leftovers:
            found = await probe.probe_all(dict(enumerate(leftovers)))
            if len(unknown) == 1 and len(leftovers) == 1:
                results[unknown[0]] = found[0]
            elif len({r.state for r in found.values()}) == 1:
                for b in unknown:
                    results[b] = found[0]
        return results

    async def controller_voters(self) -> dict[int, tuple[str, int]]:
        """The KRaft controllers the brokers are configured with (``controller.quorum.voters``, or
        ``controller.quorum.bootstrap.servers`` with negative placeholder ids), read once from a
        registered broker's static config. A broker answers DescribeConfigs about itself without
        the controller, so this works exactly when the quorum is in doubt."""
        if self._controller_voters is not None:
            return self._controller_voters
        ids = (await self.describe_cluster()).broker_ids
        if not ids:
            return {}
        configs = (await self.broker_configs(ids[:1]))[ids[0]]
        voters_cfg = configs.get("controller.quorum.voters")
        voters = probe.parse_voters(voters_cfg.value if voters_cfg else None)
        if not voters:
            boot = configs.get("controller.quorum.bootstrap.servers")
            voters = {-(i + 1): hp for i, hp in enumerate(probe.parse_addresses(boot.value if boot else None))}
        self._controller_voters = voters
        return voters

    async def controller_liveness(self) -> dict[int, probe.ProbeResult]:
        """Probe every configured controller (voter id -> result); empty if none is configured."""
        voters = await self.controller_voters()
        return await probe.probe_all(voters) if voters else {}

    async def _metadata(self, topic: str | None = None):
        """One Metadata request (all topics, or one topic) via list_topics."""
        self._check_open()
        started = time.monotonic()
        kwargs: dict[str, Any] = {}
        if topic is not None:
            kwargs["topic"] = topic
        stop = threading.Event()
        admin, deadline = self._admin, time.monotonic() + self.timeout_s

        def sliced():
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
                    if err is None or err.code() not in _CONNECTIVITY or stop.is_set() or left <= 1.0:
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

    async def topics(self, include_internal: bool = False) -> list[str]:
        md = await self._metadata()
        return sorted(t for t in md.topics if include_internal or not t.startswith("__"))

    async def describe_topics(self, names: Iterable[str] | None = None, include_internal: bool = False,
                              elr: bool = False) -> list[model.TopicInfo]:
        """Partition layout (leader, replicas, ISR) of ``names`` (default: all
        topics) from ONE Metadata request (librdkafka ``list_topics``), which
        carries replicas/ISR for every partition; measured faster than the
        DescribeTopics admin API for thousands of partitions. ``elr=True``
        adds KIP-966 ELR / last-known-ELR / offline replicas from
        DescribeTopicPartitions (kafka-python, paginated)."""
        wanted = None if names is None else list(dict.fromkeys(names))
        if wanted is not None and not wanted:
            return []
        md = await self._metadata(wanted[0] if wanted is not None and len(wanted) == 1 else None)
        out: list[model.TopicInfo] = []
        missing: list[str] = []
        for tname in (wanted if wanted is not None else sorted(md.topics)):
            t = md.topics.get(tname)
            if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
                if wanted is not None:
                    missing.append(tname)
                continue
            internal = tname.startswith("__")
            if wanted is None and internal and not include_internal:
                continue
            parts = [
                model.PartitionInfo(
                    topic=tname, partition=p.id,
                    leader=p.leader if p.leader is not None and p.leader >= 0 else None,
                    replicas=list(p.replicas), isr=list(p.isrs),
                    error=p.error.str() if p.error is not None else None)
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            ]
            out.append(model.TopicInfo(tname, parts, internal,
                                       t.error.str() if t.error is not None else None))
        if missing:
            raise UnknownTopic(missing, self.config.name)
        if elr and out:
            out = await self._with_elr(out)
        return out

    async def _with_elr(self, topics: list[model.TopicInfo]) -> list[model.TopicInfo]:
        """Merge KIP-966 fields from DescribeTopicPartitions (cursor-paginated)."""
        names = [t.name for t in topics]
        extra: dict[tuple[str, int], dict] = {}
        cursor = None
        for _ in range(10_000):  # bounded: one page per 2000 partitions
            page = await self._kp_call("describe_topic_partitions", "describe_topic_partitions",
                                       names, 2000, cursor)
            for t in page["topics"]:
                for p in t["partitions"]:
                    extra[(t["name"], p["partition_index"])] = p
            cursor = page.get("next_cursor")
            if not cursor:
                break
        from dataclasses import replace
        merged = []
        for t in topics:
            parts = []
            for p in t.partitions:
                x = extra.get((p.topic, p.partition))
                if x is not None:
                    p = replace(p, elr=list(x.get("eligible_leader_replicas") or []),
                                last_known_elr=list(x.get("last_known_elr") or []),
                                offline_replicas=list(x.get("offline_replicas") or []))
                parts.append(p)
            merged.append(replace(t, partitions=parts))
        return merged

    # ---- configs ---------------------------------------------------------------------
    @staticmethod
    def _config_values(entries: dict) -> dict[str, model.ConfigValue]:
        return {
            name: model.ConfigValue(
                value=e.value, is_default=bool(e.is_default), source=_config_source(e.source),
                read_only=bool(e.is_read_only), sensitive=bool(e.is_sensitive))
            for name, e in sorted(entries.items())
        }

    async def topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, model.ConfigValue]]:
        self._check_open()
        names = list(dict.fromkeys([names] if isinstance(names, str) else names))
        if not names:
            return {}
        futs = self._admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names],
                                            request_timeout=self.timeout_s)
        res = await self._await_all({r.name: f for r, f in futs.items()}, "describe_configs (topics)", names)
        missing = [n for n, r in res.items()
                   if isinstance(r, KafkaError) and r.code() == KafkaError.UNKNOWN_TOPIC_OR_PART]
        if missing:
            raise UnknownTopic(missing, self.config.name)
        for n, r in res.items():
            if isinstance(r, KafkaError):
                raise await self._translate(KafkaException(r), f"describe_configs of topic {n!r}",
                                            time.monotonic(), [n])
        return {n: self._config_values(res[n]) for n in names}

    async def broker_configs(self, ids: Iterable[int] | None = None) -> dict[int, dict[str, model.ConfigValue]]:
        """Configs of the given brokers (default: all registered ones). One
        request per broker: librdkafka allows one BROKER resource per call."""
        self._check_open()
        ids = list(ids) if ids is not None else await self._live_broker_ids()
        futs = {}
        for bid in ids:
            res = ConfigResource(ResourceType.BROKER, str(int(bid)))
            futs[int(bid)] = self._admin.describe_configs([res], request_timeout=self.timeout_s)[res]
        res = await self._await_all(futs, "describe_configs (brokers)")
        for bid, r in res.items():
            if isinstance(r, KafkaError):
                raise await self._translate(KafkaException(r), f"describe_configs of broker {bid}",
                                            time.monotonic())
        return {bid: self._config_values(res[bid]) for bid in ids}

    async def alter_topic_config(self, topic: str, key: str, value: str | None,
                                 validate_only: bool = False) -> None:
        """SET ``key=value`` on a topic (``value=None`` deletes the override,
        i.e. back to the broker default) via IncrementalAlterConfigs."""
        await self._alter_config(ResourceType.TOPIC, topic, key, value, validate_only, topics=[topic])

    async def alter_broker_config(self, broker: int | None, key: str, value: str | None,
                                  validate_only: bool = False) -> None:
        """SET ``key=value`` as a dynamic config of one broker, or as the
        cluster-wide broker default when ``broker`` is None (``value=None``
        deletes the override)."""
        if broker is not None:
            await self._alter_config(ResourceType.BROKER, str(int(broker)), key, value, validate_only)
            return
        # The cluster-wide default is the BROKER resource with an empty name.
        # librdkafka refuses an empty resource name ("Invalid ConfigResource")
        # and kafka-python's alter_configs insists on an integer broker name,
        # so send kafka-python's IncrementalAlterConfigsRequest ourselves.
        self._check_open()
        what = f"incremental_alter_configs cluster-wide broker default {key}"
        client = await self._kafka_python()
        await self._blocking(what, self._kp_alter_cluster_default, client, key, value, bool(validate_only))

    @staticmethod
    def _kp_alter_cluster_default(client, key: str, value: str | None, validate_only: bool) -> None:
        from kafka.protocol.admin import IncrementalAlterConfigsRequest
        E = _kp_errors()
        op = 1 if value is None else 0          # AlterConfigOp DELETE / SET
        request = IncrementalAlterConfigsRequest(
            resources=[(4, "", [(key, op, None if value is None else str(value))])],   # 4 = BROKER
            validate_only=validate_only)
        response = client._manager.run(client._manager.send, request)
        for r in response.responses:
            if r.error_code:
                raise E.for_code(r.error_code)(r.error_message or "")

    async def _alter_config(self, restype, name: str, key: str, value: str | None,
                            validate_only: bool, topics: Iterable[str] = ()) -> None:
        self._check_open()
        op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        entry = ConfigEntry(key, None if value is None else str(value), incremental_operation=op)
        res = ConfigResource(restype, name, incremental_configs=[entry])
        futs = self._admin.incremental_alter_configs([res], validate_only=bool(validate_only),
                                                     request_timeout=self.timeout_s)
        what = f"incremental_alter_configs {_enum_name(restype).lower()} {name or '<cluster default>'!r} {key}"
        await self._await(futs[res], what, topics=topics)

    # ---- consumer groups -------------------------------------------------------------
    # Group-coordinator requests (OffsetFetch, DescribeGroups) go through
    # kafka-python although librdkafka has them: confluent-kafka 2.16 /
    # librdkafka 2.16 crash the whole process when the group coordinator is not
    # ready (reproduced on a fresh cluster whose __consumer_offsets is still
    # being created - the state a coordinator is in after a failover, too):
    # list_consumer_group_offsets -> SIGSEGV on the first call;
    # describe_consumer_groups(request_timeout=5) -> times out, and the next
    # call aborts with "rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return:
    # Assertion `eonce->refcnt > 0' failed". A bot must not die on exactly the
    # incident it is asked about. ListGroups goes through kafka-python too, one
    # request per broker. The one librdkafka group call left is
    # describe_consumer_groups for KIP-848 groups, which kafka-python cannot
    # describe, and only after their coordinator has answered.

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

    async def _kp_coordinator_call(self, what: str, method: str, keys: list[str], key_type: int, *args):
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
                if e.code in _KP_COORDINATOR_RETRIABLE and time.monotonic() + COORDINATOR_RETRY_S < deadline:
                    await asyncio.sleep(COORDINATOR_RETRY_S)
                    continue
                raise

    async def consumer_group_lag(self, group: str, read_committed: bool = False) -> model.GroupLag:
        """Committed offset, log end offset and lag per partition of ``group``
        (partitions with a commit plus partitions assigned to members).
        Committed offsets and members: kafka-python (OffsetFetch,
        DescribeGroups); log end offsets: confluent ``list_offsets``."""
        return (await self.consumer_group_read(group, read_committed)).lag

    async def consumer_group_read(self, group: str, read_committed: bool = False) -> model.GroupRead:
        """One read of ``group``: its lag (as :meth:`consumer_group_lag`) plus its
        members and protocol, stamped with the wall-clock time of the read so
        that two reads can be compared (lag growing, members coming and going)."""
        result = (await self._read_groups([group], read_committed))[group]
        if isinstance(result, GatewayError):
            raise result
        return result

    async def consumer_groups_read(self, groups: Iterable[str], read_committed: bool = False
                                   ) -> dict[str, model.GroupRead | GatewayError]:
        """:meth:`consumer_group_read` for many groups at once: DescribeGroups and
        OffsetFetch go once per coordinator for all its groups (kafka-python
        buckets them), the log end offsets of every partition in one
        list_offsets. A group-level error fails a batched OffsetFetch as a
        whole, so then the groups are read one by one and each keeps its own
        error (UnknownGroup, Timeout ...) as its value. ClusterUnreachable is raised."""
        groups = list(dict.fromkeys(groups))
        if not groups:
            return {}
        try:
            return await self._read_groups(groups, read_committed)
        except ClusterUnreachable:
            raise
        except GatewayError as exc:
            if len(groups) == 1:
                return {groups[0]: exc}
            log.debug("batched group read on %r failed (%s); reading one by one", self.name, exc)
        gate = asyncio.Semaphore(8)

        async def one(g: str):
            async with gate:
                try:
                    return (await self._read_groups([g], read_committed))[g]
                except ClusterUnreachable:
                    raise
                except GatewayError as e:
                    return e
        return dict(zip(groups, await asyncio.gather(*(one(g) for g in groups))))

    async def _read_groups(self, groups: list[str], read_committed: bool
                           ) -> dict[str, model.GroupRead | GatewayError]:
        self._check_open()
        what = repr(groups[0]) if len(groups) == 1 else f"of {len(groups)} groups"
        desc_r, offs_r = await asyncio.gather(
            self._kp_coordinator_call(f"describe_groups {what}", "describe_groups", groups, 0, groups),
            self._kp_coordinator_call(f"list_group_offsets {what}", "list_group_offsets", groups, 0,
                                      {g: None for g in groups}),
            return_exceptions=True)
        for r in (desc_r, offs_r):
            if isinstance(r, BaseException):
                raise r
        read_at = time.time()
        found: dict[str, tuple] = {}
        out: dict[str, model.GroupRead | GatewayError] = {}
        for group in groups:
            desc = desc_r.get(group) or {}
            if "not a classic group" in str(desc.get("error") or ""):
                desc = await self._describe_consumer_protocol_group(group)
            state = _snake(desc.get("group_state") or "Dead")
            committed: dict[tuple[str, int], int | None] = {}
            for tp, om in (offs_r.get(group) or {}).items():
                committed[(tp.topic, tp.partition)] = om.offset if om.offset is not None and om.offset >= 0 else None
            members = [self._member(m) for m in desc.get("members") or []]
            assigned = {tp for m in members for tp in m.assigned}
            if state in ("DEAD", "UNKNOWN") and not committed and not assigned:
                out[group] = UnknownGroup(group, self.config.name)
                continue
            found[group] = (desc, state, committed, members, sorted(set(committed) | assigned))
        all_tps = sorted({tp for v in found.values() for tp in v[4]})
        ends, errors = await self._log_ends(all_tps, read_committed, f"list_offsets for group {what}")
        for group, (desc, state, committed, members, tps) in found.items():
            parts = []
            for k in tps:
                c, e = committed.get(k), ends.get(k)
                lag = max(0, e - c) if c is not None and e is not None else None
                parts.append(model.PartitionLag(k[0], k[1], c, e, lag, errors.get(k)))
            out[group] = model.GroupRead(lag=model.GroupLag(group, state, parts),
                                         members=sorted(members, key=lambda m: (m.client_id, m.member_id)),
                                         protocol_type=str(desc.get("protocol_type") or ""),
                                         protocol=str(desc.get("protocol_data") or ""), read_at=read_at)
        return {g: out[g] for g in groups}

    async def _describe_consumer_protocol_group(self, group: str) -> dict:
        """A KIP-848 group (group.protocol=consumer) in the shape of kafka-python's
        DescribeGroups result. DescribeGroups answers such a group with
        GROUP_ID_NOT_FOUND "not a classic group", and kafka-python has no
        ConsumerGroupDescribe; librdkafka has. Its crash (top of this section)
        needs a coordinator that is not ready, and this one has just answered."""
        futs = self._admin.describe_consumer_groups([group], request_timeout=self.timeout_s)
        d = await self._await(futs[group], f"describe_consumer_groups {group!r}")
        state = {"PREPARING_REBALANCING": "PREPARING_REBALANCE",
                 "COMPLETING_REBALANCING": "COMPLETING_REBALANCE"}.get(_enum_name(d.state), _enum_name(d.state))
        members = []
        for m in d.members or []:
            by_topic: dict[str, list[int]] = collections.defaultdict(list)
            for tp in getattr(m.assignment, "topic_partitions", None) or []:
                by_topic[tp.topic].append(tp.partition)
            members.append({"member_id": m.member_id, "client_id": m.client_id, "client_host": m.host,
                            "group_instance_id": m.group_instance_id,
                            "member_assignment": {"assigned_partitions": [
                                {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]}})
        return {"group_state": state, "members": members, "protocol_type": "consumer",
                "protocol_data": d.partition_assignor or ""}

    @staticmethod
    def _member(m: dict) -> model.GroupMember:
        assigned: list[tuple[str, int]] = []
        assignment = m.get("member_assignment")
        # a non-consumer protocol (connect ...) leaves the assignment as undecoded bytes
        if isinstance(assignment, dict):
            for t in assignment.get("assigned_partitions") or []:
                assigned.extend((t["topic"], p) for p in t.get("partitions") or [])
        return model.GroupMember(member_id=str(m.get("member_id") or ""), client_id=str(m.get("client_id") or ""),
                                 host=str(m.get("client_host") or ""),
                                 group_instance_id=m.get("group_instance_id") or None,
                                 assigned=sorted(assigned))

    async def _log_ends(self, tps: list[tuple[str, int]], read_committed: bool, what: str
                        ) -> tuple[dict[tuple[str, int], int | None], dict[tuple[str, int], str]]:
        """Log end offsets (confluent ``list_offsets``: partition leaders, not the
        group coordinator) and, per partition, why one could not be read."""
        ends: dict[tuple[str, int], int | None] = {}
        errors: dict[tuple[str, int], str] = {}
        if not tps:
            return ends, errors
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futs = self._admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in tps},
                                        isolation_level=level, request_timeout=self.timeout_s)
        res = await self._await_all({(tp.topic, tp.partition): f for tp, f in futs.items()}, what)
        for k, r in res.items():
            if isinstance(r, KafkaError):
                ends[k] = None
                errors[k] = f"log end offset: {r.name()}: {r.str()}"
            elif r.offset is None or r.offset < 0:
                # librdkafka 2.16 can hand back offset -1001 (OFFSET_INVALID)
                # *without* an error for a partition whose leader is gone
                ends[k] = None
                errors[k] = (f"log end offset unavailable (got {r.offset}); "
                             f"the partition may have no leader")
            else:
                ends[k] = r.offset
        return ends, errors

    async def list_consumer_groups(self, broker_ids: Iterable[int] | None = None) -> model.GroupListings:
        """Every group of the cluster (ListGroups). A broker answers ListGroups
        with the groups it coordinates, so every registered broker is asked, in
        parallel; a broker that fails (down, coordinator still loading after the
        retries) is reported in ``failed_brokers`` instead of failing the whole
        listing. kafka-python, like the other group-coordinator reads (see the
        comment at the top of this section). Raises the error when every
        broker failed."""
        self._check_open()
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()

        async def one(bid: int) -> list[dict]:
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    return await self._kp_call(f"list_groups on broker {bid}", "list_groups", broker_ids=[bid])
                except GatewayError as e:
                    # a coordinator still loading __consumer_offsets answers
                    # COORDINATOR_LOAD_IN_PROGRESS: ask again until the timeout
                    if e.code in _KP_COORDINATOR_RETRIABLE and time.monotonic() + COORDINATOR_RETRY_S < deadline:
                        await asyncio.sleep(COORDINATOR_RETRY_S)
                        continue
                    raise
        results = await asyncio.gather(*(one(b) for b in ids), return_exceptions=True)
        groups: dict[str, model.GroupListing] = {}
        failed: dict[int, str] = {}
        errors: list[BaseException] = []
        for bid, r in zip(ids, results):
            if isinstance(r, BaseException):
                if not isinstance(r, GatewayError):
                    raise r
                errors.append(r)
                failed[bid] = str(r)
                continue
            for g in r:
                gid = str(g.get("group_id") or "")
                if not gid:
                    continue
                groups[gid] = model.GroupListing(
                    group_id=gid, state=_snake(g.get("group_state") or "Unknown"),
                    protocol_type=str(g.get("protocol_type") or ""), coordinator=bid,
                    group_type=g.get("group_type") or None)
        if ids and len(failed) == len(ids):
            raise errors[0]
        for bid, why in failed.items():
            log.warning("list_consumer_groups: broker %s of cluster %r failed: %s", bid, self.name, why)
        return model.GroupListings(sorted(groups.values(), key=lambda g: g.group_id), failed)

    async def stable_offsets(self, topic_partitions) -> dict[tuple[str, int], model.PartitionOffsets]:
        """Last stable offset (read_committed's end) and high watermark of each partition, from two
        ListOffsets reads made together. LSO < HW means an open transaction holds read_committed
        consumers back; the gap is the records they cannot see yet. A partition whose leader did
        not answer is left out."""
        self._check_open()
        tps = list(dict.fromkeys(_tp_list(topic_partitions)))
        if not tps:
            return {}

        async def read(level) -> dict:
            futs = self._admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in tps},
                                            isolation_level=level, request_timeout=self.timeout_s)
            return await self._await_all({(tp.topic, tp.partition): f for tp, f in futs.items()},
                                         "list_offsets (LSO and high watermark)", [t for t, _ in tps])
        lso, hw = await asyncio.gather(read(IsolationLevel.READ_COMMITTED), read(IsolationLevel.READ_UNCOMMITTED))
        out = {}
        for k in tps:
            a, b = lso.get(k), hw.get(k)
            if (a is None or isinstance(a, KafkaError) or b is None or isinstance(b, KafkaError)
                    or a.offset is None or b.offset is None or a.offset < 0 or b.offset < 0):
                continue
            out[k] = model.PartitionOffsets(k[0], k[1], a.offset, b.offset)
        return out

    # ---- transactions (kafka-python) ---------------------------------------------------
    async def list_transactions(self, broker_ids: Iterable[int] | None = None,
                                states: Iterable[str] | None = None) -> list[model.TransactionListing]:
        """Transactions known to each broker's transaction coordinator. By
        default asks every registered broker (one request each, in parallel),
        so a dead broker does not fail the whole listing; it is logged."""
        return (await self.list_transactions_partial(broker_ids, states))[0]

    async def list_transactions_partial(self, broker_ids: Iterable[int] | None = None,
                                        states: Iterable[str] | None = None
                                        ) -> tuple[list[model.TransactionListing], dict[int, str]]:
        """list_transactions, plus the brokers whose coordinator could not be read (id -> error):
        an answer built on a listing with gaps is partial and must say which brokers it lacks."""
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()
        states = list(states) if states else None

        async def one(bid: int):
            # A coordinator that is loading its __transaction_state partitions (just after a
            # failover moved them to it) answers in a moment: ask again rather than leave it unread.
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    return await self._kp_call(f"list_transactions on broker {bid}", "list_transactions",
                                               broker_ids=[bid], state_filters=states)
                except GatewayError as e:
                    if e.code != "CoordinatorLoadInProgressError" or time.monotonic() + COORDINATOR_RETRY_S >= deadline:
                        raise
                    await asyncio.sleep(COORDINATOR_RETRY_S)
        results = await asyncio.gather(*(one(b) for b in ids), return_exceptions=True)
        out, failures = [], []
        for bid, r in zip(ids, results):
            if isinstance(r, BaseException):
                if not isinstance(r, GatewayError):
                    raise r
                failures.append((bid, r))
                continue
            for coord, listings in r.items():
                out.extend(model.TransactionListing(t.transactional_id, t.producer_id,
                                                    getattr(t.state, "value", str(t.state)), coord)
                           for t in listings)
        if failures and len(failures) == len(ids):
            raise failures[0][1]
        for bid, exc in failures:
            log.warning("list_transactions: broker %s of cluster %r failed: %s", bid, self.name, exc)
        return sorted(out, key=lambda t: t.transactional_id), {bid: str(exc) for bid, exc in failures}

    @staticmethod
    def _txn_desc(tid: str, d) -> model.TransactionDescription:
        return model.TransactionDescription(
            transactional_id=tid, coordinator_id=d.coordinator_id,
            state=getattr(d.state, "value", str(d.state)),
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            timeout_ms=d.transaction_timeout_ms, start_time_ms=d.transaction_start_time_ms,
            partitions=sorted((tp.topic, tp.partition) for tp in d.topic_partitions))

    async def describe_transactions(self, ids: Iterable[str]) -> dict[str, model.TransactionDescription]:
        ids = list(dict.fromkeys([ids] if isinstance(ids, str) else ids))
        if not ids:
            return {}
        try:
            res = await self._kp_coordinator_call("describe_transactions", "describe_transactions", ids,
                                                  1, ids)
        except UnknownTransactionalId as e:
            raise UnknownTransactionalId(ids, self.name, str(e).split("(", 1)[-1].rstrip(")")) from None
        return {tid: self._txn_desc(tid, d) for tid, d in res.items()}

    async def find_hanging_transactions(self, broker_ids: Iterable[int] | None = None,
                                        max_transaction_timeout_ms: int = 900_000,
                                        min_age_ms: int | None = None
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
        out = []
        for tid, d in sorted(descs.items()):
            if d.state in done_states or d.start_time_ms < 0:
                continue
            age = now_ms - d.start_time_ms
            if age >= threshold:
                out.append(model.HangingTransaction(tid, d.producer_id, d.producer_epoch, d.state, age,
                                                    d.coordinator_id, d.partitions))
        return out

    async def describe_producers(self, topic: str, partition: int,
                                 broker_id: int | None = None) -> list[model.ProducerState]:
        """Active producers on a partition (from its leader, or ``broker_id``):
        ``current_txn_start_offset >= 0`` marks an open transaction."""
        from kafka.structs import TopicPartition as KTP
        tp = KTP(topic, int(partition))
        try:
            res = await self._kp_call(f"describe_producers {topic}-{partition}", "describe_producers",
                                      [tp], broker_id)
        except UnknownTopic:
            raise UnknownTopic([topic], self.name, f"partition {partition}") from None
        state = res.get(tp)
        if state is None:
            return []
        return [model.ProducerState(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                                    p.coordinator_epoch, p.current_transaction_start_offset)
                for p in state.active_producers]

    async def abort_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Write an ABORT marker for the producer's open transaction on one
        partition (WriteTxnMarkers to the leader, like
        ``kafka-transactions.sh abort``). Take producer id/epoch and
        coordinator epoch from :meth:`describe_producers`."""
        from kafka.admin._transactions import AbortTransactionSpec
        from kafka.structs import TopicPartition as KTP
        spec = AbortTransactionSpec(KTP(topic, int(partition)), int(producer_id), int(producer_epoch),
                                    int(coordinator_epoch))
        try:
            await self._kp_call(f"abort_transaction {topic}-{partition} producer {producer_id}",
                                "abort_transaction", spec)
        except UnknownTopic:
            raise UnknownTopic([topic], self.name, f"partition {partition}") from None

    # ---- KRaft quorum, log dirs, reassignments (kafka-python) ---------------------------
    async def metadata_quorum(self) -> model.QuorumInfo:
        res = await self._kp_call("describe_metadata_quorum", "describe_metadata_quorum")
        part = res["topics"][0]["partitions"][0]
        if part.get("error"):
            raise GatewayError(f"describe_metadata_quorum on {self.name!r}: {part['error']}", self.name)
        voters_raw = part.get("current_voters") or []
        leader = part["leader_id"]
        leader_leo = next((v["log_end_offset"] for v in voters_raw if v["replica_id"] == leader),
                          part.get("high_watermark", 0))

        def replica(v, observer):
            return model.QuorumVoter(
                id=v["replica_id"], log_end_offset=v["log_end_offset"],
                lag=max(0, leader_leo - v["log_end_offset"]) if v["log_end_offset"] >= 0 else leader_leo,
                last_fetch_timestamp=v.get("last_fetch_timestamp"),
                last_caught_up_timestamp=v.get("last_caught_up_timestamp"), observer=observer)
        return model.QuorumInfo(
            leader_id=leader, leader_epoch=part["leader_epoch"], high_watermark=part["high_watermark"],
            voters=sorted((replica(v, False) for v in voters_raw), key=lambda v: v.id),
            observers=sorted((replica(v, True) for v in part.get("observers") or []), key=lambda v: v.id))

    async def log_dirs(self, broker_ids: Iterable[int] | None = None) -> list[model.LogDir]:
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()
        res = await self._kp_call("describe_log_dirs", "describe_log_dirs", None, ids)
        out = []
        E = _kp_errors()
        for entry in res:
            for d in entry["log_dirs"]:
                err = d.get("error_code", 0)
                parts = [
                    model.LogDirPartition(t["name"], p["partition_index"], p["partition_size"],
                                          p["offset_lag"], bool(p.get("is_future_key")))
                    for t in d.get("topics") or [] for p in t.get("partitions") or []
                ]
                out.append(model.LogDir(
                    broker=entry["broker"], path=d["log_dir"],
                    error=None if not err else E.for_code(err).__name__,
                    partitions=sorted(parts, key=lambda p: (p.topic, p.partition)),
                    total_bytes=d.get("total_bytes"), usable_bytes=d.get("usable_bytes")))
        return sorted(out, key=lambda d: (d.broker, d.path))

    async def reassignments(self) -> list[model.Reassignment]:
        res = await self._kp_call("list_partition_reassignments", "list_partition_reassignments",
                                  None, int(self.timeout_s * 1000))
        return sorted((model.Reassignment(tp.topic, tp.partition, list(v.get("replicas", [])),
                                          list(v.get("adding_replicas", [])),
                                          list(v.get("removing_replicas", [])))
                       for tp, v in res.items()), key=lambda r: (r.topic, r.partition))

    # ---- actions ----------------------------------------------------------------------
    async def elect_preferred_leaders(self, topic_partitions) -> list[model.ElectionResult]:
        """PREFERRED leader election on an explicit, non-empty list of
        (topic, partition). Never UNCLEAN, never "all partitions"."""
        self._check_open()
        if topic_partitions is None:
            raise ValueError("elect_preferred_leaders needs an explicit list of (topic, partition); "
                             "electing on all partitions implicitly is not allowed")
        tps = list(dict.fromkeys(_tp_list(topic_partitions)))
        if not tps:
            raise ValueError("elect_preferred_leaders needs at least one (topic, partition)")
        # No request_timeout/operation_timeout kwargs: confluent-kafka 2.16's
        # elect_leaders raises SystemError ("more argument specifiers than
        # keyword list entries") for either; both default to socket.timeout.ms,
        # which __init__ sets to timeout_s.
        fut = self._admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in tps])
        res = await self._await(fut, "elect_leaders (preferred)", topics=[t for t, _ in tps])
        by_tp = {(tp.topic, tp.partition): err for tp, err in res.items()}
        out = []
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

    # ---- lifecycle ----------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._poller.stop()
        kp, self._kp = self._kp, None
        if kp is not None:
            try:
                await asyncio.wait_for(asyncio.to_thread(kp.close), self.timeout_s)
            except Exception as e:  # closing must not raise
                log.debug("closing kafka-python admin client: %s", e)
        try:
            self._admin.poll(0)
        except Exception:
            pass
        self._admin = None

    async def __aenter__(self) -> "AdminGateway":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
