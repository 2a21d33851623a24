"""Posting to Slack without losing anything: one delivery queue per channel, and coalesced questions.

Slack lets an app post about one message per second per channel (short bursts allowed) and answers
anything faster with 429 + Retry-After. A storm of requests in one incident channel must therefore
queue, not race: every chat.postMessage / chat.update for a channel goes through that channel's
``ChannelQueue``, which

  * sends in FIFO order, so the messages of one thread (working message, summary, pages) land in
    the order they were written and a late progress edit never overwrites the final answer;
  * paces chat.postMessage itself (a token bucket: ``burst`` at once, then one per ``pace_s``), so
    a storm rarely meets a 429 at all;
  * on a 429 waits the Retry-After Slack gave (the whole channel waits: the limit is per channel)
    and sends the same message again; a dropped connection or a 5xx (whatever its body: Slack's
    JSON, a proxy's plain text or HTML page) is retried with backoff;
  * never drops a message silently: when the retries are spent the caller gets ``DeliveryFailed``,
    which it reports (audit log and the bot's log, with the request id).

A Slack error that is an answer (not_in_channel, invalid_blocks, ...) is raised to the caller at
once: retrying it cannot help, and the caller knows the fallback (answer privately, post as text).

``make_client``: the app's one AsyncWebClient, whose retry handlers retry a 429 after its
Retry-After and a dropped connection or a 5xx, for our calls and Bolt's alike; the queues use it
through ``queue_client``, which leaves 429s and 5xx to them.

Slack's Retry-After holds the *method* (its limits are per method and workspace; chat.postMessage's
per channel), not only the call that met it: ``MethodHolds`` remembers each 429's window and every
call to that method, from any queue, handler or Bolt itself, waits until it is over
(``HoldingClient``) instead of spending the window earning more 429s.

A file upload (files_upload_v2: getUploadURLExternal per file, the bytes to each upload URL, one
completeUploadExternal) is sent step by step by its channel's queue, and a 429 or a 5xx retries the
step that met it, never the whole flow: a restart would leave the upload slots already handed out
never completed. What was started is completed.

``Delivery.permalink``: a message's permalink never changes, so it is asked once and kept.

``Coalescer``: when the same read-only question about the same cluster is asked in a channel while
its answer is being built, or was posted less than ``window_s`` ago, the first asker's thread answers
everyone; the others are pointed to it instead of building the same answer N times.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from gate.rbac import slack_error_code

if TYPE_CHECKING:
    from bot.slack_settings import SlackSettings

log = logging.getLogger(__name__)

PACED_METHODS = frozenset({"chat_postMessage", "files_upload_v2", "files_completeUploadExternal"})
PER_CHANNEL_LIMITS = frozenset({"chat.postMessage"})  # Slack limits these per channel, the rest per workspace
UPLOAD = "files_upload_v2"  # sent step by step (ChannelQueue._upload), never as one call
PERMALINKS_KEPT = 2000
PACE_S = 1.0  # Slack: "1 message per second per channel", with short bursts allowed
BURST = 3
MAX_RATE_LIMITED = 20  # 429s one message may meet before we call it failed (each waited out)
MAX_TRANSPORT_RETRIES = 3  # dropped connections / timeouts / 5xx, with 1, 2, 4 s backoff
MAX_SERVER_RETRY_AFTER_S = 30.0  # a 5xx's own Retry-After is honoured up to this
DEFAULT_RETRY_AFTER_S = 1.0  # a 429 without a usable Retry-After header
COALESCE_WINDOW_S = 30.0


class DeliveryFailed(Exception):
    """A message could not be delivered after its retries; ``cause`` is the last error."""

    def __init__(self, method: str, channel: str, attempts: int, cause: BaseException):
        self.method, self.channel, self.attempts, self.cause = method, channel, attempts, cause
        super().__init__(f"{method} to {channel} failed after {attempts} attempts: {_describe(cause)}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SlackApiError) and exc.response is not None:
        error = slack_error(exc)
        return f"Slack answered {error}" if error.startswith("HTTP ") else f"Slack answered {_status(exc)} {error}"
    return f"{type(exc).__name__}: {exc}"


def _status(exc: SlackApiError) -> int | None:
    # a SlackResponse has status_code; slack_sdk raises with aiohttp's response (status) when a
    # JSON body does not parse
    resp = exc.response
    status = getattr(resp, "status_code", None) or getattr(resp, "status", None)
    return status if isinstance(status, int) else None


def slack_error(exc: BaseException) -> str:
    """Slack's error code ("not_in_channel"), or the HTTP status and the start of a body that is not
    Slack's JSON (a proxy's "upstream connect error", an HTML page): one short line, never raises."""
    if not isinstance(exc, SlackApiError) or exc.response is None:
        return str(exc)
    code = slack_error_code(exc)
    if code:
        return code
    data = getattr(exc.response, "data", None)
    status = _status(exc)
    body = " ".join(data.split())[:80] if isinstance(data, str) and data.strip() else ""
    return f"HTTP {status}" + (f" ({body})" if body else "")


def server_error(exc: BaseException) -> bool:
    """A 5xx: Slack or a proxy in front of it failed, whatever the body says; worth another try."""
    status = _status(exc) if isinstance(exc, SlackApiError) else None
    return status is not None and status >= 500


def _header(exc: SlackApiError, name: str):
    headers = {k.lower(): v for k, v in (getattr(exc.response, "headers", None) or {}).items()}
    value = headers.get(name)
    if isinstance(value, list):  # slack_sdk keeps some headers as lists
        value = value[0] if value else None
    return value


def retry_after(exc: SlackApiError) -> float | None:
    """Seconds to wait when Slack rate-limited this call, None when it is not a 429."""
    if _status(exc) != 429:
        return None
    try:
        return max(0.0, float(_header(exc, "retry-after")))
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER_S


def _server_wait(exc: SlackApiError, backoff_s: float) -> float:
    """A 5xx's own Retry-After (RFC 9110: when the service expects to be back), capped; else the backoff."""
    try:
        return min(max(0.0, float(_header(exc, "retry-after"))), MAX_SERVER_RETRY_AFTER_S)
    except (TypeError, ValueError):
        return backoff_s


class MethodHolds:
    """When each Slack method may be called again after a 429: ``hold`` starts a method's window
    (its channel's, for chat.postMessage), ``wait`` sleeps until every window that covers a call is over."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ):
        self.clock, self.sleep = clock, sleep
        self._until: dict[str, float] = {}
        self.held = 0  # calls that waited for a window (for the tests and the bench)

    @staticmethod
    def keys(method: str, channel: str | None) -> tuple[str, ...]:
        if method in PER_CHANNEL_LIMITS and channel:
            return (method, f"{method} {channel}")
        return (method,)

    def hold(self, method: str, channel: str | None, seconds: float) -> None:
        key = self.keys(method, channel)[-1]
        self._until[key] = max(self._until.get(key, 0.0), self.clock() + max(0.0, seconds))

    def left(self, method: str, channel: str | None = None) -> float:
        now = self.clock()
        return max([0.0, *(self._until.get(k, 0.0) - now for k in self.keys(method, channel))])

    async def wait(self, method: str, channel: str | None = None) -> None:
        waited = False
        while (left := self.left(method, channel)) > 0:
            waited = True
            await self.sleep(left)
        self.held += waited


def _method_of(url: str) -> str:
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _channel_of(*bodies: object) -> str | None:
    for body in bodies:
        if isinstance(body, Mapping) and isinstance(body.get("channel"), str):
            return str(body["channel"])
    return None


class HoldingRateLimitHandler(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's 429 retry, whose Retry-After also holds the method for every other call."""

    def __init__(self, holds: MethodHolds, max_retry_count: int = 3):
        super().__init__(max_retry_count=max_retry_count)
        self.holds = holds

    async def prepare_for_next_attempt_async(self, *, state, request, response=None, error=None) -> None:
        if response is None:
            raise error  # type: ignore[misc]  # as the parent does: nothing to wait for
        state.next_attempt_requested = True
        headers = {k.lower(): v for k, v in response.headers.items()}
        value = headers.get("retry-after")
        try:
            wait = float(value[0] if isinstance(value, list) else value)
        except (TypeError, ValueError, IndexError):
            wait = DEFAULT_RETRY_AFTER_S
        method, channel = _method_of(request.url), _channel_of(request.body_params, request.data)
        self.holds.hold(method, channel, wait)
        await self.holds.wait(method, channel)
        state.increment_current_attempt()


class HoldingClient(AsyncWebClient):
    """An AsyncWebClient whose every call first waits out its method's 429 window (``MethodHolds``),
    and whose own 429s start one."""

    holds: MethodHolds

    async def api_call(  # type: ignore[override]
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict | None = None,
        data: dict | aiohttp.FormData | None = None,
        params: dict | None = None,
        json: dict | None = None,
        headers: dict | None = None,
        auth: dict | None = None,
    ):
        channel = _channel_of(json, data, params)
        await self.holds.wait(api_method, channel)
        try:
            return await super().api_call(
                api_method,
                http_verb=http_verb,
                files=files,
                data=data,
                params=params,
                json=json,
                headers=headers,
                auth=auth,
            )
        except SlackApiError as exc:
            wait = retry_after(exc)
            if wait is not None:
                self.holds.hold(api_method, channel, wait)
            raise


def _holding_client(holds: MethodHolds, **kwargs) -> HoldingClient:
    client = HoldingClient(**kwargs)
    client.holds = holds
    return client


class AsyncServerErrorRetryHandler(AsyncRetryHandler):
    """A 5xx, whatever its body (Slack's JSON, a proxy's plain text or HTML page), is retried like a
    dropped connection; slack_sdk's own server-error handler knows 500 and 503 only."""

    async def _can_retry_async(self, *, state, request, response=None, error=None) -> bool:
        if response is not None:
            return response.status_code >= 500
        return error is not None and server_error(error)  # a 5xx whose JSON did not parse


def make_client(
    settings: SlackSettings, session: aiohttp.ClientSession | None = None, holds: MethodHolds | None = None
) -> AsyncWebClient:
    holds = holds or MethodHolds()
    return _holding_client(
        holds,
        token=settings.bot_token,
        base_url=settings.api_url,
        timeout=30,
        # One shared session keeps connections to Slack alive; without it slack_sdk opens (and
        # TLS-handshakes) a new connection for every call, which dominates a burst's CPU time.
        session=session,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncServerErrorRetryHandler(max_retry_count=2),
            HoldingRateLimitHandler(holds, max_retry_count=3),
        ],
    )


def queue_client(client: AsyncWebClient) -> AsyncWebClient:
    """The same client (token, URL, session, 429 windows), minus the rate-limit and 5xx retry
    handlers: the delivery queue retries those itself, paced and reported per channel."""
    holds = client.holds if isinstance(client, HoldingClient) else MethodHolds()
    return _holding_client(
        holds,
        token=client.token,
        base_url=client.base_url,
        timeout=client.timeout,
        session=client.session,
        retry_handlers=[
            h
            for h in client.retry_handlers
            if not isinstance(h, (AsyncRateLimitErrorRetryHandler, AsyncServerErrorRetryHandler))
        ],
    )


@dataclass
class _Job:
    method: str
    kwargs: dict
    future: asyncio.Future


@dataclass
class ChannelQueue:
    """The FIFO of one channel and its token bucket; a worker task runs while there is work."""

    client: object
    channel: str
    pace_s: float = PACE_S
    burst: int = BURST
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    jobs: collections.deque = field(default_factory=collections.deque)
    worker: asyncio.Task | None = None
    rate_limited: int = 0  # 429s met (for the bench and the tests)
    _tokens: float = 0.0
    _stamp: float | None = None

    def _take_token(self) -> float:
        """Seconds to wait before the next paced message may go (0: go now, the token is taken)."""
        now = self.clock()
        if self._stamp is None:
            self._tokens, self._stamp = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) / self.pace_s)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) * self.pace_s

    async def run(self) -> None:
        # No await between the emptiness check and returning: a job added later starts a new worker.
        while self.jobs:
            job = self.jobs[0]
            try:
                result = await self._send(job)
            except Exception as exc:  # every failure goes to the caller; the queue itself goes on
                if not job.future.done():
                    job.future.set_exception(exc)
            else:
                if not job.future.done():
                    job.future.set_result(result)
            self.jobs.popleft()

    async def _send(self, job: _Job):
        if job.method == UPLOAD:
            return await self._upload(job.kwargs)
        return await self._retrying(
            job.method, lambda: getattr(self.client, job.method)(channel=self.channel, **job.kwargs)
        )

    async def _upload(self, kwargs: dict):
        """files_upload_v2, one step at a time, each retried on its own (429, 5xx, a dropped
        connection): a file's upload slot is asked for once, its bytes sent once they can be, and
        every slot handed out is completed in one completeUploadExternal."""
        from slack_sdk.web.internal_utils import _to_v2_file_upload_item

        kwargs = dict(kwargs)
        given = kwargs.pop("file_uploads", None) or [
            {
                k: kwargs.pop(k)
                for k in ("file", "content", "filename", "title", "alt_txt", "snippet_type")
                if k in kwargs
            }
        ]
        client = self.client
        files = [_to_v2_file_upload_item(dict(f)) for f in given]
        sent: list[dict] = []  # files whose slot is open and whose bytes are there

        def complete():
            return client.files_completeUploadExternal(  # type: ignore[attr-defined]
                files=[{"id": f["file_id"], "title": f["title"]} for f in sent],
                channel_id=self.channel,
                **{k: v for k, v in kwargs.items() if k in ("thread_ts", "initial_comment") and v is not None},
            )

        try:
            for f in files:
                slot = await self._retrying(
                    "files_getUploadURLExternal",
                    lambda f=f: client.files_getUploadURLExternal(  # type: ignore[attr-defined]
                        filename=f.get("filename"),
                        length=f.get("length"),
                        alt_txt=f.get("alt_txt"),
                        snippet_type=f.get("snippet_type"),
                    ),
                )
                f["file_id"], f["upload_url"] = slot.get("file_id"), slot.get("upload_url")
                await self._retrying("file upload", lambda f=f: self._put_bytes(f))
                sent.append(f)
        except Exception:
            if sent:  # a later file failed: what was started is still completed, then the failure told
                await self._retrying("files_completeUploadExternal", complete)
            raise
        return await self._retrying("files_completeUploadExternal", complete)

    async def _put_bytes(self, f: dict) -> None:
        """Step 2 of an upload: the file's bytes to its upload URL (a 5xx raises, to be retried)."""
        client = self.client
        result = await client._upload_file(  # type: ignore[attr-defined]
            url=f["upload_url"],
            data=f["data"],
            logger=client.logger,
            timeout=client.timeout,
            proxy=client.proxy,
            ssl=client.ssl,  # type: ignore[attr-defined]
        )
        if result.status != 200:
            raise aiohttp.ClientResponseError(
                None,  # type: ignore[arg-type]
                (),
                status=result.status,
                message=f"upload of {f.get('filename')} answered {result.status}",
            )

    async def _retrying(self, method: str, call: Callable[[], Awaitable]):
        """``call`` until Slack takes it: a 429 waits its Retry-After, a 5xx or a dropped
        connection backs off; a Slack error that is an answer is raised at once."""
        limited = transport = 0
        while True:
            if method in PACED_METHODS:
                while (wait := self._take_token()) > 0:
                    await self.sleep(wait)
            try:
                return await call()
            except SlackApiError as exc:
                if server_error(exc):  # like a dropped connection: the message may never have reached Slack
                    transport += 1
                    if transport > MAX_TRANSPORT_RETRIES:
                        raise DeliveryFailed(method, self.channel, limited + transport, exc) from exc
                    log.info("%s in %s: Slack answered %s; retrying", method, self.channel, slack_error(exc))
                    await self.sleep(_server_wait(exc, 2.0 ** (transport - 1)))
                    continue
                wait = retry_after(exc)
                if wait is None:
                    raise  # Slack's answer, not a hiccup: the caller decides
                limited += 1
                self.rate_limited += 1
                if limited > MAX_RATE_LIMITED:
                    raise DeliveryFailed(method, self.channel, limited + transport, exc) from exc
                log.info("%s in %s rate limited; retrying after %.1f s", method, self.channel, wait)
                await self.sleep(wait)
                # Slack's clock wins over ours: once its Retry-After is over one message may go, then the pace.
                self._tokens, self._stamp = 1.0, self.clock()
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                transport += 1
                if transport > MAX_TRANSPORT_RETRIES:
                    raise DeliveryFailed(method, self.channel, limited + transport, exc) from exc
                await self.sleep(2.0 ** (transport - 1))


class Delivery:
    """The per-channel queues of one Slack client; ``call`` returns Slack's response or raises."""

    def __init__(
        self,
        client,
        *,
        pace_s: float = PACE_S,
        burst: int = BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.client = client
        self.pace_s, self.burst, self.clock, self.sleep = pace_s, burst, clock, sleep
        self.queues: dict[str, ChannelQueue] = {}
        # (channel, ts) -> the message's permalink; a pending ask is shared by everyone who needs it
        self._permalinks: collections.OrderedDict[tuple[str, str], asyncio.Future] = collections.OrderedDict()

    def submit(self, method: str, channel: str, **kwargs) -> asyncio.Future:
        """Queue one call behind everything already queued for ``channel``; its future holds the answer."""
        queue = self.queues.get(channel)
        if queue is None:
            queue = self.queues[channel] = ChannelQueue(
                self.client, channel, self.pace_s, self.burst, self.clock, self.sleep
            )
        future = asyncio.get_running_loop().create_future()
        queue.jobs.append(_Job(method, kwargs, future))
        if queue.worker is None or queue.worker.done():
            queue.worker = asyncio.create_task(queue.run())
        return future

    async def call(self, method: str, channel: str, **kwargs):
        return await self.submit(method, channel, **kwargs)

    async def post(self, channel: str, **kwargs):
        return await self.call("chat_postMessage", channel, **kwargs)

    async def update(self, channel: str, **kwargs):
        return await self.call("chat_update", channel, **kwargs)

    async def permalink(self, channel: str, ts: str) -> str | None:
        """The message's permalink (chat.getPermalink once per message: it never changes); None
        when Slack has none. A failure is not kept, so the next asker tries again."""
        key = (channel, ts)
        found = self._permalinks.get(key)
        if found is None:
            found = self._permalinks[key] = asyncio.ensure_future(
                self.client.chat_getPermalink(channel=channel, message_ts=ts)
            )
            while len(self._permalinks) > PERMALINKS_KEPT:
                self._permalinks.popitem(last=False)
        else:
            self._permalinks.move_to_end(key)
        try:
            response = await asyncio.shield(found)
        except Exception:
            if self._permalinks.get(key) is found:
                del self._permalinks[key]
            raise
        link = response.get("permalink")
        return str(link) if link else None

    @property
    def rate_limited(self) -> int:
        return sum(q.rate_limited for q in self.queues.values())

    async def close(self, timeout_s: float = 10.0) -> None:
        """Let what is queued go out (bounded), then stop the workers."""
        workers = [q.worker for q in self.queues.values() if q.worker is not None and not q.worker.done()]
        if workers:
            _, pending = await asyncio.wait(workers, timeout=timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for queue in self.queues.values():  # whoever still waits learns it will not be sent
            while queue.jobs:
                job = queue.jobs.popleft()
                if not job.future.done():
                    job.future.set_exception(
                        DeliveryFailed(job.method, queue.channel, 0, RuntimeError("shutting down"))
                    )


@dataclass
class _Answer:
    leader: str | None  # the user whose request builds the answer
    where: asyncio.Future  # (channel, ts) of the thread, or None when the leader could not start one
    done_at: float | None = None


class Coalescer:
    """Same question, same cluster, same channel, at once: one answer, everyone pointed to it."""

    def __init__(self, window_s: float = COALESCE_WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.window_s, self.clock = window_s, clock
        self._answers: dict[Hashable, _Answer] = {}

    def join(self, key: Hashable, user: str | None) -> tuple[bool, _Answer]:
        """(True, new entry) for the first asker, who must call ``started`` and ``finished``;
        (False, the leader's entry) for a question already being answered or answered recently."""
        now = self.clock()
        for k in [k for k, a in self._answers.items() if a.done_at is not None and now - a.done_at > self.window_s]:
            del self._answers[k]
        found = self._answers.get(key)
        if found is not None:
            return False, found
        entry = self._answers[key] = _Answer(user, asyncio.get_running_loop().create_future())
        return True, entry

    def started(self, entry: _Answer, where: tuple[str, str] | None) -> None:
        if not entry.where.done():
            entry.where.set_result(where)

    def finished(self, key: Hashable, entry: _Answer, ok: bool) -> None:
        """The answer is posted (kept ``window_s`` for late askers), or failed (forgotten at once)."""
        self.started(entry, None)  # followers waiting on a leader that never started: they run themselves
        if ok and entry.where.result() is not None:
            entry.done_at = self.clock()
        elif self._answers.get(key) is entry:
            del self._answers[key]
