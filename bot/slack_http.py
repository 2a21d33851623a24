"""What reaches /slack/events before a listener runs: the request's shape, its signature, and
whether it repeats one already received.

A request that is not a Slack payload gets 401 unsigned, 400 signed, and one short log line,
never a traceback; request bodies and response URLs never reach the logs. Slack retries a request
it thinks we missed (X-Slack-Retry-Num); a repeat of one we already received (an event: the same
event_id) is acked again and not run again (``Deliveries``, read by the listeners' middleware).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

log = logging.getLogger(__name__)

RETRY_MEMORY_S = 30 * 60.0  # Slack retries within minutes; remember acked requests well past that
RETRY_MEMORY_MAX = 50_000  # bounded: a flood of distinct requests cannot grow memory without end
SIGNATURE_MAX_AGE_S = 5 * 60  # Slack's rule: an older timestamp is a replay
_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # ASCII digits only: int() would also take "١٧٠٠" or " 17"


class Deliveries:
    """Requests received recently: an event by its event_id, anything else by a digest of its signed
    body. Slack resends the same body when it retries (X-Slack-Retry-Num: 1..3), so a retry whose
    body we already acked is a duplicate; an event is one event_id however often it comes (a retry,
    or a duplicate delivery without the header). A retry of a request that never reached us (sent
    while we restarted) is the first delivery and runs.

    In memory: a retry reaching a freshly restarted process runs once more; the gate's single-use
    transition still keeps a confirm from executing twice."""

    def __init__(
        self,
        ttl_s: float = RETRY_MEMORY_S,
        max_entries: int = RETRY_MEMORY_MAX,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.ttl_s, self.max_entries, self.clock = ttl_s, max_entries, clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self.duplicates = 0

    def first(self, request) -> bool:
        """Record this delivery; False when it repeats one already received."""
        now = self.clock()
        while self._seen and (
            len(self._seen) >= self.max_entries or now - next(iter(self._seen.values())) > self.ttl_s
        ):
            self._seen.popitem(last=False)
        body = request.body if isinstance(request.body, dict) else {}
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and event_id:
            key, repeat = "event:" + event_id, True
        else:
            key = "body:" + hashlib.sha256((request.raw_body or "").encode()).hexdigest()
            repeat = bool(request.headers.get("x-slack-retry-num"))
        if repeat and key in self._seen:
            self.duplicates += 1
            return False
        self._seen[key] = now
        self._seen.move_to_end(key)
        return True


# Fields the bot or Bolt reads, which Slack always sends as strings (object: its fields): anything
# else there is not Slack's payload, and would fail deep in a listener instead of earning a 400.
_STRING_FIELDS: dict[str, tuple[str, ...]] = {
    "": (
        "type",
        "command",
        "text",
        "user_id",
        "channel_id",
        "team_id",
        "enterprise_id",
        "api_app_id",
        "response_url",
        "event_id",
    ),
    "user": ("id", "team_id"),
    "team": ("id", "enterprise_id"),
    "channel": ("id",),
    "container": ("channel_id", "message_ts", "thread_ts"),
    "message": ("ts", "thread_ts", "text"),
    "enterprise": ("id",),
    "event": ("type",),
}
_MENTION_FIELDS = ("user", "channel", "text", "ts", "thread_ts")  # what a mention's listener reads


def _not_strings(obj: dict, keys, where: str = "") -> str:
    for key in keys:
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return f"'{where}{key}' is not a string"
    return ""


def malformed(body) -> str:
    """Why a (signed) body is not a Slack payload we can act on, or "" when it is."""
    if not isinstance(body, dict):
        return f"the payload is a JSON {type(body).__name__}, not an object"
    for key in _STRING_FIELDS:
        if key and body.get(key) is not None and not isinstance(body[key], dict):
            return f"'{key}' is not an object"
    for key, fields in _STRING_FIELDS.items():
        part = body.get(key) if key else body
        problem = _not_strings(part, fields, f"{key}." if key else "") if isinstance(part, dict) else ""
        if problem:
            return problem
    auths = body.get("authorizations")
    if auths is not None and not (isinstance(auths, list) and all(isinstance(a, dict) for a in auths)):
        return "'authorizations' is not a list of objects"
    kind = body.get("type")
    if kind == "block_actions":
        actions = body.get("actions")
        if not isinstance(actions, list) or not actions or not all(isinstance(a, dict) for a in actions):
            return "block_actions without a list of actions"
        if not isinstance(body.get("user"), dict):
            return "block_actions without a user"
        if not all(isinstance(a.get("action_id"), str) and isinstance(a.get("value", ""), str) for a in actions):
            return "an action's action_id or value is not a string"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict):
            return "event_callback without an event"
        if event.get("type") in ("app_mention", "message"):
            return _not_strings(event, _MENTION_FIELDS + ("subtype", "bot_id"), "event.")
    return ""


class SlackHttp:
    """/slack/events: a malformed or badly timestamped request is answered here; the rest goes to Bolt,
    which checks the signature itself."""

    def __init__(self, app: AsyncApp, signing_secret: str):
        self.app, self.signing_secret = app, signing_secret

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        ts = request.headers.get("X-Slack-Request-Timestamp")
        if ts is not None and not _TIMESTAMP.fullmatch(ts):
            # Bolt would fail on it (a 500 and a traceback) before checking the signature; a missing
            # one stays Bolt's to answer (401, or 200 to Slack's SSL check).
            log.info("rejected a Slack request (%d bytes): its timestamp is missing or not a number", len(raw))
            return web.json_response({"error": "invalid request"}, status=401)
        try:
            bolt_request = await to_bolt_request(request)
            problem = malformed(bolt_request.body)
        except Exception as exc:  # Bolt parses while building the request: "payload=not json", not UTF-8
            bolt_request, problem = None, f"unparseable {request.content_type} body ({type(exc).__name__})"
        if problem:
            # Unsigned garbage stays a 401, as Bolt answers it; only Slack-signed garbage earns a 400.
            if not self._signed(raw, request.headers):
                log.info("rejected an unsigned malformed Slack request (%d bytes)", len(raw))
                return web.json_response({"error": "invalid request"}, status=401)
            log.warning("rejected a signed but malformed Slack request (%d bytes): %s", len(raw), problem)
            return web.json_response({"error": "malformed request"}, status=400)
        return await to_aiohttp_response(await self.app.async_dispatch(bolt_request))

    def _signed(self, raw: bytes, headers) -> bool:
        """Slack's signature (v0=HMAC-SHA256 of "v0:<timestamp>:<body>") over the raw bytes, which
        need not be UTF-8 here; slack_sdk's verifier decodes the body first and would raise."""
        ts, signature = headers.get("X-Slack-Request-Timestamp", ""), headers.get("X-Slack-Signature", "")
        if not _TIMESTAMP.fullmatch(ts) or abs(time.time() - int(ts)) > SIGNATURE_MAX_AGE_S:
            return False
        secret = (self.signing_secret or "").encode()
        expected = "v0=" + hmac.new(secret, b"v0:" + ts.encode() + b":" + raw, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "surrogateescape"))
