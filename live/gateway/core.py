"""The state every part of the gateway shares, and the diagnosis of a failed call.

``GatewayCore`` holds the cluster's config, the per-call timeout, the open/closed flag and the
error log that librdkafka's callbacks fill (``live.gateway.confluent``). From that log and a
quick TCP probe of the bootstrap addresses it decides what a timeout or a transport error
means - :class:`ClusterUnreachable`, :class:`Timeout`, a refused login or certificate
(:class:`AuthenticationFailed` / :class:`TlsFailed`) - and it turns a broker's authorization
error into :class:`NotAuthorized`. Both client transports build on it.
"""

from __future__ import annotations

import asyncio
import collections
import re
import threading
import time
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from kbot_settings import KbotSettings
from live import tls
from live.config import ClusterConfig, get_cluster
from live.gateway.errors import (
    AUTHZ_RESOURCE,
    CLUSTER_RESOURCE,
    AuthenticationFailed,
    ClusterUnreachable,
    GatewayError,
    NotAuthorized,
    Timeout,
    TlsFailed,
    required_operation,
)

T = TypeVar("T")

GRACE_S = 1.0  # asyncio backstop beyond librdkafka's own request timeout
PROBE_TIMEOUT_S = 1.0  # TCP probe of the bootstrap addresses after a failure


class GatewayCore:
    """Shared state and failure diagnosis; see the module docstring."""

    def __init__(
        self, config: ClusterConfig | str | None = None, timeout_s: float = 10, *, settings: KbotSettings | None = None
    ):
        if config is None or isinstance(config, str):
            if settings is None:
                raise TypeError("a cluster by name (or the default one) needs the settings it is configured in")
            config = get_cluster(config, settings)
        self.config = config
        self.timeout_s = float(timeout_s)
        self._lock = threading.Lock()
        # (monotonic time, error name or "LOG", text), newest last: what the client library reported
        self._errors: collections.deque[tuple[float, str, str]] = collections.deque(maxlen=20)
        self._all_down_at: float | None = None
        self._last_ok: float | None = None
        self._closed = False

    # ---- bookkeeping ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    def __repr__(self) -> str:
        return f"AdminGateway({self.config.name!r}, {self.config.bootstrap!r}, timeout_s={self.timeout_s})"

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

    def _serve_callbacks(self) -> None:
        """Deliver the client library's queued error/log callbacks, so the error log is current
        before it is read. The librdkafka transport overrides this; nothing is queued here."""

    def _closed_error(self) -> GatewayError:
        return GatewayError(f"the gateway to cluster {self.config.name!r} is closed", self.config.name)

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    async def _bootstrap_states(self) -> list[str]:
        """Each bootstrap address's answer to a TCP connect: "accepts", "refused" (nothing listens
        there) or "unreachable" (no answer in PROBE_TIMEOUT_S, or not an address)."""

        async def one(hp: str) -> str:
            host, _, port = hp.rpartition(":")
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host.strip("[]"), int(port)), PROBE_TIMEOUT_S
                )
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
                self.name,
            )

    def _not_authorized(self, error_name: str, what: str, topics: Iterable[str] = ()) -> NotAuthorized:
        rtype = AUTHZ_RESOURCE[error_name]
        if rtype == "CLUSTER":
            name = CLUSTER_RESOURCE
        elif rtype == "TOPIC":
            named = sorted(set(topics) - {"?"})
            if not named:  # kafka-python's errors do not name the topic; the call does
                m = re.match(r"describe_producers (.+)-\d+", what)
                named = [m.group(1)] if m else re.findall(r"'([^']+)'", what)
            name = ", ".join(named) or "the topics asked about"
        else:
            found = re.findall(r"'([^']+)'", what)
            name = found[0] if found else f"the {rtype.lower().replace('_', ' ')}s asked about"
        return NotAuthorized(
            self.config.role,
            self.config.principal,
            required_operation(what),
            rtype,
            name,
            what,
            self.config.name,
            error_name,
        )

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
                c.name,
                code or "SASL_AUTHENTICATION_FAILED",
            )
        why: str | None = None
        for hp in c.bootstrap_list:
            host, _, port = hp.rpartition(":")
            why = await asyncio.to_thread(
                tls.diagnose,
                host.strip("[]"),
                int(port),
                cafile=c.ssl_ca,
                certfile=c.ssl_cert,
                keyfile=c.ssl_key,
                password=c.ssl_key_password,
                timeout=PROBE_TIMEOUT_S * 2,
            )
            if why:
                break
        if why is None:
            tail = text.split("SSL handshake failed: ", 1)[-1].split(" (after ", 1)[0]
            why = f"the TLS handshake failed ({tail})"
        return TlsFailed(f"TLS verification of Kafka cluster {c.name!r} failed: {why}", c.name, code or "_SSL")

    async def _failure(
        self, what: str, started: float, detail: str | None = None, code: str | None = None
    ) -> GatewayError:
        """Turn a timeout / transport failure into ClusterUnreachable or Timeout - or, when the
        brokers refused the credentials or the certificate, into one line saying so."""
        self._serve_callbacks()
        problem = self._credentials_problem(started)
        if (
            problem is None
            and detail
            and (
                "SASL authentication error" in detail
                or "SSL handshake failed" in detail
                or "certificate verify failed" in detail
            )
        ):
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
                self.config.name,
                code,
            )
        return Timeout(
            f"{what} on Kafka cluster {self.config.name!r} ({bootstrap}) did not complete within "
            f"{self.timeout_s:g}s"
            + (f" ({detail})" if detail else "")
            + "; the brokers accept connections but did not answer in time (overloaded, paused or "
            "a partition/coordinator without a leader?)",
            self.config.name,
            code,
        )

    # ---- bounded waits ------------------------------------------------------------------
    async def _bounded(self, aw: Awaitable[T], started: float) -> T:
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
                # nobody awaits it any more: retrieve its outcome (a cancelled gather's included)
                task.add_done_callback(lambda t: t.cancelled() or t.exception())
