"""Fixtures for the alert loop, the bot's health and kept-true Slack messages: the Slack Web API
stand-in and the real app in front of it (the same harness as tests/slack), with short intervals."""

from __future__ import annotations

import pytest
import pytest_asyncio
from slack_harness import Harness  # tests/slack's, on pytest's pythonpath
from slack_stand_in import running_stand


@pytest.fixture
def fast_loops(monkeypatch):
    """The expiry sweep and the message settling run every 0.2 s instead of 60 s / 5 s."""
    import bot.slack_bot as slack_bot
    import bot.slack_messages as slack_messages

    monkeypatch.setattr(slack_bot, "EXPIRY_SWEEP_S", 0.2)
    monkeypatch.setattr(slack_messages, "SETTLE_INTERVAL_S", 0.2)


@pytest_asyncio.fixture(loop_scope="function")
async def stand():
    async with running_stand() as s:
        yield s


@pytest_asyncio.fixture(loop_scope="function")
async def harness(stand, tmp_path, fast_loops):
    """Not started: a test sets its environment (alert token, routes) first, then start_bot()."""
    h = Harness(stand, tmp_path)
    yield h
    await h.close()
