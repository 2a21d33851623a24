"""The listener middleware (bot/slack_listeners.py) and Bolt's respond(), through the real Bolt app
over signed HTTP against the Slack stand-in: origin refusals for every kind of request, retries
stopped before the origin check, and private answers through the response_url within Slack's limit."""

from __future__ import annotations

import json

import pytest_asyncio
from slack_fakes import router_with
from slack_harness import OPS, Harness

from framework.reply import Reply, Section
from framework.spec import Command, CommandSpec

RETRY = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
SLACK_RESPONSE_URL_LIMIT = 5  # Slack accepts at most 5 posts per response_url (api.slack.com/interactivity/handling)


async def _big_report(request, ctx) -> Reply:
    # Long enough that the answer takes far more than five Slack messages.
    return Reply(
        title="Big report",
        severity="ok",
        verdict="many sections",
        sections=[Section(f"Part {i}", [f"line {j} " + "x" * 200 for j in range(40)]) for i in range(60)],
    )


BIG = Command(CommandSpec(words=("bigreport",), summary="test command with a very long answer"), _big_report)


@pytest_asyncio.fixture(loop_scope="function")
async def big(stand, tmp_path):
    h = Harness(stand, tmp_path)
    h.router = router_with(h.bump.command(), BIG)
    await h.start_bot()
    yield h
    await h.close()


def _texts(calls) -> str:
    return json.dumps([c.args for c in calls])


async def test_a_mention_from_another_workspace_is_acked_audited_and_not_answered(slack):
    status, _, _ = await slack.event(
        {
            "type": "app_mention",
            "user": "U0ALICE",
            "channel": OPS,
            "ts": "1700000003.000001",
            "text": "<@U0BOT> why URP",
        },
        team="T0OTHER",
    )
    assert status == 200  # acked: otherwise Slack retries it
    await slack.stand.wait_for(lambda: slack.audit("refusal"))
    await slack.bot.drain(60)
    refusal = slack.audit("refusal")[0]
    assert refusal["step"] == "origin" and refusal["rule"] == "KBOT_ALLOWED_TEAM_IDS" and refusal["team"] == "T0OTHER"
    assert slack.audit("request") == []  # its listener never ran
    # Nothing reaches the other workspace, not even a user lookup.
    assert [c.method for c in slack.stand.calls if c.method.startswith(("chat.", "users."))] == []


async def test_a_retried_click_from_another_workspace_is_refused_once(slack):
    message, buttons = await slack.preview("fake-bump orders")
    for headers in (None, RETRY, {**RETRY, "X-Slack-Retry-Num": "2"}):  # the same signed body each time
        status, body, _ = await slack.click(
            buttons["Confirm"], message, team="T0OTHER", action_ts="1700000004.000001", headers=headers
        )
        assert status == 200 and body == ""
    await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert len(slack.audit("refusal")) == 1 and len(slack.stand.called("chat.postEphemeral")) == 1
    assert slack.bump.count("execute") == 0


async def test_a_refused_click_where_the_bot_cannot_post_is_answered_through_the_response_url(slack):
    message, buttons = await slack.preview("fake-bump orders")
    await slack.click(buttons["Confirm"], message, team="T0OTHER", channel="C0NOTIN")
    hook = await slack.stand.wait_for(lambda: slack.stand.called("response_url"))
    await slack.bot.drain(60)
    assert "does not serve" in _texts(hook) or "not accepted" in _texts(hook)
    assert hook[0].args["response_type"] == "ephemeral" and hook[0].args["replace_original"] is False
    assert slack.audit("refusal")[0]["step"] == "origin" and slack.bump.count("execute") == 0


async def test_a_private_answer_through_the_response_url_stops_at_slacks_limit(big):
    status, _, _ = await big.slash("bigreport", channel="C0NOTIN")  # the bot is not a member there
    assert status == 200
    await big.stand.wait_for(lambda: big.audit("answer"))
    await big.bot.drain(60)
    hook = big.stand.called("response_url")
    assert len(hook) == SLACK_RESPONSE_URL_LIMIT
    assert all(c.args["response_type"] == "ephemeral" for c in hook)
    assert "Big report" in json.dumps(hook[0].args) and "part 1 of" in json.dumps(hook[0].args)
    assert big.audit("answer")[0]["delivered"] == "private"
