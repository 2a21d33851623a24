"""The terminal's identity (issue 10): the OS account of the process, never $USER, mapped through the
RBAC policy's terminal_users section before it may approve an action requested from Slack.

Slack requests go through the real Bolt app over signed HTTP (the harness); the terminal side is
the real `kbot ask` in a child process, or the terminal gate as bot/app.py's make_context() assembles it
(bot.gate_setup.default_gate), whose identity comes from pwd.getpwuid(os.getuid())."""

from __future__ import annotations

import asyncio
import os
import pwd
import sys
import time
from pathlib import Path

import pytest
import yaml
from slack_fakes import FakeAction, router_with
from slack_harness import BOT_TOKEN, POLICY

from bot.gate_setup import default_gate
from bot.identity import TERMINAL_PREFIX, terminal_user
from bot.slack_settings import SlackSettings
from commands.registry import answer
from framework.context import Context
from gate.rbac import Policy, PolicyError
from runbook_kb import default_kb

ROOT = Path(__file__).resolve().parents[2]
ME = pwd.getpwuid(os.getuid()).pw_name  # the account these tests run as: what the terminal must see


def _policy_file(tmp_path: Path, terminal_users: dict | None = None) -> Path:
    path = tmp_path / "rbac.yaml"
    data = {**POLICY, **({"terminal_users": terminal_users} if terminal_users is not None else {})}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _terminal_gate(slack, policy: Path, router, **settings):
    """The gate exactly as bot/app.py's make_context() builds it, on the Slack app's state dir."""
    base = dict(state_dir=slack.state_dir, rbac_file=policy)
    return default_gate(SlackSettings(**{**base, **settings}), router=router)


async def _slack_preview(slack, text: str, user: str = "U0ALICE") -> str:
    # The terminal (another process, or a gate of its own) reads the wall clock: so does the app here.
    slack.clock.now = time.time()
    _message, buttons = await slack.preview(text, user=user)
    return buttons["Confirm"]["value"].split()[1]


async def _kbot(*args: str, env: dict) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli.main",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    return proc.returncode, out.decode(), err.decode()


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "KBOT_"))}
    return {**env, **extra}


async def test_user_env_is_ignored_and_an_unmapped_terminal_cannot_approve_a_slack_request(slack, tmp_path):
    """The issue's attack: Alice asks in Slack; `USER=U0BOB kbot ask "confirm <token>"` on the bot host."""
    token = await _slack_preview(slack, "fake-abort orders")  # high risk: needs a second approver
    policy = _policy_file(tmp_path)  # no terminal_users
    env = _clean_env(USER="U0BOB", LOGNAME="U0BOB", KBOT_STATE_DIR=str(slack.state_dir), KBOT_RBAC_FILE=str(policy))
    code, out, err = await _kbot("ask", f"confirm {token}", env=env)
    assert "Traceback" not in err, err
    assert f"OS account '{ME}' is not mapped" in out and "terminal_users" in out, out + err
    assert f"add `{ME}: <your Slack user id>` under terminal_users" in out
    rec = await slack.bot.gate.status(token)
    assert rec.state == "pending" and rec.approvals == []
    assert not slack.audit("approval") and not slack.audit("execution")
    refusal = [r for r in slack.audit("refusal") if r.get("transport") == "terminal"][0]
    assert refusal["user"] == TERMINAL_PREFIX + ME and refusal["os_user"] == ME and refusal["rule"] == "terminal_users"
    assert "U0BOB" not in {refusal["user"], refusal.get("os_user")}


async def test_the_json_answer_says_the_same(slack, tmp_path):
    token = await _slack_preview(slack, "fake-bump orders")
    env = _clean_env(USER="U0ALICE", KBOT_STATE_DIR=str(slack.state_dir), KBOT_RBAC_FILE=str(_policy_file(tmp_path)))
    code, out, err = await _kbot("ask", "--json", f"confirm {token}", env=env)
    import json

    reply = json.loads(out)
    assert reply["title"] == "Not confirmed" and "terminal_users" in reply["verdict"], out + err
    assert (await slack.bot.gate.status(token)).state == "pending"


async def test_a_mapped_terminal_user_approves_as_that_slack_user_with_slack_checking_groups(slack, tmp_path):
    """terminal_users maps this OS account to U0BOB, whose grant comes from user group S0ONCALL; with a
    bot token the terminal asks Slack (the stand-in) about the account and the group."""
    token = await _slack_preview(slack, "fake-abort orders")
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    gate = _terminal_gate(
        slack, _policy_file(tmp_path, {ME: "U0BOB"}), router, bot_token=BOT_TOKEN, api_url=slack.stand.url + "/api/"
    )
    assert gate.acting_user == "U0BOB"
    before = len(slack.stand.called("usergroups.users.list"))
    done = await answer(f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router)
    assert done.reply.title == "Done: fake-abort", done.reply.verdict
    assert abort.count("execute") == 1
    assert len(slack.stand.called("usergroups.users.list")) > before  # the group was read from Slack
    approval = [r for r in slack.audit("approval") if r.get("transport") == "terminal"][0]
    assert approval["user"] == "U0BOB" and approval["requester"] == "U0ALICE" and approval["os_user"] == ME


async def test_a_terminal_role_maps_to_user_groups_without_slack(slack, tmp_path):
    token = await _slack_preview(slack, "fake-abort orders")
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    gate = _terminal_gate(slack, _policy_file(tmp_path, {ME: {"groups": ["S0ONCALL"]}}), router)
    assert gate.acting_user == TERMINAL_PREFIX + ME
    done = await answer(f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router)
    assert done.reply.title == "Done: fake-abort" and abort.count("execute") == 1


async def test_a_mapped_user_without_a_grant_is_refused_by_the_policy(slack, tmp_path):
    token = await _slack_preview(slack, "fake-abort orders")
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    # U0CAROL has no grant, and no bot token here: only the policy's own lists count.
    gate = _terminal_gate(slack, _policy_file(tmp_path, {ME: "U0CAROL"}), router)
    refused = await answer(
        f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router
    )
    assert refused.reply.title == "Not confirmed" and "no grant" in refused.reply.verdict
    assert f"terminal_users[{ME}]" in refused.reply.verdict and abort.count("execute") == 0


async def test_mapped_to_the_requester_the_terminal_cannot_self_approve(slack, tmp_path):
    token = await _slack_preview(slack, "fake-abort orders")  # requested by U0ALICE
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    gate = _terminal_gate(slack, _policy_file(tmp_path, {ME: "U0ALICE"}), router)
    refused = await answer(
        f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router
    )
    assert "Self-approval is refused" in refused.reply.verdict and abort.count("execute") == 0


async def test_the_requester_alone_at_the_terminal_breaks_the_glass_with_a_reason(slack, tmp_path):
    """Alice asked in Slack at 03:00 and nobody answers: mapped to her at the terminal, refused
    self-approval, then named by a break_glass rule, she confirms alone; the reason is audited."""
    token = await _slack_preview(slack, "fake-abort orders")  # requested by U0ALICE
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    policy = tmp_path / "rbac.yaml"
    rules = {**POLICY, "terminal_users": {ME: "U0ALICE"}}
    policy.write_text(yaml.safe_dump(rules), encoding="utf-8")
    ctx = Context(kb=default_kb(), gate=_terminal_gate(slack, policy, router))
    refused = await answer(f"confirm {token}", ctx, user="U0ALICE", router=router)
    assert "Self-approval is refused" in refused.reply.verdict
    assert any("members of user group S0ONCALL" in n for n in refused.reply.notes), refused.reply.notes
    assert not any("break-glass" in n for n in refused.reply.notes)  # no rule names her yet
    rules["break_glass"] = [{"name": "night-lead", "users": ["U0ALICE"], "commands": ["fake-abort"]}]
    policy.write_text(yaml.safe_dump(rules), encoding="utf-8")
    ctx = Context(kb=default_kb(), gate=_terminal_gate(slack, policy, router))
    hint = await answer(f"confirm {token}", ctx, user="U0ALICE", router=router)
    assert any(f"break-glass {token}" in n for n in hint.reply.notes), hint.reply.notes
    done = await answer(f"break-glass {token} pager unanswered for 25 min", ctx, user="U0ALICE", router=router)
    assert done.reply.title == "Done: fake-abort" and abort.count("execute") == 1, done.reply.verdict
    approval = [r for r in slack.audit("approval") if r.get("break_glass")][0]
    assert approval["transport"] == "terminal" and approval["os_user"] == ME
    assert approval["break_glass"] == "break_glass[night-lead]" and approval["break_glass_reason"] == (
        "pager unanswered for 25 min"
    )


async def test_an_unmapped_terminal_confirms_and_cancels_its_own_requests_only(slack, tmp_path):
    bump = FakeAction("fake-bump")
    router = router_with(bump.command())
    gate = _terminal_gate(slack, _policy_file(tmp_path), router)
    ctx = Context(kb=default_kb(), gate=gate)
    me = gate.acting_user
    assert me == TERMINAL_PREFIX + ME
    read = await answer("help", ctx, user=me, router=router)
    assert read.outcome == "answered"
    preview = await answer("fake-bump orders", ctx, user=me, router=router)
    token = next(a.command.split()[1] for a in preview.reply.actions if a.command.startswith("confirm "))
    forged = await answer(f"confirm {token}", ctx, user="U0BOB", router=router)  # a caller naming someone else
    assert "This terminal acts as" in forged.reply.verdict and bump.count("execute") == 0
    done = await answer(f"confirm {token}", ctx, user=me, router=router)
    assert done.reply.title == "Done: fake-bump" and bump.count("execute") == 1
    # A Slack request cannot be cancelled from an unmapped terminal either.
    slack_token = await _slack_preview(slack, "fake-bump payments")
    refused = await answer(f"cancel {slack_token}", ctx, user=me, router=router)
    assert refused.reply.title == "Not cancelled" and "terminal_users" in refused.reply.verdict
    assert (await slack.bot.gate.status(slack_token)).state == "pending"


async def test_a_broken_policy_leaves_the_terminal_unmapped_and_says_why(slack, tmp_path):
    token = await _slack_preview(slack, "fake-bump orders")
    bad = tmp_path / "bad.yaml"
    bad.write_text("terminal_users: {someone: not-a-slack-id}\n", encoding="utf-8")
    router = router_with(FakeAction("fake-bump").command())
    gate = _terminal_gate(slack, bad, router)
    refused = await answer(
        f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router
    )
    assert "could not be read" in refused.reply.verdict and "Slack user id" in refused.reply.verdict


def test_terminal_user_comes_from_the_uid_not_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "U0BOB")
    monkeypatch.setenv("LOGNAME", "U0BOB")
    policy = _policy_file(tmp_path, {"U0BOB": "U0BOB"})  # an account named like the victim maps nothing here
    assert terminal_user(SlackSettings(state_dir=tmp_path, rbac_file=policy)) == TERMINAL_PREFIX + ME


@pytest.mark.parametrize(
    "section,needle",
    [
        ({"alice": "alice"}, "Slack user id like U0ALICE"),
        ({"alice": {"user": "U0ALICE", "role": "x"}}, "unknown field"),
        ({"alice": {}}, "names no Slack user and no groups"),
        (["alice"], "expected a mapping"),
        ({"alice": 3}, "expected a Slack user id or a mapping"),
    ],
)
def test_terminal_users_errors_name_the_entry(section, needle):
    with pytest.raises(PolicyError, match=needle):
        Policy.from_dict({"terminal_users": section})


async def test_a_slack_error_while_checking_the_mapped_user_fails_closed(slack, tmp_path):
    token = await _slack_preview(slack, "fake-abort orders")
    abort = FakeAction("fake-abort", high_risk=True)
    router = router_with(abort.command())
    gate = _terminal_gate(
        slack, _policy_file(tmp_path, {ME: "U0BOB"}), router, bot_token=BOT_TOKEN, api_url=slack.stand.url + "/api/"
    )
    slack.stand.fail("usergroups.users.list", "missing_scope")
    refused = await answer(
        f"confirm {token}", Context(kb=default_kb(), gate=gate), user=gate.acting_user, router=router
    )
    assert "Could not check U0BOB with Slack (missing_scope)" in refused.reply.verdict and abort.count("execute") == 0
    assert (await slack.bot.gate.status(token)).approvals == []
