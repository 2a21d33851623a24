"""A cluster address where nothing listens is known at once (issue 9): "cannot reach the cluster"
comes from the refused connections, not after the admin timeout, and says what to do per transport."""

from __future__ import annotations

import json
import socket
import time

from bot.render import render_text
from bot.render_slack import render_blocks
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from live.pool import GatewayPool

ADMIN_TIMEOUT_S = 10


def _closed_port() -> int:
    """A loopback port nothing listens on (bound and released: the kernel refuses connections to it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_refused_bootstrap_answers_before_the_admin_timeout(tmp_path):
    port = _closed_port()
    pool = GatewayPool(
        load_settings(
            {
                "KBOT_BOOTSTRAP": f"127.0.0.1:{port}",
                "KBOT_ADMIN_TIMEOUT_S": str(ADMIN_TIMEOUT_S),
                "KBOT_HOME": str(tmp_path),
            }
        )
    )
    try:
        for question in ("status", "why URP", "describe orders"):
            started = time.monotonic()
            result = await answer(question, Context(live=pool))
            took = time.monotonic() - started
            if question == "why URP":  # the runbook's ranking still answers, marked as not seen live
                assert result.outcome == "answered" and result.reply.severity == "unknown"
                assert result.reply.diagnoses[0].entry_id == "broker-loss"
            else:
                assert result.outcome == "unavailable" and result.reply.outcome == "source_down", question
            assert took < ADMIN_TIMEOUT_S / 2, f"{question}: {took:.1f} s"
            text = render_text(result.reply)
            assert f"every bootstrap address (127.0.0.1:{port}) refuses connections" in text
            assert "kbot cluster status" in text
            slack = json.dumps(render_blocks(result.reply))
            assert "refuses connections" in slack and "kbot cluster" not in slack and "[[terminal" not in slack
    finally:
        await pool.close()
