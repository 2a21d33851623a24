"""Fixtures: the local Slack Web API stand-in and the real app in front of it (tests/slack/slack_harness.py)."""

from __future__ import annotations

import pytest_asyncio
from slack_harness import Harness  # slack_stand_in, slack_fakes, slack_harness: on pytest's pythonpath
from slack_stand_in import running_stand


@pytest_asyncio.fixture(loop_scope="function")
async def stand():
    async with running_stand(("U0ALICE", "U0BOB", "U0CAROL", "U0MALLORY"), guests=("U0GUEST",)) as s:
        yield s


@pytest_asyncio.fixture(loop_scope="function")
async def slack(stand, tmp_path):
    h = Harness(stand, tmp_path)
    await h.start_bot()
    yield h
    await h.close()
