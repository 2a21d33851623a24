"""Golden answers, one per kind of command, in terminal text and Block Kit (issue 9).

The commands run for real (parse, run, render) against an in-memory gateway, so the answers are
the same on every machine: help, a runbook entry, why URP on a degraded cluster (broker 103 gone),
status, describe, an action preview and two errors. Each answer is also checked against Slack's
limits, short and full. Regenerate after a deliberate change with KBOT_UPDATE_GOLDEN=1 and read
the diff: these files are what an on-call engineer reads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "actions"))  # the in-memory gateway

from action_fakes import FakeGateway, FakePool  # noqa: E402
from block_limits import violations  # noqa: E402

from bot.render import render_blocks, render_text  # noqa: E402
from commands.actions import Gate, Pending  # noqa: E402
from commands.context import Context  # noqa: E402
from commands.dispatch import answer  # noqa: E402

GOLDEN = Path(__file__).parent.parent / "golden" / "answers"
EXPIRES_AT = 1_795_000_000.0  # a fixed time, so the preview's expiry line never changes

CASES = {
    "help": "help",
    "runbook": "runbook hanging transaction",
    "why_urp_degraded": "why URP",
    "status_degraded": "status",
    "describe": "describe orders",
    "preview_elect_leaders": "elect-leaders orders",
    "error_unknown_topic": "describe no-such-topic",
    "error_bad_input": "frobnicate the cluster",
}


class FixedTokenGate(Gate):
    """Records nothing: previews need a Pending with a token; the real gate is tested elsewhere."""

    async def propose(self, plan, request) -> Pending:
        return Pending("TOKEN-FOR-GOLDEN-FILES", plan, request.user or "U0ALICE", EXPIRES_AT, False)


def degraded_gateway() -> FakeGateway:
    """Broker 103 is gone: its replicas left the ISRs of all three partitions of orders."""
    gw = FakeGateway(
        brokers=(101, 102),
        topics={
            "orders": [
                (101, [101, 102, 103], [101, 102]),
                (102, [102, 103, 101], [102, 101]),
                (101, [103, 101, 102], [101, 102]),
            ]
        },
    )
    return gw


async def _answer(text: str):
    ctx = Context(live=FakePool(degraded_gateway()), gate=FixedTokenGate(), clock=lambda: EXPIRES_AT - 300)
    return await answer(text, ctx, user="U0ALICE")


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KBOT_UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"golden file {path} missing; run with KBOT_UPDATE_GOLDEN=1 once and review it"
    assert actual == path.read_text(encoding="utf-8"), f"{name} changed: review, then KBOT_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(CASES))
async def test_golden_answer(name):
    result = await _answer(CASES[name])
    _golden(f"{name}.txt", render_text(result.reply))
    _golden(f"{name}.blocks.json", json.dumps(render_blocks(result.reply), indent=2, ensure_ascii=False) + "\n")
    for full in (False, True):
        for n, message in enumerate(render_blocks(result.reply, full=full), 1):
            assert violations(message) == [], (name, full, n)


async def test_why_urp_short_answer_acts_within_forty_lines():
    result = await _answer("why URP")
    text = render_text(result.reply)
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert lines[0] == "[WARNING] Why URP?"
    assert lines[1].startswith("Broker 103 is gone"), lines[1]
    assert lines[3] == "Do now: Broker loss"
    full = render_text(result.reply, full=True)
    assert len(full.splitlines()) > 2 * len(lines)  # everything is still there, on request


async def test_errors_are_short_and_say_what_to_do():
    for name in ("error_unknown_topic", "error_bad_input"):
        result = await _answer(CASES[name])
        assert result.outcome == "bad_input"
        assert result.reply.outcome == "bad_input"
        text = render_text(result.reply)
        assert len(text.splitlines()) <= 6 and "Traceback" not in text
        assert "More: " in text  # what to try next


def _every_example() -> list[str]:
    from commands.registry import ROUTER

    examples = [e for c in ROUTER._by_words for e in c.spec.examples if "..." not in e and "--cluster" not in e]
    # Every runbook entry in full (the longest answers the bot gives) and every symptom's why.
    from runbook_kb import default_kb

    kb = default_kb()
    examples += [f"runbook {eid}" for eid in kb.failure_modes] + [f"why {eid}" for eid in kb.failure_modes]
    return examples


@pytest.mark.parametrize("text", _every_example())
async def test_every_command_answer_fits_slack(text):
    """Every command's answer, short and full, renders to messages Slack accepts (issue 9)."""
    result = await _answer(text)
    assert result.outcome != "failed", (text, result.reply.verdict)  # a bug, not an answer
    for full in (False, True):
        messages = render_blocks(result.reply, full=full)
        for n, message in enumerate(messages, 1):
            assert violations(message) == [], (text, full, n)
    assert "Traceback" not in render_text(result.reply)
