"""The same gate from a terminal: `confirm <token>` through framework.dispatch.answer, across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from slack_fakes import FakeAction, router_with

from commands.registry import answer
from framework.context import Context
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore, new_token
from kbot_settings import load as load_settings
from runbook_kb import default_kb

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _with_here_on_path() -> dict[str, str]:
    """This process's environment with this folder (slack_fakes) on the child's PYTHONPATH."""
    paths = [str(HERE), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _gate(state: Path, router, clock=None) -> ConfirmationGate:
    kw = {"clock": clock} if clock else {}
    return ConfirmationGate(
        PendingStore(state / "pending.sqlite3"), AuditLog(state / "audit.jsonl"), router=router, **kw
    )


def _token(reply) -> str:
    return next(a.command.split()[1] for a in reply.actions if a.command.startswith("cancel "))


async def test_terminal_preview_confirm_and_cancel(tmp_path):
    bump = FakeAction()
    router = router_with(bump.command())
    ctx = Context(kb=default_kb(), gate=_gate(tmp_path, router))
    preview = await answer("fake-bump orders", ctx, user="alice", router=router)
    assert preview.outcome == "answered" and preview.reply.title == "Preview: fake-bump"
    token = _token(preview.reply)
    wrong = await answer(f"confirm {token}", ctx, user="bob", router=router)
    assert "Only alice" in wrong.reply.verdict and bump.count("execute") == 0
    done = await answer(f"confirm {token}", ctx, user="alice", router=router)
    assert done.reply.title == "Done: fake-bump" and bump.count("execute") == 1
    again = await answer(f"confirm {token}", ctx, user="alice", router=router)
    assert "already used" in again.reply.verdict and bump.count("execute") == 1
    gone = await answer(f"cancel {token}", ctx, user="alice", router=router)
    assert gone.reply.title == "Not cancelled"


async def test_confirm_without_a_gate_says_so(tmp_path):
    result = await answer("confirm abc", Context(kb=default_kb()))
    assert result.outcome == "unavailable" and "confirmation gate" in result.reply.verdict


async def test_tokens_are_unguessable_and_router_safe():
    tokens = {new_token() for _ in range(2000)}
    assert len(tokens) == 2000
    assert all(len(t) >= 32 and not t.startswith("-") for t in tokens)


async def test_confirm_in_another_process_uses_the_durable_store(tmp_path):
    """Preview here, confirm from a second Python process (as `kbot ask "confirm <token>"` would)."""
    bump = FakeAction()
    router = router_with(bump.command())
    ctx = Context(kb=default_kb(), gate=_gate(tmp_path, router))
    token = _token((await answer("fake-bump orders", ctx, user="alice", router=router)).reply)
    script = textwrap.dedent(f"""
        import asyncio, json
        from pathlib import Path
        from slack_fakes import FakeAction, router_with
        from gate.audit import AuditLog
        from gate.confirmation import ConfirmationGate, PendingStore
        from framework.context import Context
        from framework.dispatch import answer
        bump = FakeAction()
        router = router_with(bump.command())
        state = Path({str(tmp_path)!r})
        gate = ConfirmationGate(PendingStore(state / "pending.sqlite3"), AuditLog(state / "audit.jsonl"), router=router)
        r = asyncio.run(answer("confirm {token}", Context(gate=gate), user="alice", router=router))
        print(json.dumps({{"title": r.reply.title, "executed": bump.count("execute")}}))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=_with_here_on_path(), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"title": "Done: fake-bump", "executed": 1}
    # Back in this process the token is spent: the second process's transition is visible here.
    again = await answer(f"confirm {token}", ctx, user="alice", router=router)
    assert "already used" in again.reply.verdict and bump.count("execute") == 0
    events = [r["event"] for r in AuditLog(tmp_path / "audit.jsonl").read()]
    assert events == ["preview", "approval", "execution", "refusal"]


def _terminal_env(tmp_path: Path) -> dict[str, str]:
    """A terminal with no bot configuration of the caller's (no cluster, no Slack, no dev cluster
    found through the cache root): only the state folder under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(
        HOME=str(tmp_path / "home"),
        KBOT_HOME=str(tmp_path / "home"),
        KBOT_STATE_DIR=str(tmp_path / "state"),
        KBOT_CACHE_DIR=str(tmp_path / "cache"),
    )
    return env


async def test_kbot_ask_confirm_reaches_the_gate(tmp_path):
    """The real CLI reaches the gate: the terminal's context carries it (bot/app.py make_context).
    No skip: a terminal without a gate is the regression this guards against."""
    from bot.app import close_context, make_context

    env = _terminal_env(tmp_path)
    ctx = make_context(load_settings(env), lake=False)
    try:
        assert ctx.gate is not None, "the terminal's context has no confirmation gate"
        assert ctx.gate.state_db.path == tmp_path / "state" / "pending.sqlite3"
    finally:
        await close_context(ctx)
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "ask", "confirm NoSuchTokenAtAll123"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "No pending action has that token" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "state" / "pending.sqlite3").exists()
