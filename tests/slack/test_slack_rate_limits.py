"""Issue 37 item 6: 429s hold their method, permalinks are asked once, and an upload under 429s
retries its failing step and completes every slot it opened. Through the real Bolt app over signed
HTTP against the stand-in, which counts calls per method and keeps every call that arrived inside
a Retry-After window it gave (``StandIn.early``)."""

from __future__ import annotations

import asyncio
import logging

import pytest_asyncio
from slack_fakes import PROGRESSING, router_with
from slack_harness import OPS, Harness
from slack_stand_in import running_stand

from framework.reply import Reply, Series
from framework.spec import Command, CommandSpec


async def _chart(request, ctx) -> Reply:
    points = [(f"2026-11-29T03:{m:02d}:00Z", float(m % 7)) for m in range(30)]
    return Reply(
        title="Under-replicated partitions",
        severity="warning",
        verdict="URP rose at 03:10.",
        series=[Series("URP", "partitions", points)],
    )


CHART = Command(CommandSpec(words=("chartcheck",), summary="test command with a chart"), _chart)
USERS = tuple(f"U0USER{i:02d}" for i in range(12))


@pytest_asyncio.fixture(loop_scope="function")
async def bot(tmp_path):
    async with running_stand(("U0ALICE", "U0BOB", *USERS)) as stand:
        h = Harness(stand, tmp_path)
        h.router = router_with(h.bump.command(), CHART, PROGRESSING)
        await h.start_bot()
        yield h
        await h.close()


async def test_a_429_holds_its_method_for_every_other_call_until_retry_after(bot, caplog):
    caplog.set_level(logging.DEBUG, logger="slack_sdk")
    stand = bot.stand
    stand.rate_limit("users.info", retry_after=2)
    await bot.slash("chartcheck", user="U0ALICE")  # the bot looks U0ALICE up: 429, Retry-After 2 s

    def the_bot_saw_the_429():  # the client logs Slack's answer before it does anything with it
        return any("status: 429" in r.getMessage() for r in caplog.records)

    await stand.wait_for(the_bot_saw_the_429)
    # Now other people ask: each needs a users.info of its own, inside the window
    await asyncio.gather(*(bot.slash("chartcheck", user=u) for u in USERS[:4]))
    await stand.wait_for(lambda: len(stand.called("users.info")) >= 5, timeout_s=30)
    await bot.bot.drain(60)
    assert stand.early == [], [(c.method, c.args.get("user")) for c in stand.early]
    assert stand.counts()["users.info"] == 6  # the 429, its retry, four others: nothing asked twice
    limited = next(c for c in stand.calls if c.method == "users.info" and c.status == 429)
    assert all(c.at >= limited.at + 2 for c in stand.called("users.info"))


async def test_a_threads_permalink_is_asked_once_however_many_are_pointed_to_it(bot):
    stand = bot.stand
    await bot.slash("slowcheck", user="U0ALICE")
    await stand.wait_for(lambda: stand.thread_replies(), timeout_s=30)
    for user in USERS:  # the same question again and again: each asker is pointed to the first thread
        await bot.slash("slowcheck", user=user)
    await stand.wait_for(lambda: len(stand.called("chat.postEphemeral")) >= len(USERS), timeout_s=60)
    await bot.bot.drain(60)
    pointers = [r for r in bot.audit("answer") if r.get("outcome") == "coalesced"]
    assert len(pointers) == len(USERS)
    assert stand.counts().get("chat.getPermalink") == 1
    assert all("standin.slack.com/archives" in str(c.args) for c in stand.called("chat.postEphemeral"))


async def test_an_upload_under_429s_retries_the_failing_step_and_completes_every_slot(bot):
    stand = bot.stand
    stand.rate_limit("files.getUploadURLExternal", retry_after=1)
    stand.rate_limit("files.completeUploadExternal", retry_after=1, times=2)
    await bot.slash("chartcheck", channel=OPS)
    await stand.wait_for(lambda: stand.uploads(), timeout_s=60)
    await bot.bot.drain(60)
    counts = stand.counts()
    assert counts["files.getUploadURLExternal"] == 2  # its 429 and the one retry: one slot
    assert len(stand.called("files.getUploadURLExternal")) == 1
    assert counts["file_upload"] == 1  # the bytes went once
    assert counts["files.completeUploadExternal"] == 3 and len(stand.uploads()) == 1
    assert stand.open_upload_slots() == []
    assert stand.early == []
    png = next(c for c in stand.calls if c.method == "file_upload")
    assert png.args["png"] is True


async def test_two_files_under_a_429_and_a_503_one_slot_each_and_one_completion():
    """The delivery queue on its own (a bare client: every 429 and 5xx reaches the queue): the
    timeline's two exports, a 429 on the first slot and a proxy's 503 on the completion."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.delivery import Delivery

    async with running_stand() as stand:
        stand.rate_limit("files.getUploadURLExternal", retry_after=1)
        stand.server_error("files.completeUploadExternal", "upstream connect error", status=503)
        delivery = Delivery(AsyncWebClient(token="xoxb-test", base_url=stand.url + "/api/", retry_handlers=[]))
        uploads = [
            {"content": "# Timeline\n" * 50, "filename": "timeline.md", "title": "Timeline (Markdown)"},
            {"content": '{"events": []}', "filename": "timeline.json", "title": "Timeline (JSON)"},
        ]
        done = await asyncio.wait_for(delivery.call("files_upload_v2", OPS, thread_ts="1.1", file_uploads=uploads), 60)
        assert [f["title"] for f in done["files"]] == ["Timeline (Markdown)", "Timeline (JSON)"]
        assert len(stand.called("files.getUploadURLExternal")) == 2 and stand.counts()["file_upload"] == 2
        assert len(stand.uploads()) == 1 and stand.open_upload_slots() == []
        assert stand.uploads()[0].args["thread_ts"] == "1.1" and stand.early == []
