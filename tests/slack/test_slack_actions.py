"""Confirmation-gated actions through the real Slack app: previews, buttons, approvers, expiry, crashes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from contextlib import closing

import slack_harness
from slack_harness import OPS


def _texts(calls) -> str:
    return json.dumps([c.args for c in calls])


async def _after_click(slack, n_before: int, min_new: int = 1):
    """Wait until the click's answer (a reply in the preview's thread) arrived, then for the request to finish."""
    await slack.stand.wait_for(lambda: len(slack.stand.called("chat.update")) >= n_before + min_new)
    await slack.bot.drain(60)


def _answers_since(slack, n_updates: int) -> str:
    return _texts(slack.stand.called("chat.update")[n_updates:])


async def test_preview_shows_what_will_change_and_confirm_cancel_buttons(slack):
    message, buttons = await slack.preview("fake-bump orders")
    assert set(buttons) == {"Confirm", "Cancel"}
    assert buttons["Confirm"]["value"].startswith("confirm ") and buttons["Confirm"]["style"] == "danger"
    text = json.dumps(message["blocks"])
    assert "retention.ms 604800000 -&gt; 3600000" in text and "Nothing has changed yet" in text
    assert slack.bump.count("plan") == 1 and slack.bump.count("execute") == 0
    preview = slack.audit("preview")[0]
    assert preview["requester"] == "U0ALICE" and preview["args"] == {"topic": "orders", "retention.ms": 3600000}
    assert preview["cluster"] == "test-cluster" and "token" not in preview and len(preview["token_id"]) == 12
    token = buttons["Confirm"]["value"].split()[1]
    assert token not in slack.bot.audit.path.read_text()  # the audit keeps a hash, not the capability


async def test_confirm_executes_once_and_retires_the_buttons(slack):
    message, buttons = await slack.preview("fake-bump orders")
    n = len(slack.stand.called("chat.update"))
    status, _, elapsed = await slack.click(buttons["Confirm"], message)
    assert status == 200 and elapsed < 3
    await _after_click(slack, n, 2)
    assert [c for c, _ in slack.bump.calls] == ["plan", "recheck", "execute"]
    assert "Done: fake-bump" in _answers_since(slack, n)
    # The preview lost its buttons and says what happened.
    settled = [c for c in slack.stand.called("chat.update") if c.args["ts"] == message["ts"]][-1]
    assert not any(b["type"] == "actions" for b in settled.args["blocks"]) and "executed" in json.dumps(
        settled.args["blocks"]
    )
    execution = slack.audit("execution")[0]
    assert execution["user"] == "U0ALICE" and execution["ok"] is True and execution["state"] == "executed"
    assert execution["before"] == {"retention.ms": "604800000"} and execution["after"] == {"retention.ms": "3600000"}
    assert (
        execution["args"]["topic"] == "orders" and execution["cluster"] == "test-cluster" and "latency_ms" in execution
    )
    events = [r["event"] for r in slack.audit()]
    assert events.index("preview") < events.index("approval") < events.index("execution")


async def test_cancel_then_confirm_does_nothing(slack):
    message, buttons = await slack.preview("fake-bump orders")
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Cancel"], message)
    await _after_click(slack, n, 2)
    assert "Cancelled: fake-bump" in _answers_since(slack, n)
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)
    await _after_click(slack, n)
    assert "was cancelled" in _answers_since(slack, n)
    assert slack.bump.count("execute") == 0
    assert [r["event"] for r in slack.audit() if r["event"] in ("cancel", "refusal")] == ["cancel", "refusal"]


async def test_expired_confirmation_is_refused_and_audited(slack):
    message, buttons = await slack.preview("fake-bump orders")
    slack.clock.advance(15 * 60 + 1)  # default TTL is 15 minutes
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)
    await _after_click(slack, n)
    assert "expired" in _answers_since(slack, n)
    assert slack.bump.count("execute") == 0
    assert slack.audit("expiry") and slack.audit("refusal")[0]["code"] == "expired"


async def test_expiry_sweep_marks_stale_previews(slack):
    await slack.preview("fake-bump orders")
    assert await slack.bot.gate.expire_due() == []
    slack.clock.advance(901)
    expired = await slack.bot.gate.expire_due()
    assert len(expired) == 1 and slack.audit("expiry")[0]["requester"] == "U0ALICE"


async def test_double_click_and_redelivery_execute_exactly_once(slack):
    message, buttons = await slack.preview("fake-bump orders")
    # Two clicks racing, and the same payload delivered again.
    results = await asyncio.gather(*(slack.click(buttons["Confirm"], message) for _ in range(3)))
    assert all(status == 200 for status, _, _ in results)
    await slack.stand.wait_for(lambda: len(slack.audit("execution")) + len(slack.audit("refusal")) >= 3)
    await slack.bot.drain(60)
    assert slack.bump.count("execute") == 1
    assert len(slack.audit("execution")) == 1
    assert {r["code"] for r in slack.audit("refusal")} == {"used"}


async def test_only_the_requester_confirms_a_normal_action(slack):
    message, buttons = await slack.preview("fake-bump orders")
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0BOB")  # granted via the group, but not the requester
    await _after_click(slack, n)
    assert "Only U0ALICE" in _answers_since(slack, n)
    assert slack.bump.count("execute") == 0 and slack.audit("refusal")[0]["code"] == "wrong_user"


async def test_confirm_needs_rbac_too(slack):
    message, buttons = await slack.preview("fake-bump orders")
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0CAROL")
    await _after_click(slack, n)
    assert "no grant" in _answers_since(slack, n)
    assert slack.audit("refusal")[0]["code"] == "rbac" and slack.bump.count("execute") == 0


async def test_a_guest_clicking_confirm_is_refused_before_the_gate(slack):
    message, buttons = await slack.preview("fake-bump orders")
    await slack.click(buttons["Confirm"], message, user="U0GUEST")
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert "Guest" in _texts(eph) and slack.bump.count("execute") == 0


async def test_a_click_from_another_workspace_is_refused(slack):
    message, buttons = await slack.preview("fake-bump orders")
    await slack.click(buttons["Confirm"], message, team="T0OTHER")
    await slack.stand.wait_for(lambda: slack.audit("refusal"))
    await slack.bot.drain(60)
    assert slack.audit("refusal")[0]["rule"] == "KBOT_ALLOWED_TEAM_IDS" and slack.bump.count("execute") == 0


async def test_high_risk_needs_a_second_approver_and_refuses_self_approval(slack):
    message, buttons = await slack.preview("fake-abort orders")
    assert "second approver" in json.dumps(message["blocks"])
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0ALICE")
    await _after_click(slack, n)
    assert "Self-approval is refused" in _answers_since(slack, n)
    assert slack.abort.count("execute") == 0
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0BOB")
    await _after_click(slack, n, 2)
    assert "Done: fake-abort" in _answers_since(slack, n)
    assert slack.abort.count("execute") == 1
    approval = [r for r in slack.audit("approval") if r.get("complete")][0]
    assert approval["user"] == "U0BOB" and approval["requester"] == "U0ALICE" and approval["approvals"] == ["U0BOB"]


async def test_recheck_failure_stops_execution_and_says_why(slack):
    message, buttons = await slack.preview("fake-bump orders")
    slack.bump.recheck_ok = False
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)
    await _after_click(slack, n)
    assert "topic was deleted" in _answers_since(slack, n) and "nothing was changed" in _answers_since(slack, n)
    assert slack.bump.count("execute") == 0
    assert (await slack.bot.gate.status(buttons["Confirm"]["value"].split()[1])).state == "aborted"


async def test_execute_error_is_reconciled_not_guessed(slack):
    message, buttons = await slack.preview("fake-bump orders")
    slack.bump.execute_error = RuntimeError("broker went away")
    slack.bump.reconcile_answer = "not_done"
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)
    await _after_click(slack, n)
    assert "broker went away" in _answers_since(slack, n) and "not_done" in _answers_since(slack, n)
    assert (await slack.bot.gate.status(buttons["Confirm"]["value"].split()[1])).state == "not_done"


async def test_a_change_the_cluster_did_not_answer_in_time_is_not_called_failed(slack):
    """The gateway's Timeout on a write (a paused broker holding the request): the change may still
    be carried out when that broker runs again, so the answer says what the read-back found and
    that the request may still land, and asks for a fresh preview before a retry."""
    from live.gateway import Timeout

    slow = Timeout(
        "IncrementalAlterConfigs on Kafka cluster 'test-cluster' (127.0.0.1:9092) did not complete within 10s; "
        "the brokers accept connections but did not answer in time (overloaded, paused or ...)"
    )
    for found, state in (("not_done", "not_done"), ("done", "done")):
        message, buttons = await slack.preview("fake-bump orders")
        slack.bump.execute_error, slack.bump.reconcile_answer = slow, found
        n = len(slack.stand.called("chat.update"))
        await slack.click(buttons["Confirm"], message)
        await _after_click(slack, n)
        answer = _answers_since(slack, n)
        assert "did not confirm it in time" in answer and "did not complete within 10s" in answer, answer
        assert "Failed" not in answer and "Execution error" not in answer, answer
        if found == "not_done":
            assert "Not confirmed: fake-bump" in answer and "may still be carried out" in answer, answer
            assert "Before you retry" in answer and "preview reads the cluster afresh" in answer, answer
        else:
            assert "Done: fake-bump" in answer and "the change is in place" in answer, answer
        assert (await slack.bot.gate.status(buttons["Confirm"]["value"].split()[1])).state == state
    slack.bump.execute_error = None


async def test_crash_while_executing_is_reconciled_on_restart_never_rerun(slack):
    message, buttons = await slack.preview("fake-bump orders")
    token = buttons["Confirm"]["value"].split()[1]
    # The crash: the single-use transition committed, then the process died before execute() returned.
    assert slack.bot.gate.store.transition(token, "pending", "executing", slack.clock())
    await slack.start_bot()  # a new process on the same state dir
    assert (await slack.bot.gate.status(token)).state == "done"
    assert slack.bump.count("reconcile") == 1 and slack.bump.count("execute") == 0
    assert slack.audit("reconciled")[0]["outcome"] == "done"
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)  # and a late click does not run it either
    await _after_click(slack, n)
    assert "already used" in _answers_since(slack, n) and slack.bump.count("execute") == 0


async def test_pending_actions_survive_a_restart(slack):
    message, buttons = await slack.preview("fake-bump orders")
    await slack.start_bot()
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message)
    await _after_click(slack, n, 2)
    assert slack.bump.count("execute") == 1


async def test_typed_confirm_works_like_the_button(slack):
    _, buttons = await slack.preview("fake-bump orders")
    await slack.slash(buttons["Confirm"]["value"])
    await slack.stand.wait_for(lambda: slack.audit("execution"))
    await slack.bot.drain(60)
    assert slack.bump.count("execute") == 1
    assert "Done: fake-bump" in _texts(slack.stand.thread_replies())


async def test_read_only_follow_up_buttons_run_as_the_clicker(slack):
    await slack.slash("why URP")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    message = {"ts": "1700000000.000009", "thread_ts": "1700000000.000001", "type": "message", "blocks": []}
    button = {
        "type": "button",
        "action_id": "kbot_action_0",
        "value": "runbook broker-loss",
        "text": {"type": "plain_text", "text": "x"},
    }
    n = len(slack.stand.called("chat.update"))
    await slack.click(button, message, user="U0CAROL", channel=OPS)
    await _after_click(slack, n)
    assert "Broker loss" in _answers_since(slack, n)
    assert slack.audit("answer")[-1]["user"] == "U0CAROL"


# ---- guided triage: the other engineer's transport-neutral state machine, rendered as buttons ----------


async def test_triage_questions_are_buttons_and_answers_continue_in_the_thread(slack):
    message, buttons = await slack.preview("triage URP")  # no cluster configured: every step is a question
    assert "Triage: URP" in json.dumps(message["blocks"])
    first = next(iter(buttons.values()))
    assert first["value"].startswith("triage answer ")
    n = len(slack.stand.called("chat.update"))
    await slack.click(buttons["No"] if "No" in buttons else first, message, user="U0BOB")
    await _after_click(slack, n, 2)
    updates = slack.stand.called("chat.update")[n:]
    # The answered question loses its buttons and says who answered what ...
    settled = [c for c in updates if c.args["ts"] == message["ts"]][-1]
    assert not any(b["type"] == "actions" for b in settled.args["blocks"]) and "by <@U0BOB>" in json.dumps(settled.args)
    # ... and the next step arrives in the same thread, with its own buttons.
    nxt = [c for c in updates if c.args["ts"] != message["ts"]][-1]
    assert "Triage: URP" in json.dumps(nxt.args["blocks"])
    assert slack.stand.called("chat.postMessage")[-1].args["thread_ts"] == message["thread_ts"]
    assert slack.audit("answer")[-1]["command"] == "triage answer" and slack.audit("answer")[-1]["user"] == "U0BOB"
    # The thread is kept beside the gate's pending actions, in the app's one state database.
    with closing(sqlite3.connect(slack.state_dir / "pending.sqlite3")) as conn:
        assert conn.execute("SELECT count(*) FROM triage_threads").fetchone() == (1,)


async def test_a_stale_triage_button_gets_a_short_error_in_the_thread(slack):
    message, buttons = await slack.preview("triage URP")
    button = next(iter(buttons.values()))
    n = len(slack.stand.called("chat.update"))
    await slack.click(button, message)
    await _after_click(slack, n, 2)
    n = len(slack.stand.called("chat.update"))
    await slack.click(button, message)  # the same question again: already answered
    await _after_click(slack, n)
    assert "already answered" in _answers_since(slack, n)
    assert slack.audit("answer")[-1]["outcome"] == "bad_input"


# ---- the contract with the real action commands ------------------------------------------------------


async def test_real_retention_command_through_the_slack_gate(stand, tmp_path):
    """commands/retention.py (the other engineer's ActionSpec) on tests/actions' in-memory gateway,
    driven by our real app and gate: lowering retention is high risk, so a second approver runs it."""
    import action_fakes  # tests/actions' (pythonpath); a plain import: a broken helper must fail this test, not skip it
    from slack_harness import POLICY, Harness

    from runbook_kb import default_kb

    gw = action_fakes.FakeGateway()
    h = Harness(stand, tmp_path)
    h.router = None  # the real registry
    policy = {**POLICY, "grants": [{"name": "sre", "users": ["U0ALICE", "U0BOB"], "commands": ["retention"]}]}
    await h.start_bot(policy=policy)
    h.bot.ctx = dataclasses.replace(h.bot.ctx, live=action_fakes.FakePool(gw), kb=default_kb())
    try:
        message, buttons = await h.preview("retention orders 1d")
        assert "second approver" in json.dumps(message["blocks"])
        n = len(stand.called("chat.update"))
        await h.click(buttons["Confirm"], message, user="U0ALICE")
        await _after_click(h, n)
        assert "Self-approval is refused" in _answers_since(h, n)
        assert gw.topic_cfg["orders"]["retention.ms"].value == "604800000"
        n = len(stand.called("chat.update"))
        await h.click(buttons["Confirm"], message, user="U0BOB")
        await _after_click(h, n, 2)
        assert "Done: retention" in _answers_since(h, n)
        assert gw.topic_cfg["orders"]["retention.ms"].value == "86400000"
        execution = h.audit("execution")[0]
        assert execution["before"] == {"retention.ms": 604800000} and execution["after"] == {"retention.ms": 86400000}
        assert execution["user"] == "U0BOB" and execution["requester"] == "U0ALICE" and execution["cluster"] == "fake"
    finally:
        await h.close()


def _posted_since(slack, n_posts: int) -> str:
    return _texts(slack.stand.called("chat.postMessage")[n_posts:])


async def _slash_answer(slack, text: str, user: str = "U0ALICE") -> str:
    """Everything the bot posted and edited for one slash command, once it finished."""
    n_posts, n_updates = len(slack.stand.called("chat.postMessage")), len(slack.stand.called("chat.update"))
    status, _, _ = await slack.slash(text, user=user)
    assert status == 200
    await slack.stand.wait_for(lambda: len(slack.stand.called("chat.postMessage")) > n_posts)
    await slack.bot.drain(60)
    return _posted_since(slack, n_posts) + _answers_since(slack, n_updates)


async def test_a_lone_requester_learns_who_can_approve_and_they_are_asked_in_the_thread(slack):
    """Issue 28: "someone other than the requester must approve" was a dead end at 03:00. The
    refusal names the approvers from the RBAC grants, and a new message in the thread mentions
    them (Slack notifies mentions in new messages, not in the edited answer)."""
    message, buttons = await slack.preview("fake-abort orders")
    n_posts, n_updates = len(slack.stand.called("chat.postMessage")), len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0ALICE")
    await _after_click(slack, n_updates)
    answer = _answers_since(slack, n_updates)
    assert "Self-approval is refused" in answer and "members of user group S0ONCALL" in answer, answer
    assert "break-glass" not in answer  # the policy has no break_glass rule: no hint that cannot work
    asks = [c for c in slack.stand.thread_replies(message["thread_ts"])[n_posts:] if "subteam" in c.args["text"]]
    assert len(asks) == 1, _posted_since(slack, n_posts)
    ask = asks[0].args["text"]
    assert ask.startswith(":raising_hand: <!subteam^S0ONCALL> U0ALICE needs a second approver for fake-abort"), ask
    assert "<@U0ALICE>" not in ask  # the requester is not asked to approve their own action
    # Break-glass without a rule naming the user: refused, the approvers named again, nothing runs.
    token = buttons["Confirm"]["value"].split()[1]
    answer = await _slash_answer(slack, f"break-glass {token} approver unreachable for 20 minutes")
    assert "No break_glass rule of the RBAC policy names you" in answer and "S0ONCALL" in answer, answer
    assert slack.abort.count("execute") == 0
    assert (await slack.bot.gate.status(token)).state == "pending"


async def test_break_glass_confirms_alone_with_a_reason_that_is_audited(slack):
    policy = {
        **slack_harness.POLICY,
        "break_glass": [{"name": "lead", "users": ["U0ALICE"], "commands": ["fake-abort"]}],
    }
    await slack.start_bot(policy)
    message, buttons = await slack.preview("fake-abort orders")
    token = buttons["Confirm"]["value"].split()[1]
    n_updates = len(slack.stand.called("chat.update"))
    await slack.click(buttons["Confirm"], message, user="U0ALICE")
    await _after_click(slack, n_updates)
    assert f"break-glass {token}" in _answers_since(slack, n_updates)  # the way out, for the requester
    refused = await _slash_answer(slack, f"break-glass {token} asap")
    assert "Say why it cannot wait" in refused and slack.abort.count("execute") == 0, refused
    refused = await _slash_answer(slack, f"break-glass {token} I can approve this myself", user="U0BOB")
    assert "you can approve it with Confirm" in refused and slack.abort.count("execute") == 0, refused
    reason = "approver unreachable, writes to orders failing for 20 min"
    answer = await _slash_answer(slack, f"break-glass {token} {reason}")
    assert "Done: fake-abort" in answer and "Break-glass: confirmed alone by U0ALICE" in answer, answer
    assert slack.abort.count("execute") == 1
    approval = [r for r in slack.audit("approval") if r.get("complete")][0]
    assert approval["user"] == "U0ALICE" and approval["requester"] == "U0ALICE"
    assert approval["break_glass"] == "break_glass[lead]" and approval["break_glass_reason"] == reason
    assert token not in slack.bot.audit.path.read_text()  # the request line keeps the token's hash only
    again = await _slash_answer(slack, f"break-glass {token} {reason}, second try")
    assert "already used" in again and slack.abort.count("execute") == 1, again
