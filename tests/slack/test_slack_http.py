"""The real Bolt app over HTTP: signatures, acks, threaded answers, rate limits, refusals."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from slack_harness import BOT_TOKEN, INCIDENTS, OPS, RANDOM, SIGNING_SECRET, Harness, sign
from slack_stand_in import TEAM

from bot.slack_app import SecretFilter


def _blocks_text(calls) -> str:
    return json.dumps([c.args.get("blocks") for c in calls])


# ---- request verification --------------------------------------------------------------------------


async def test_stale_timestamp_is_401(slack):
    status, _, _ = await slack.slash("help", ts=str(int(time.time()) - 10 * 60))
    assert status == 401
    await slack.bot.drain(60)  # anything the request started has finished (nothing should have)
    assert slack.stand.called("chat.postMessage") == [] and slack.audit("request") == []


async def test_bad_signature_is_401(slack):
    status, _, _ = await slack.slash("help", secret="not-the-signing-secret")
    assert status == 401
    status, _, _ = await slack.slash("help", signature="v0=" + "0" * 64)
    assert status == 401
    await slack.bot.drain(60)  # anything the request started has finished (nothing should have)
    assert slack.stand.called("chat.postMessage") == []


async def test_signature_over_a_different_body_is_401(slack):
    ts = str(int(time.time()))
    status, _, _ = await slack.post(
        "command=%2Fkafka&text=help&user_id=U0ALICE",
        "application/x-www-form-urlencoded",
        ts=ts,
        signature=sign("command=%2Fkafka&text=why", ts),
    )
    assert status == 401


# ---- answers ---------------------------------------------------------------------------------------------


async def test_help_acks_fast_and_answers_in_a_thread(slack):
    status, body, elapsed = await slack.slash("help")
    assert status == 200 and body == ""  # an empty ack: nothing shows until the working message
    assert elapsed < 3.0
    replies = await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    working = slack.stand.called("chat.postMessage")[0]
    assert working.args["channel"] == OPS and "thread_ts" not in working.args or working.args.get("thread_ts") is None
    assert "Working on" in working.args["text"]
    assert replies[0].args["thread_ts"] == working.result["ts"]
    assert "Kafka incident bot" in _blocks_text(replies)
    summary = slack.stand.called("chat.update")[-1]
    assert summary.args["ts"] == working.result["ts"] and "answer in the thread" in summary.args["text"]
    answer = slack.audit("answer")[0]
    assert answer["command"] == "help" and answer["outcome"] == "answered" and answer["user"] == "U0ALICE"


async def test_why_urp_answer_has_cause_source_line_and_mitigation(slack):
    await slack.slash("why URP")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    replies = slack.stand.thread_replies()
    text = _blocks_text(replies)
    assert "Partition.scala:232" in text
    # No cluster here: the short answer says so, and leads with the top cause's first checks.
    assert "*UNKNOWN*" in text and "*Check first: Broker loss*" in text
    assert "Mitigation" not in text
    # The "Show full runbook" button gives the whole runbook form in the thread.
    message, buttons = slack.previews()[-1]
    assert buttons["Show full runbook"]["value"] == "why URP --full"
    before = len(replies)
    await slack.click(buttons["Show full runbook"], message)
    await slack.stand.wait_for(lambda: len(slack.stand.thread_replies()) > before)
    await slack.bot.drain(60)
    full = _blocks_text(slack.stand.thread_replies()[before:])
    assert "*Mitigation:*" in full and "*First steps:*" in full


async def test_ack_is_under_300ms_once_warm(slack):
    await slack.slash("help")  # the first request pays Bolt's auth.test
    await slack.bot.drain(60)
    timings = []
    for _ in range(5):
        status, _, elapsed = await slack.slash("help")
        assert status == 200
        timings.append(elapsed)
    await slack.bot.drain(60)
    # The target is 300 ms; the median is held to it, the worst to 1 s so a busy shared CI host
    # does not make this flaky (Slack's own limit is 3 s).
    assert sorted(timings)[2] < 0.3 and max(timings) < 1.0, timings


async def test_429_is_retried_after_retry_after(slack):
    slack.stand.rate_limit("chat.postMessage", retry_after=1)
    await slack.slash("help")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies(), timeout_s=15)
    await slack.bot.drain(15)
    posts = [c for c in slack.stand.calls if c.method == "chat.postMessage"]
    assert posts[0].status == 429 and posts[1].status == 200
    assert posts[1].at - posts[0].at >= 1.0  # waited for Retry-After
    assert posts[1].args["text"] == posts[0].args["text"]  # the same message, retried


async def test_mention_answers_in_a_thread(slack):
    status, _, _ = await slack.event(
        {
            "type": "app_mention",
            "user": "U0ALICE",
            "channel": OPS,
            "ts": "1700000001.000001",
            "text": "<@U0BOT> help why",
        }
    )
    assert status == 200
    working = (await slack.stand.wait_for(lambda: slack.stand.thread_replies("1700000001.000001")))[0]
    await slack.bot.drain(60)
    # Inside a thread the working reply itself becomes the answer's first page.
    update = [c for c in slack.stand.called("chat.update") if c.args["ts"] == working.result["ts"]][-1]
    assert "/kafka why" in _blocks_text([update])


async def test_mention_redelivery_is_not_answered_twice(slack):
    event = {
        "type": "app_mention",
        "user": "U0ALICE",
        "channel": OPS,
        "ts": "1700000002.000001",
        "text": "<@U0BOT> help",
    }
    await slack.event(event, event_id="Ev0REDELIVERED")
    await slack.event(
        event, event_id="Ev0REDELIVERED", headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    )
    await slack.stand.wait_for(lambda: slack.stand.thread_replies("1700000002.000001"))
    await slack.bot.drain(60)
    assert len([c for c in slack.stand.called("chat.postMessage") if "Working on" in c.args.get("text", "")]) == 1


async def test_secrets_never_reach_the_logs(slack, caplog):
    caplog.set_level(logging.DEBUG)  # slack_sdk and Bolt log requests and bodies at DEBUG
    await slack.slash("why URP")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    assert "Sending a request" in caplog.text  # the debug logs were on
    assert BOT_TOKEN not in caplog.text and SIGNING_SECRET not in caplog.text


async def test_a_pasted_token_is_masked_in_the_audit_the_echo_and_the_logs(slack, caplog):
    caplog.handler.addFilter(SecretFilter([BOT_TOKEN, SIGNING_SECRET]))  # as `kbot serve` installs it
    caplog.set_level(logging.DEBUG)
    await slack.slash(f"why URP xoxb-9999-8888-someoneelsestoken {BOT_TOKEN}")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    assert BOT_TOKEN not in caplog.text and "someoneelsestoken" not in caplog.text
    audit = slack.bot.audit.path.read_text()
    assert BOT_TOKEN not in audit and "someoneelsestoken" not in audit and "***" in audit
    working = slack.stand.called("chat.postMessage")[0].args["text"]
    assert "xoxb" not in working and "***" in working
    posted = json.dumps([c.args for c in slack.stand.calls if c.method.startswith("chat.")])
    assert BOT_TOKEN not in posted and "someoneelsestoken" not in posted


async def test_not_in_channel_answers_privately(slack):
    await slack.slash("help", channel="C0NOTIN")
    await slack.stand.wait_for(lambda: slack.stand.called("response_url"))
    await slack.bot.drain(60)
    assert "Kafka incident bot" in slack.stand.called("response_url")[0].args.get("text", "")


# ---- refusals: answered privately and audited --------------------------------------------------------


@pytest.mark.parametrize(
    "text,needle",
    [
        ("x" * 5000, "limit is 4,000"),
        ("frobnicate the brokers", "Unknown command"),
        ("why -rf /", "may not start with '-'"),
        ('describe "orders\'; DROP TABLE topics; --"', "not a valid topic name"),
        # the text after `why` is the user's words (a question, never SQL); a topic argument is checked
        ("describe orders'; DROP TABLE x", "not a valid topic name"),
        ("", "Empty command"),
    ],
)
async def test_bad_input_is_refused_privately_and_audited(slack, text, needle):
    status, _, elapsed = await slack.slash(text)
    assert status == 200 and elapsed < 3
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert needle in json.dumps(eph[0].args)
    assert eph[0].args["user"] == "U0ALICE"
    assert slack.stand.called("chat.postMessage") == []  # nothing in the channel
    refusal = slack.audit("refusal")[0]
    assert refusal["step"] == "bad_input" and needle in refusal["reason"]
    assert refusal["text_len"] == len(text) and len(refusal.get("text", "")) <= 500


@pytest.mark.parametrize(
    "user,rule,needle",
    [
        ("U0NOBODY", "identity: unknown user", "does not know user"),
        ("U0GUEST", "identity: guest", "Guest accounts"),
    ],
)
async def test_unknown_users_and_guests_are_refused(slack, user, rule, needle):
    await slack.slash("why URP", user=user)
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert needle in json.dumps(eph[0].args)
    assert slack.stand.called("chat.postMessage") == []
    assert slack.audit("refusal")[0]["rule"] == rule


@pytest.mark.parametrize(
    "kw,rule", [({"team": "T0OTHER"}, "KBOT_ALLOWED_TEAM_IDS"), ({"app": "A0OTHERAPP"}, "KBOT_ALLOWED_API_APP_IDS")]
)
async def test_other_workspaces_and_apps_are_refused_in_the_ack(slack, kw, rule):
    status, body, _ = await slack.slash("why URP", **kw)
    assert status == 200 and "does not serve" in body or "not accepted" in body
    await slack.bot.drain(60)
    assert slack.stand.called("chat.postMessage") == [] and slack.stand.called("users.info") == []
    refusal = slack.audit("refusal")[0]
    assert refusal["rule"] == rule and refusal["step"] == "origin"


async def test_channel_outside_the_policy_is_refused(slack):
    await slack.slash("help", channel=RANDOM)
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    assert "does not take commands in this channel" in json.dumps(eph[0].args)
    await slack.bot.drain(60)
    assert slack.audit("refusal")[0]["rule"] == "channels"


async def test_mutating_command_without_a_grant_is_refused_with_the_rule(slack):
    await slack.slash("fake-bump orders", user="U0CAROL", channel=INCIDENTS)
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert "changes the cluster" in json.dumps(eph[0].args)
    assert slack.bump.count("plan") == 0  # refused before any planning
    refusal = slack.audit("refusal")[0]
    assert refusal["rule"] == "default: deny unless granted" and refusal["command"] == "fake-bump"


async def test_deny_rule_wins_and_is_named(slack):
    await slack.slash("help", user="U0MALLORY")
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert "deny[no-mallory]" in json.dumps(eph[0].args)


async def test_group_membership_grants_via_usergroups(slack):
    await slack.slash("fake-bump orders", user="U0BOB")
    await slack.stand.wait_for(lambda: slack.previews())
    assert slack.stand.called("usergroups.users.list")[0].args["usergroup"] == "S0ONCALL"


async def test_every_request_is_audited(slack):
    await slack.slash("help")
    await slack.slash("frobnicate")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies() and slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    requests = slack.audit("request")
    assert {r["text"] for r in requests} == {"help", "frobnicate"}
    assert all(r["team"] == TEAM and r["channel"] == OPS for r in requests)


@pytest.mark.parametrize(
    "text,command",
    [
        ("abort-txn payments 0", "abort-txn"),
        ("elect-leaders orders", "elect-leaders"),
        ("throttle set 50MB/s", "throttle set"),
        ("retention orders 3600000", "retention"),
    ],
)
async def test_the_real_mutating_commands_are_denied_unless_granted(stand, tmp_path, text, command):
    from slack_harness import Harness

    h = Harness(stand, tmp_path)
    h.router = None  # the real registry, with the other engineer's action commands
    await h.start_bot(policy=None)  # no KBOT_RBAC_FILE: read-only open, every mutating command refused
    try:
        await h.slash(text)
        eph = await stand.wait_for(lambda: stand.called("chat.postEphemeral"))
        await h.bot.drain(60)
        assert f"'{command}' changes the cluster" in json.dumps(eph[0].args)
        assert stand.called("chat.postMessage") == []
        assert h.audit("refusal")[0]["command"] == command
    finally:
        await h.close()


async def test_an_unreadable_user_group_fails_closed(slack):
    slack.stand.fail("usergroups.users.list", "missing_scope", times=5)
    await slack.slash("help", user="U0MALLORY")
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert "Could not read user group membership" in json.dumps(eph[0].args)
    assert slack.audit("refusal")[0]["rule"] == "groups: Slack error"


async def test_progress_updates_the_working_message_throttled(slack):
    await slack.slash("slowcheck")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    working = slack.stand.called("chat.postMessage")[0].result["ts"]
    edits = [c.args["text"] for c in slack.stand.called("chat.update") if c.args["ts"] == working]
    # The first progress line shows at once; the next two come within a second and are dropped
    # (chat.update is rate limited); the final summary always lands last.
    assert edits[0].endswith("reading metadata for 5,000 partitions") and ":hourglass_flowing_sand:" in edits[0]
    assert len(edits) == 2 and "Slow check" in edits[-1]


async def test_progress_through_the_thread_with_a_clock(stand):
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slack_thread import MIN_PROGRESS_INTERVAL_S, SlackThread

    now = [100.0]
    thread = SlackThread(
        AsyncWebClient(token=BOT_TOKEN, base_url=stand.url + "/api/"), OPS, label="`/kafka x`", clock=lambda: now[0]
    )
    await thread.start("working")
    await thread.progress("one")
    await thread.progress("two")  # same second: dropped
    now[0] += MIN_PROGRESS_INTERVAL_S / 2
    await thread.progress("two and a half")  # within the interval: dropped too
    now[0] += MIN_PROGRESS_INTERVAL_S
    await thread.progress("three")
    # Progress edits are queued, not waited for (a busy channel must not slow the command down).
    await stand.wait_for(lambda: len(stand.called("chat.update")) >= 2)
    await thread.delivery.close()
    assert [c.args["text"].rsplit(" ", 1)[-1] for c in stand.called("chat.update")] == ["one", "three"]


async def test_stand_in_refuses_blocks_past_the_ceiling_and_the_answer_still_arrives(stand):
    """The stand-in holds posts to Slack's limits (tests/block_limits.py); a page the renderer got
    wrong is refused with `msg_blocks_too_long`, and the thread falls back to the answer as text."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.slack_thread import SlackThread
    from framework.reply import Reply

    client = AsyncWebClient(token=BOT_TOKEN, base_url=stand.url + "/api/")
    too_long = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 2900}} for _ in range(5)]
    from slack_sdk.errors import SlackApiError

    with pytest.raises(SlackApiError) as refused:
        await client.chat_postMessage(channel=OPS, text="t", blocks=too_long)
    assert refused.value.response["error"] == "msg_blocks_too_long"

    thread = SlackThread(client, OPS, thread_ts="1700000000.000001", label="`/kafka x`")
    reply = Reply(title="Big", verdict="the verdict")
    ts = await thread._post({"text": "t", "blocks": too_long}, thread_ts="1700000000.000001", reply=reply)
    await thread.delivery.close()
    fallback = stand.called("chat.postMessage")[-1]
    assert fallback.result["ts"] == ts and "blocks" not in fallback.args
    assert "the verdict" in fallback.args["text"]


async def test_the_lake_part_follows_the_live_answer_in_its_thread(stand, tmp_path):
    """A command that answers before the metric lake's evidence is in: the live answer first, then
    what the lake adds, in the same thread."""
    from slack_fakes import router_with

    from framework.reply import Evidence, Reply
    from framework.spec import Command, CommandSpec

    async def _final() -> Reply:
        return Reply(title="Lake check", severity="warning", verdict="lag is growing", evidence=[LAKE])

    LAKE = Evidence("Lag trend", "up 40% in 30m", "lake: group_lag", "bad")

    async def _lake_check(request, ctx) -> Reply:
        reply = Reply(title="Lake check", severity="ok", verdict="live looks fine")
        reply.later = asyncio.ensure_future(_final())
        return reply

    h = Harness(stand, tmp_path)
    h.router = router_with(Command(CommandSpec(words=("lakecheck",), summary="test: a lake part later"), _lake_check))
    try:
        await h.start_bot()
        await h.slash("lakecheck")
        await stand.wait_for(lambda: h.audit("answer"), timeout_s=30)
        await h.bot.drain(60)
        replies = [json.dumps(c.args) for c in stand.thread_replies()]
        assert "live looks fine" in replies[0] and "Metric lake" in replies[-1] and "up 40% in 30m" in replies[-1]
        answer = h.audit("answer")[0]
        assert answer["delivered"] == "thread" and answer["outcome"] == "answered"
    finally:
        await h.close()
