"""Issue 28's holes, each through the real Bolt app over signed HTTP against the Slack stand-in, the
fault injected from outside (the stand-in's answers, raw HTTP requests): a 5xx from Slack or a proxy
in front of it, a mention whose first delivery was lost, malformed requests, and the smaller ones
(pointer mentions, confirm tokens in the working message, where /healthz and /metrics answer)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
from urllib.parse import urlencode

import aiohttp
import pytest
from slack_harness import OPS, SIGNING_SECRET, sign
from slack_stand_in import TEAM

from bot.delivery import MAX_TRANSPORT_RETRIES
from kbot_settings import load as load_settings

RETRY = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
ENVOY = "upstream connect error or disconnect/reset before headers"  # what Envoy answers for a dead upstream
HTML = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
SLACK_JSON = json.dumps({"ok": False, "error": "internal_error"})


def _working(stand) -> list:
    return [c for c in stand.called("chat.postMessage") if "Working on" in (c.args.get("text") or "")]


def _tracebacks(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info]


def _mention(ts: str) -> dict:
    return {"type": "app_mention", "user": "U0ALICE", "channel": OPS, "ts": ts, "text": "<@U0BOT> why URP"}


# ---- 1. a 5xx from Slack, or from a proxy in front of it -------------------------------------------------


async def test_a_plain_text_503_on_the_working_message_is_retried_and_answered(slack, caplog):
    slack.stand.server_error("chat.postMessage", ENVOY)  # once, no Retry-After: the dropped-connection backoff
    status, _, _ = await slack.slash("why URP")
    assert status == 200
    await slack.stand.wait_for(lambda: slack.audit("answer"), timeout_s=60)
    await slack.bot.drain(60)
    posts = [c for c in slack.stand.calls if c.method == "chat.postMessage"]
    assert posts[0].status == 503 and "Working on" in posts[0].args["text"]
    assert len(_working(slack.stand)) == 1 and slack.stand.thread_replies()
    assert [r["delivered"] for r in slack.audit("answer")] == ["thread"]
    assert not _tracebacks(caplog)


@pytest.mark.parametrize(
    "body,content_type",
    [(ENVOY, "text/plain"), (HTML, "text/html"), (SLACK_JSON, "application/json")],
    ids=["plain", "html", "json"],
)
async def test_a_5xx_that_outlasts_the_retries_is_answered_privately(slack, caplog, body, content_type):
    attempts = MAX_TRANSPORT_RETRIES + 1
    # Retry-After 0: the service's own "back now" (RFC 9110), so the retries need not wait
    slack.stand.server_error(
        "chat.postMessage", body, status=502, content_type=content_type, retry_after="0", times=attempts
    )
    status, _, _ = await slack.slash("why URP")
    assert status == 200
    await slack.stand.wait_for(lambda: slack.audit("answer"), timeout_s=60)
    await slack.bot.drain(60)
    posts = [c for c in slack.stand.calls if c.method == "chat.postMessage"]
    assert [c.status for c in posts] == [502] * attempts  # each one retried, none posted
    private = slack.stand.called("chat.postEphemeral")
    assert private and private[0].args["user"] == "U0ALICE" and "URP" in json.dumps(private[0].args)
    answer = slack.audit("answer")
    assert len(answer) == 1 and answer[0]["delivered"] == "private" and answer[0]["request_id"]
    assert answer[0]["request_id"] == slack.audit("request")[0]["request_id"]
    assert not _tracebacks(caplog)


async def test_when_the_private_answer_fails_too_the_audit_says_failed(slack, caplog):
    slack.stand.server_error("chat.postMessage", ENVOY, retry_after="0", times=MAX_TRANSPORT_RETRIES + 1)
    slack.stand.fail("chat.postEphemeral", "channel_not_found")
    status, _, _ = await slack.event(_mention("1700000028.000001"))  # a mention has no response_url to fall back to
    assert status == 200
    await slack.stand.wait_for(lambda: slack.audit("answer"), timeout_s=60)
    await slack.bot.drain(60)
    answer = slack.audit("answer")
    assert len(answer) == 1 and answer[0]["delivered"] == "failed" and answer[0]["outcome"] == "failed"
    assert answer[0]["step"] == "working message and private answer" and "HTTP 503 (upstream" in answer[0]["error"]
    assert not _tracebacks(caplog)


async def test_a_plain_text_503_on_a_user_lookup_is_retried(slack):
    slack.stand.server_error("users.info", ENVOY)  # not a post: the Web API client retries it itself
    await slack.slash("why URP")
    await slack.stand.wait_for(lambda: slack.audit("answer"), timeout_s=60)
    await slack.bot.drain(60)
    lookups = [c.status for c in slack.stand.calls if c.method == "users.info"]
    assert lookups == [503, 200] and slack.audit("refusal") == []
    assert [r["delivered"] for r in slack.audit("answer")] == ["thread"]


async def test_a_plain_text_5xx_on_an_edit_is_retried(slack):
    slack.stand.server_error("chat.update", ENVOY, retry_after="0")  # the working message becoming the summary
    await slack.slash("why URP")
    await slack.stand.wait_for(lambda: slack.audit("answer"), timeout_s=60)
    await slack.bot.drain(60)
    updates = [c for c in slack.stand.calls if c.method == "chat.update"]
    assert updates[0].status == 503 and updates[1].status == 200 and updates[1].args == updates[0].args
    assert [r["delivered"] for r in slack.audit("answer")] == ["thread"]


# ---- 2. a mention whose first delivery never reached us -----------------------------------------------


async def test_a_retried_mention_whose_first_delivery_was_lost_is_answered_once(slack):
    event = _mention("1700000028.000002")
    status, body, _ = await slack.event(event, event_id="Ev0LOST", headers=RETRY)
    assert status == 200 and body == ""
    await slack.stand.wait_for(lambda: slack.audit("answer"))
    await slack.bot.drain(60)
    for n in ("2", "3"):  # Slack's later retries of the same event
        status, _, _ = await slack.event(event, event_id="Ev0LOST", headers={**RETRY, "X-Slack-Retry-Num": n})
        assert status == 200
    await slack.bot.drain(60)
    assert [(r["source"], r["user"]) for r in slack.audit("request")] == [("mention", "U0ALICE")]
    assert [r["delivered"] for r in slack.audit("answer")] == ["thread"]
    assert len(_working(slack.stand)) == 1 and slack.stand.thread_replies("1700000028.000002")


async def test_a_redelivered_mention_is_acked_and_not_run_twice(slack):
    event = _mention("1700000028.000003")
    await slack.event(event, event_id="Ev0ONCE")
    await slack.event(event, event_id="Ev0ONCE", headers=RETRY)  # our ack was late
    await slack.event(event, event_id="Ev0ONCE")  # Slack may deliver an event twice without a retry header
    await slack.stand.wait_for(lambda: slack.audit("answer"))
    await slack.bot.drain(60)
    assert len(slack.audit("request")) == 1 and len(_working(slack.stand)) == 1
    # another event in the same thread is another question
    await slack.event(_mention("1700000028.000003"), event_id="Ev0OTHER")
    await slack.stand.wait_for(lambda: len(slack.audit("request")) == 2)


# ---- 3. malformed requests: 4xx, one short log line, no traceback ----------------------------------------


def _rejections(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "rejected" in r.getMessage()]


async def _post_raw(slack, body: bytes, headers: dict) -> tuple[int, str]:
    async with slack.session.post(slack.url, data=body, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_a_non_utf8_body_is_401_unsigned_and_400_signed(slack, caplog):
    caplog.set_level(logging.INFO)
    body = "text=why URP caf\u00e9&user_id=U0ALICE".encode("latin-1")  # é as one latin-1 byte: not UTF-8
    ts = str(int(time.time()))
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts}
    status, _ = await _post_raw(slack, body, {**headers, "X-Slack-Signature": "v0=" + "0" * 64})
    assert status == 401
    signature = "v0=" + hmac.new(SIGNING_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    status, text = await _post_raw(slack, body, {**headers, "X-Slack-Signature": signature})
    assert status == 400 and "malformed" in text
    assert len(_rejections(caplog)) == 2 and not _tracebacks(caplog)
    assert all(len(r.getMessage()) < 200 for r in _rejections(caplog))


@pytest.mark.parametrize("ts", ["soon", "", "1e9", "١٧٠٠٠٠٠٠٠٠"], ids=["word", "empty", "float", "arabic-digits"])
async def test_a_timestamp_that_is_not_a_number_is_401_without_a_traceback(slack, caplog, ts):
    caplog.set_level(logging.INFO)
    body = urlencode({"team_id": TEAM, "user_id": "U0ALICE", "command": "/kafka", "text": "why URP"})
    headers = {"X-Slack-Request-Timestamp": ts}  # as sent: the harness would fill an empty one in
    status, _, _ = await slack.post(
        body, "application/x-www-form-urlencoded", signature=sign(body, ts), headers=headers
    )
    assert status == 401
    assert len(_rejections(caplog)) == 1 and not _tracebacks(caplog)
    assert slack.audit("request") == []


def _block_actions(**over) -> dict:
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": "U0ALICE", "team_id": TEAM},
        "api_app_id": "A0KBOT",
        "channel": {"id": OPS},
        "container": {"type": "message", "message_ts": "1700000028.000009", "channel_id": OPS},
        "message": {"ts": "1700000028.000009", "type": "message"},
        "actions": [{"action_id": "kbot_action_0", "value": "help", "block_id": "b"}],
    }
    return {**payload, **over}


def _event(**over) -> dict:
    return {
        "type": "event_callback",
        "team_id": TEAM,
        "api_app_id": "A0KBOT",
        "event_id": "Ev0MALFORMED",
        "event": {**_mention("1700000028.000010"), **over},
    }


def _form(payload: dict) -> tuple[str, str]:
    return urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    "body,content_type",
    [
        _form(_block_actions(actions=[{}])),
        _form(_block_actions(actions=[{"action_id": "kbot_action_0", "value": 7}])),
        _form(_block_actions(user={"id": {"nested": 1}})),
        _form(_block_actions(channel={"id": ["C0"]})),
        _form(_block_actions(message={"ts": 1.5})),
        _form(_block_actions(api_app_id={"id": "A0KBOT"})),
        _form(_block_actions(authorizations=5)),
        (json.dumps(_event(text=42)), "application/json"),
        (json.dumps(_event(user={"id": "U0ALICE"})), "application/json"),
        (json.dumps(_event(channel=None, ts=["1"])), "application/json"),
        (json.dumps(_event(thread_ts={})), "application/json"),
        (json.dumps({**_event(), "team_id": 5}), "application/json"),
        (json.dumps({**_event(), "event_id": {"x": 1}}), "application/json"),
    ],
    ids=[
        "empty-action",
        "numeric-value",
        "object-user-id",
        "list-channel-id",
        "numeric-message-ts",
        "object-app-id",
        "numeric-authorizations",
        "numeric-event-text",
        "object-event-user",
        "list-event-ts",
        "object-thread-ts",
        "numeric-team-id",
        "object-event-id",
    ],
)
async def test_a_signed_malformed_payload_is_400_and_never_runs(slack, caplog, body, content_type):
    caplog.set_level(logging.INFO)
    status, text, _ = await slack.post(body, content_type)
    assert status == 400 and "malformed" in text
    await slack.bot.drain(60)
    assert slack.audit("request") == [] and slack.audit("refusal") == []
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "malformed" in lines[0].getMessage() and not _tracebacks(caplog)
    status, _, _ = await slack.post(body, content_type, secret="not-the-signing-secret")
    assert status == 401


async def test_the_well_formed_twins_of_those_payloads_are_answered(slack):
    # the payloads above minus their fault: so a 400 there is the fault's, not the harness's
    status, _, _ = await slack.post(*_form(_block_actions()))
    assert status == 200
    status, _, _ = await slack.post(json.dumps(_event()), "application/json")
    assert status == 200
    await slack.stand.wait_for(lambda: len(slack.audit("answer")) == 2)
    assert sorted(r["source"] for r in slack.audit("request")) == ["button", "mention"]


# ---- 4. the smaller ones ---------------------------------------------------------------------------


async def test_a_pointer_to_the_first_askers_thread_mentions_them_and_links_it(slack):
    await slack.slash("why URP", user="U0ALICE")
    await slack.stand.wait_for(lambda: slack.audit("answer"))
    await slack.bot.drain(60)
    await slack.slash("why URP", user="U0BOB")  # the same question, moments later: pointed to Alice's thread
    pointer = (await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral")))[0]
    await slack.bot.drain(60)
    assert pointer.args["user"] == "U0BOB"
    shown = json.dumps(pointer.args)
    assert "<@U0ALICE> asked" in shown and "&lt;@" not in shown
    thread_ts = slack.audit("answer")[0]["thread_ts"]
    assert f"<https://standin.slack.com/archives/{OPS}/p{thread_ts.replace('.', '')}|this thread>" in shown
    assert [r["delivered"] for r in slack.audit("answer")] == ["thread", "pointer"]


async def test_the_working_message_never_shows_a_confirm_token(slack):
    message, buttons = await slack.preview("fake-bump orders")
    token = buttons["Confirm"]["value"].split()[1]
    await slack.slash(f"confirm {token}")
    await slack.stand.wait_for(lambda: slack.audit("execution"))
    await slack.bot.drain(60)
    # the working message, and its edits into the one-line summary
    labelled = [
        c.args["text"]
        for c in slack.stand.calls
        if c.method in ("chat.postMessage", "chat.update") and "/kafka confirm" in (c.args.get("text") or "")
    ]
    assert len(labelled) >= 2 and all("`/kafka confirm …` for <@U0ALICE>" in t for t in labelled)
    assert not [t for t in labelled if token in t]
    assert slack.bump.count("execute") == 1  # the token itself still worked


def _second_loopback() -> str | None:
    """127.0.0.2: this host, but not the 127.0.0.1 the health endpoints answer on (Linux routes all
    of 127/8 to the loopback device); None where it does not reach this host."""
    try:
        socket.create_connection(("127.0.0.2", 9), timeout=0.2).close()
    except ConnectionRefusedError:
        pass  # it reached this host, where nothing listens on port 9
    except OSError:
        return None
    return "127.0.0.2"


@pytest.mark.parametrize("env,exposed", [({}, False), ({"KBOT_HEALTH_HOST": "0.0.0.0"}, True)])
async def test_health_and_metrics_answer_on_loopback_only_unless_exposed(slack, env, exposed):
    other = _second_loopback()
    if other is None:
        pytest.skip("no second loopback address to connect to")
    await slack.start_bot(host="0.0.0.0", kbot=load_settings(env))  # every address, as `kbot serve` listens by default
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/metrics"):
            async with http.get(f"http://127.0.0.1:{slack.port}{path}") as r:
                assert r.status == 200, path
            async with http.get(f"http://{other}:{slack.port}{path}") as r:
                assert r.status == (200 if exposed else 403), path
                if not exposed:
                    assert "KBOT_HEALTH_HOST" in await r.text()
        # the Slack endpoint still listens on every address (here: 401, unsigned)
        async with http.post(f"http://{other}:{slack.port}/slack/events", data=b"x") as r:
            assert r.status == 401
