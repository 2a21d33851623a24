"""The audit trail: one JSON line per request, preview, approval, refusal, expiry, cancel and execution.

The local file is the record of truth: every line is written and fsync'd before the caller goes
on, under an exclusive flock so the Slack server and a terminal `kbot ask "confirm ..."` can append
to the same file. A Kafka topic can mirror it (KBOT_AUDIT_TOPIC); the mirror is best effort and
its failures are logged, never allowed to lose or delay the local line.

Nothing secret is written: a confirm token is stored only as its hash (``token_id``), wherever it
appears (a ``token`` field, or the text of a "confirm <token>" / "cancel <token>" / "break-glass <token>"
request or click),
so the file and its Kafka mirror cannot be used to confirm anything; Slack tokens or keys that a
user pasted into a command are masked. The file is 0600 in a 0700 folder.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from gate.files import private_dir, private_file
from kbot_settings import KbotSettings
from live.config import ConfigError, get_cluster, load_clusters

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

log = logging.getLogger(__name__)

# An audit record: a JSON object (its fields differ per event).
AuditRecord = dict[str, Any]
# A line for the writer thread and the future of the request waiting for its fsync; None stops it.
_Queued = tuple[bytes, asyncio.Future[None], asyncio.AbstractEventLoop] | None

# Slack tokens (bot, user, app-level, refresh) and anything shaped like a bearer credential.
_SECRET_TEXT = re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|xoxe(?:\.xox[a-z])?-[A-Za-z0-9-]+)")
_SECRET_KEYS = re.compile(r"(password|secret|passwd|credential|api_?key|private_?key|^token$|signing)", re.I)
MASK = "***"
# "confirm <token>" / "cancel <token>" / "break-glass <token> <reason>" as typed, clicked (a button's value) or sent with /kafka.
_TOKEN_COMMAND = re.compile(
    r"^(\s*(?:/kafka\s+)?(?:confirm|cancel|break-glass)\s+)([\"'\u201c\u201d\u2018\u2019]?)([^\s\"'\u201c\u201d\u2018\u2019]+)",
    re.I,
)
# ... and a token-shaped word (gate.confirmation.new_token: 32 url-safe characters) after them anywhere else.
_TOKEN_ANYWHERE = re.compile(r"(\b(?:confirm|cancel|break-glass)\s+)()([A-Za-z0-9_-]{32})(?![A-Za-z0-9_-])", re.I)
# Bodies and response URLs that libraries put in their log lines (Bolt logs a rejected request's
# body at INFO): a response_url lets anyone post as the bot in that channel for 30 minutes.
_RESPONSE_URL = re.compile(r"(response_url[\"']?\s*[:=]\s*[\"']?)[^\s\"'&,}]+|https://hooks\.slack\.com/\S+", re.I)
_LOGGED_BODY = re.compile(r"(\bbody\b\s*[:=]\s*)(.+)$", re.I | re.S)


def token_id(token: str) -> str:
    """A stable, non-reversible name for a confirm token: enough to correlate audit lines."""
    return hashlib.sha256(token.encode()).hexdigest()[:12]


# Typed for the shapes callers pass; any JSON value is walked the same way.
@overload
def hash_tokens(value: str) -> str: ...
@overload
def hash_tokens(value: dict[str, Any]) -> dict[str, Any]: ...
@overload
def hash_tokens(value: Any) -> Any: ...


def hash_tokens(value: Any) -> Any:
    """A copy of ``value`` with every confirm token replaced by its hash: a ``token`` field becomes
    ``token_id``, and "confirm <token>" text becomes "confirm #<token_id>"."""
    if isinstance(value, dict):
        return {
            ("token_id" if k == "token" and isinstance(v, str) else k): (
                token_id(v) if k == "token" and isinstance(v, str) else hash_tokens(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [hash_tokens(v) for v in value]
    if isinstance(value, str):
        return _hash_token_text(value)
    return value


def _hash_token_text(value: str) -> str:
    hashed = _TOKEN_COMMAND.sub(lambda m: f"{m.group(1)}#{token_id(m.group(3))}", value)
    return _TOKEN_ANYWHERE.sub(lambda m: f"{m.group(1)}#{token_id(m.group(3))}", hashed)


def redact_log_text(message: str, secrets: tuple[str, ...] = ()) -> str:
    """A log line without request bodies, response URLs, confirm tokens or Slack tokens."""
    message = _LOGGED_BODY.sub(lambda m: f"{m.group(1)}<{len(m.group(2))} chars withheld>", message)
    message = _RESPONSE_URL.sub(lambda m: (m.group(1) or "") + "<response_url withheld>", message)
    return scrub(message, secrets)


class RedactingFilter(logging.Filter):
    """``redact_log_text`` on every record of the logger it is attached to."""

    def __init__(self, secrets: tuple[str, ...] | list[str] = ()):
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact_log_text(msg, self.secrets)
        if clean != msg:
            record.msg, record.args = clean, None
        return True


@overload
def scrub(value: str, extra: tuple[str, ...] = ()) -> str: ...
@overload
def scrub(value: dict[str, Any], extra: tuple[str, ...] = ()) -> dict[str, Any]: ...
@overload
def scrub(value: Any, extra: tuple[str, ...] = ()) -> Any: ...


def scrub(value: Any, extra: tuple[str, ...] = ()) -> Any:
    """A copy of ``value`` with secret-looking keys and Slack tokens masked."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(k, str) and _SECRET_KEYS.search(k) else scrub(v, extra)) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v, extra) for v in value]
    if isinstance(value, str):
        return _scrub_text(value, extra)
    return value


def _scrub_text(value: str, extra: tuple[str, ...]) -> str:
    for s in extra:
        value = value.replace(s, MASK)
    return _SECRET_TEXT.sub(MASK, value)


class KafkaMirror:
    """Produces each audit record to a topic. Delivery failures are counted and logged.

    A broker outage must not lose records or reorder them: the producer is idempotent with
    acks=all (a retried batch is neither duplicated nor overtaken by a later one, so the topic
    holds the file's order) and keeps a record for up to ``MIRROR_TIMEOUT_MS`` while it waits for
    the cluster to come back. The queue stays bounded so a long outage cannot grow memory."""

    MIRROR_TIMEOUT_MS = 15 * 60 * 1000

    def __init__(self, topic: str, conf: dict[str, Any], producer: Producer | None = None):
        from confluent_kafka import Producer

        self.topic = topic
        self.delivered = 0
        self.failed = 0
        self.last_error: str | None = None  # librdkafka's last client-level error, for status and tests
        conf = {
            "message.timeout.ms": self.MIRROR_TIMEOUT_MS,
            "queue.buffering.max.messages": 10000,
            "enable.idempotence": True,
            "acks": "all",
            "error_cb": self._on_error,
            **conf,
        }
        self._producer: Producer = producer if producer is not None else Producer(conf)

    def _on_error(self, err: KafkaError) -> None:
        self.last_error = f"{err.name()}: {err.str()}"
        # a rejected login or certificate does not heal itself: say so once it happens
        if err.fatal() or err.name() in ("_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED"):
            log.warning(
                "audit mirror to topic %s: %s (the local audit log has every record)", self.topic, self.last_error
            )

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failed += 1
            log.warning(
                "audit mirror: delivery to topic %s failed: %s (the local audit log has the record)", self.topic, err
            )
        else:
            self.delivered += 1

    def send(self, record: AuditRecord) -> None:
        try:
            self._producer.produce(
                self.topic,
                json.dumps(record).encode(),
                key=record.get("event", "").encode(),
                on_delivery=self._on_delivery,
            )
            self._producer.poll(0)  # serve earlier delivery callbacks
        except Exception as exc:  # BufferError when the queue is full, KafkaException on a bad config
            self.failed += 1
            log.warning("audit mirror: could not queue the record for topic %s: %s", self.topic, exc)

    def flush(self, timeout_s: float = 5.0) -> int:
        return self._producer.flush(timeout_s)


class AuditLog:
    def __init__(
        self,
        path: Path,
        mirror: KafkaMirror | None = None,
        clock: Callable[[], float] = time.time,
        secrets: tuple[str, ...] = (),
    ):
        self.path = Path(path)
        self.mirror = mirror
        self.clock = clock
        self._secrets = tuple(s for s in secrets if s)
        self._lock = threading.Lock()  # in-process; flock covers other processes
        self._queue: queue.SimpleQueue[_Queued] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._writer_lock = threading.Lock()
        private_dir(self.path.parent)
        if self.path.exists():
            private_file(self.path)  # an older version may have left it wider

    def _build(self, event: str, fields: dict[str, Any]) -> tuple[AuditRecord, bytes]:
        rec = scrub(
            hash_tokens(
                {"ts": round(self.clock(), 3), "event": event, **{k: v for k, v in fields.items() if v is not None}}
            ),
            self._secrets,
        )
        return rec, (json.dumps(rec, ensure_ascii=False, default=str) + "\n").encode()

    def _append(self, data: bytes) -> None:
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)  # closing releases the flock

    def _mirror(self, rec: AuditRecord) -> None:
        if self.mirror is not None:
            try:
                self.mirror.send(rec)
            except Exception:  # the local line is written; the mirror must never break a request
                log.exception("audit mirror failed")

    def record(self, event: str, **fields: Any) -> AuditRecord:
        """Append one record durably and return it. Synchronous: it fsyncs."""
        rec, line = self._build(event, fields)
        self._append(line)
        self._mirror(rec)
        return rec

    async def write(self, event: str, **fields: Any) -> AuditRecord:
        """``record`` for async callers: returns once the line is fsync'd, without blocking the loop.

        One writer thread takes every queued line, writes them together and fsyncs once (group
        commit): under a burst of requests that is one fsync per batch, not one per line, and no
        thread is started on the request path."""
        rec, line = self._build(event, fields)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._ensure_writer()
        self._queue.put((line, done, loop))
        await done
        self._mirror(rec)
        return rec

    def _ensure_writer(self) -> None:
        # Not self._lock: the writer holds that across an fsync, and this runs on the event loop.
        with self._writer_lock:
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._write_loop, name="kbot-audit-writer", daemon=True)
                self._writer.start()

    def _write_loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty() and len(batch) < 1000:
                batch.append(self._queue.get_nowait())
            items = [b for b in batch if b is not None]
            error: BaseException | None = None
            try:
                if items:
                    self._append(b"".join(line for line, _, _ in items))
            except BaseException as exc:  # the callers see the failure instead of a lost record
                error = exc
            for _line, done, loop in items:
                loop.call_soon_threadsafe(_settle, done, error)
            if len(items) < len(batch):  # the close() sentinel
                return

    def read(self) -> list[AuditRecord]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    def close(self) -> None:
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._writer.join(10)
        if self.mirror is not None:
            self.mirror.flush()


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if not done.done():  # the waiting request may have been cancelled meanwhile
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)


def open_audit(
    state_dir: Path,
    topic: str | None = None,
    cluster: str | None = None,
    secrets: tuple[str, ...] = (),
    *,
    settings: KbotSettings,
) -> AuditLog:
    """The audit log in ``state_dir``, mirrored to ``topic`` on ``cluster`` (of the clusters
    ``settings`` configure) when one is given."""
    mirror = None
    if topic:
        try:
            # librdkafka's settings are strings, except the logger it takes as an object
            conf: dict[str, Any] = {
                **get_cluster(cluster, settings).confluent_conf(),
                "client.id": "kbot-audit",
                "logger": _quiet_rdkafka(),
            }
            mirror = KafkaMirror(topic, conf)
        except (ConfigError, Exception) as exc:  # a misconfigured mirror must not stop the bot
            log.warning("audit mirror to topic %s disabled: %s", topic, exc)
    return AuditLog(Path(state_dir) / "audit.jsonl", mirror, secrets=(*secrets, *cluster_secrets(settings)))


def cluster_secrets(settings: KbotSettings) -> tuple[str, ...]:
    """Every configured cluster's passwords: masked wherever they would appear in a record."""
    try:
        clusters = load_clusters(settings)
    except Exception:  # a broken clusters file is reported where it is used, not here
        return ()
    return tuple(
        str(v)
        for c in clusters.values()
        for v in (c.sasl_password, c.ssl_key_password, c.operator_sasl_password, c.operator_ssl_key_password)
        if v
    )


def _quiet_rdkafka() -> logging.Logger:
    """librdkafka's connection chatter during an outage goes to DEBUG on its own logger; the
    delivery callback already says what matters."""
    lg = logging.getLogger("bot.audit.rdkafka")
    lg.propagate = False
    if not lg.handlers:
        lg.addHandler(logging.NullHandler())
    return lg
