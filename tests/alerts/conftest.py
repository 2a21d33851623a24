"""Fixtures for the alert loop, the bot's health and kept-true Slack messages: the Slack Web API
stand-in and the real app in front of it (the same harness as tests/slack), with short intervals."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "slack"))  # slack_stand_in, slack_harness, slack_fakes

from slack_harness import Harness  # noqa: E402
from slack_stand_in import running_stand  # noqa: E402


@pytest.fixture
def fast_loops(monkeypatch):
    """The expiry sweep and the message settling run every 0.2 s instead of 60 s / 5 s."""
    import bot.slack_bot as slack_bot

    monkeypatch.setattr(slack_bot, "EXPIRY_SWEEP_S", 0.2)
    monkeypatch.setattr(slack_bot, "SETTLE_INTERVAL_S", 0.2)


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
