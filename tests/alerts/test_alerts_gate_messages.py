"""Issue 10: a pending action's Slack message is edited when the action is resolved anywhere but by
its own button: the expiry sweep, a confirm from the terminal (another process), a crash
reconciliation. No Confirm button or hourglass is left behind that no longer means anything."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from slack_fakes import FakeAction, router_with

ROOT = Path(__file__).resolve().parents[2]
SLACK_TESTS = ROOT / "tests" / "slack"


def _with_slack_tests_on_path() -> dict[str, str]:
    """This process's environment with tests/slack (slack_fakes) on the child's PYTHONPATH."""
    paths = [str(SLACK_TESTS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _edits_of(stand, ts: str) -> list:
    return [c for c in stand.called("chat.update") if c.args.get("ts") == ts]


def _has_buttons(call) -> bool:
    blocks = call.args.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return any(b.get("type") == "actions" for b in blocks or [])


async def _settle_rounds(harness, rounds: int = 3) -> None:
    """Run the settling sweep a few times ourselves (the bot's own loop runs it too), then let the
    bot finish what it started: a condition, where a sleep would only hope the rounds had passed."""
    for _ in range(rounds):
        await harness.bot.messages.settle_pending()
    await harness.bot.drain(60)


def _text(call) -> str:
    return json.dumps(call.args)


async def test_expiry_sweep_takes_the_buttons_off_the_preview(harness):
    await harness.start_bot()
    message, buttons = await harness.preview("fake-bump orders")
    assert set(buttons) == {"Confirm", "Cancel"}
    harness.clock.advance(15 * 60 + 1)  # past the 15-minute TTL; the bot's own sweep finds it
    edit = await harness.stand.wait_for(lambda: _edits_of(harness.stand, message["ts"]), timeout_s=30)
    assert not _has_buttons(edit[-1]), "the expired preview still offers Confirm"
    assert "Expired unused" in _text(edit[-1]) and "retention.ms" in _text(edit[-1])  # content kept, state said
    assert (await harness.bot.gate.status(buttons["Confirm"]["value"].split()[1])).state == "expired"
    await _settle_rounds(harness)  # the message is edited once, not on every round
    assert len(_edits_of(harness.stand, message["ts"])) == 1


async def test_overlapping_settle_sweeps_edit_the_message_once(harness):
    """Two sweeps at once (the periodic one and another) must not both find the record unsettled."""
    await harness.start_bot()
    message, _ = await harness.preview("fake-bump orders")
    async with harness.bot.messages.settling:  # hold the bot's own settle sweep off until both are queued
        harness.clock.advance(15 * 60 + 1)
        await harness.bot.gate.expire_due()
        sweeps = [asyncio.ensure_future(harness.bot.messages.settle_pending()) for _ in range(2)]
        await asyncio.sleep(0)
    await asyncio.gather(*sweeps)
    await harness.bot.drain(60)
    assert len(_edits_of(harness.stand, message["ts"])) == 1


async def test_terminal_confirm_in_another_process_updates_the_slack_message(harness):
    await harness.start_bot()
    message, buttons = await harness.preview("fake-bump orders")
    token = buttons["Confirm"]["value"].split()[1]
    # `kbot ask "confirm <token>"` from a terminal mapped to U0ALICE: a second process on the same store
    # (on the harness's clock, so the preview has not expired there).
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
        state = Path({str(harness.state_dir)!r})
        gate = ConfirmationGate(PendingStore(state / "pending.sqlite3"), AuditLog(state / "terminal-audit.jsonl"),
                                router=router, transport="terminal", clock=lambda: {harness.clock.now!r})
        r = asyncio.run(answer("confirm {token}", Context(gate=gate), user="U0ALICE", router=router))
        print(json.dumps({{"title": r.reply.title, "executed": bump.count("execute")}}))
    """)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        cwd=ROOT,
        env=_with_slack_tests_on_path(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out.decode().strip().splitlines()[-1]) == {"title": "Done: fake-bump", "executed": 1}
    edit = await harness.stand.wait_for(lambda: _edits_of(harness.stand, message["ts"]), timeout_s=30)
    assert not _has_buttons(edit[-1])
    assert "Executed" in _text(edit[-1]) and "<@U0ALICE>" in _text(edit[-1])
    assert harness.bump.count("execute") == 0  # it ran in the terminal's process, not here


@dataclass
class HangingAction(FakeAction):
    """execute() never returns: the process dies (its task is cancelled) in the middle of it."""

    started: asyncio.Event | None = None

    async def execute(self, plan, ctx):
        self.calls.append(("execute", plan.args))
        self.started.set()
        await asyncio.Event().wait()


async def test_crash_reconciliation_replaces_the_hourglass_and_the_buttons(harness):
    hanging = HangingAction("fake-bump", started=asyncio.Event())
    harness.bump, harness.router = hanging, router_with(hanging.command())
    await harness.start_bot()
    message, buttons = await harness.preview("fake-bump orders")
    status, _, _ = await harness.click(buttons["Confirm"], message)
    assert status == 200
    await asyncio.wait_for(hanging.started.wait(), 30)
    working = [c for c in harness.stand.thread_replies(message["thread_ts"]) if "Working on" in _text(c)]
    assert working, "the confirm's working message was not posted"
    working_ts = working[-1].result["ts"]
    # The crash: the process's work dies while the action executes (the record stays "executing").
    for task in list(harness.bot.tasks):
        task.cancel()
    await asyncio.gather(*harness.bot.tasks, return_exceptions=True)
    token = buttons["Confirm"]["value"].split()[1]
    assert (await harness.bot.gate.status(token)).state == "executing"
    before = len(harness.stand.called("chat.update"))
    await harness.start_bot()  # the restarted process reconciles it
    assert (await harness.bot.gate.status(token)).state == "done"
    edits = await harness.stand.wait_for(
        lambda: (
            len(_edits_of(harness.stand, working_ts))
            and len(_edits_of(harness.stand, message["ts"]))
            and harness.stand.called("chat.update")[before:]
        ),
        timeout_s=30,
    )
    hourglass = _edits_of(harness.stand, working_ts)[-1]
    assert "hourglass" not in _text(hourglass) and "Reconciled (done)" in _text(hourglass)
    preview = _edits_of(harness.stand, message["ts"])[-1]
    assert not _has_buttons(preview) and "change is in place" in _text(preview)
    assert edits and hanging.count("execute") == 1  # never run again


async def test_a_button_confirm_is_not_edited_twice(harness):
    """The click's own answer already makes the messages true: the settling leaves them alone."""
    await harness.start_bot()
    message, buttons = await harness.preview("fake-bump orders")
    await harness.click(buttons["Confirm"], message)
    await harness.stand.wait_for(lambda: harness.bump.count("execute") == 1, timeout_s=30)
    await harness.stand.wait_for(lambda: _edits_of(harness.stand, message["ts"]), timeout_s=30)
    await _settle_rounds(harness)
    edits = _edits_of(harness.stand, message["ts"])
    assert len(edits) == 1 and not _has_buttons(edits[0]) and "executed" in _text(edits[0])
