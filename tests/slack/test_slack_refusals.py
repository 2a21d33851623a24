"""Issue 37 item 5: a refusal tells the person refused what to do, never the server's internals.

Through the real Bolt app over signed HTTP against the Slack stand-in."""

from __future__ import annotations

import json
import logging
import time

import yaml
from slack_harness import OPS, POLICY
from slack_stand_in import TEAM


def _everything_sent(slack) -> str:
    """Every argument the bot sent to Slack (posts, ephemeral messages, response_url answers)."""
    return json.dumps([c.args for c in slack.stand.calls])


async def test_an_ungranted_users_refusal_names_who_to_ask_and_not_the_policy_file(slack, tmp_path):
    policy_file = tmp_path / "server-only" / "kbot-rbac.yaml"
    policy_file.parent.mkdir()
    policy_file.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    await slack.start_bot(None, rbac_file=policy_file)  # the policy as `kbot serve` loads it
    status, ack, _ = await slack.slash("fake-bump orders", user="U0CAROL")  # a member with no grant
    assert status == 200
    await slack.stand.wait_for(lambda: slack.audit("refusal"))
    await slack.bot.drain(60)
    seen = ack + _everything_sent(slack)
    assert "no grant" in seen
    assert str(policy_file) not in seen and "kbot-rbac.yaml" not in seen and str(tmp_path) not in seen
    # who to ask: the people the policy lets run it (U0ALICE; U0BOB through the S0ONCALL group)
    assert "U0ALICE" in seen and "S0ONCALL" in seen and "whoever runs this bot" in seen
    refusal = slack.audit("refusal")[0]
    assert refusal["rule"] == "default: deny unless granted" and "U0ALICE" in refusal["reason"]


async def test_a_denied_users_refusal_names_the_rule_and_not_the_policy_file(slack, tmp_path):
    policy_file = tmp_path / "kbot-rbac.yaml"
    policy_file.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    await slack.start_bot(None, rbac_file=policy_file)
    await slack.slash("fake-bump orders", user="U0MALLORY")
    await slack.stand.wait_for(lambda: slack.audit("refusal"))
    await slack.bot.drain(60)
    seen = _everything_sent(slack)
    assert "deny[no-mallory]" in seen and "kbot-rbac.yaml" not in seen and str(tmp_path) not in seen


def _made_up_click(action_id: str) -> dict:
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "standin"},
        "user": {"id": "U0ALICE", "username": "u0alice", "team_id": TEAM},
        "api_app_id": "A0KBOT",
        "token": "legacy-verification",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": "1700000028.000009", "channel_id": OPS},
        "channel": {"id": OPS, "name": "ops"},
        "message": {"ts": "1700000028.000009", "type": "message", "text": "hello"},
        "actions": [
            {"action_id": action_id, "value": "abort-txn orders-tx", "block_id": "b1", "action_ts": str(time.time())}
        ],
    }


async def test_a_click_with_a_made_up_action_id_logs_one_short_line_without_the_senders_text(slack, caplog):
    from urllib.parse import urlencode

    caplog.set_level(logging.DEBUG)
    action_id = "pwn_<script>alert(1)</script>_" + "x" * 40
    body = urlencode({"payload": json.dumps(_made_up_click(action_id))})
    status, text, _ = await slack.post(body, "application/x-www-form-urlencoded")
    await slack.bot.drain(60)
    assert status in (200, 404)  # acked or "not ours": Slack shows nothing harmful either way
    assert action_id not in text and "abort-txn" not in text and "@app" not in text
    lines = [r.getMessage() for r in caplog.records]
    assert not any(action_id in line or "<script>" in line or "abort-txn orders-tx" in line for line in lines), lines
    assert not any("@app.action" in line or "Suggestion" in line for line in lines), lines
    notes = [r for r in caplog.records if "unhandled" in r.getMessage().lower() and r.levelno >= logging.INFO]
    assert len(notes) == 1 and "\n" not in notes[0].getMessage() and len(notes[0].getMessage()) < 200
    assert slack.audit("request") == [] and slack.stand.called("chat.postMessage") == []
