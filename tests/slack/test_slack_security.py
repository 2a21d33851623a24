"""Issue 10's Slack holes, each through the real Bolt app over signed HTTP against the stand-in:
Slack retries, confirm tokens in the audit trail, state file modes, markup injection, the
enterprise allow-list, malformed signed payloads and request bodies in the logs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import time
from urllib.parse import urlencode

import pytest
from slack_harness import SIGNING_SECRET

from bot.slack_app import run as serve_run
from gate.audit import AuditLog, KafkaMirror, token_id
from kbot_settings import load as load_settings

RETRY = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}


def _retry(n: int) -> dict:
    return {**RETRY, "X-Slack-Retry-Num": str(n)}


# ---- Slack retries ------------------------------------------------------------------------------------


async def test_a_retried_slash_command_runs_once(slack):
    status, _, _ = await slack.slash("fake-bump orders")
    assert status == 200
    await slack.stand.wait_for(lambda: slack.previews())
    for n in (1, 2, 3):  # Slack's three retries resend the same signed body
        status, body, _ = await slack.slash("fake-bump orders", headers=_retry(n))
        assert status == 200 and body == ""
    await slack.bot.drain(60)
    assert slack.bump.count("plan") == 1
    assert len(slack.audit("request")) == 1 and len(slack.audit("preview")) == 1
    assert len([c for c in slack.stand.called("chat.postMessage") if "Working on" in c.args.get("text", "")]) == 1
    assert slack.bot.deliveries.duplicates == 3


async def test_a_retry_of_a_request_that_never_arrived_runs_once(slack):
    # The first delivery was lost on the way: its retry is the first we see, so it runs.
    status, _, _ = await slack.slash("fake-bump payments", headers=_retry(1))
    assert status == 200
    await slack.stand.wait_for(lambda: slack.previews())
    status, _, _ = await slack.slash("fake-bump payments", headers=_retry(2))
    assert status == 200
    await slack.bot.drain(60)
    assert slack.bump.count("plan") == 1 and len(slack.audit("request")) == 1


async def test_the_same_text_asked_again_without_a_retry_header_runs_again(slack):
    for _ in range(2):  # two people (or one, twice) asking the same thing are two requests
        await slack.slash("fake-bump orders")
        await slack.bot.drain(60)
    await slack.stand.wait_for(lambda: len(slack.previews()) == 2)
    assert slack.bump.count("plan") == 2


async def test_a_retried_button_click_runs_once(slack):
    message, buttons = await slack.preview("fake-bump orders")
    action_ts = f"{time.time():.6f}"
    status, _, _ = await slack.click(buttons["Confirm"], message, action_ts=action_ts)
    assert status == 200
    for n in (1, 2):
        status, _, _ = await slack.click(buttons["Confirm"], message, action_ts=action_ts, headers=_retry(n))
        assert status == 200
    await slack.stand.wait_for(lambda: slack.audit("execution"))
    await slack.bot.drain(60)
    assert slack.bump.count("execute") == 1
    clicks = [r for r in slack.audit("request") if r.get("source") == "button"]
    assert len(clicks) == 1
    assert not [r for r in slack.audit("refusal") if r.get("code") == "used"]  # no "already used" replies either


# ---- confirm tokens are stored as their hash --------------------------------------------------------


class RecordingProducer:
    """Stands in for confluent_kafka.Producer (an external client): keeps what would be produced."""

    def __init__(self):
        self.values: list[bytes] = []

    def produce(self, topic, value, key=None, on_delivery=None):
        self.values.append(value)
        if on_delivery:
            on_delivery(None, None)

    def poll(self, _timeout):
        return 0

    def flush(self, _timeout=None):
        return 0


async def test_confirm_tokens_are_hashed_in_the_audit_log_and_its_kafka_mirror(slack, tmp_path):
    producer = RecordingProducer()
    await slack.start_bot(
        audit=AuditLog(slack.state_dir / "audit.jsonl", KafkaMirror("kbot-audit", {}, producer=producer))
    )
    message, buttons = await slack.preview("fake-bump orders")
    token = buttons["Confirm"]["value"].split()[1]
    await slack.click(buttons["Confirm"], message)  # a button's value is "confirm <token>"
    await slack.stand.wait_for(lambda: slack.audit("execution"))
    message2, buttons2 = await slack.preview("fake-bump payments")
    token2 = buttons2["Cancel"]["value"].split()[1]
    await slack.slash(f"cancel {token2}")  # typed
    await slack.stand.wait_for(lambda: slack.audit("cancel"))
    await slack.bot.drain(60)
    local = slack.bot.audit.path.read_text()
    mirrored = b"\n".join(producer.values).decode()
    for where in (local, mirrored):
        assert token not in where and token2 not in where
        assert f"confirm #{token_id(token)}" in where and f"cancel #{token_id(token2)}" in where
    answers = [r for r in slack.audit("answer") if r["command"] == "confirm"]
    assert answers and answers[0]["args"] == {"token_id": token_id(token)}


# ---- state files: 0600 in a 0700 folder ---------------------------------------------------------------


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_state_files_are_private_even_when_an_older_version_left_them_open(slack, tmp_path):
    old_umask = os.umask(0o022)  # the usual umask: what sqlite and open() would use unasked
    try:
        state = tmp_path / "older"
        state.mkdir(mode=0o755)
        os.chmod(state, 0o755)
        for name in ("pending.sqlite3", "audit.jsonl"):
            (state / name).touch()
            os.chmod(state / name, 0o644)
        fresh = tmp_path / "fresh" / "state"
        for folder in (state, fresh):
            await slack.start_bot(state_dir=folder)
            await slack.preview("fake-bump orders")
            await slack.bot.drain(60)
            assert _mode(folder) == 0o700, folder
            files = [p for p in folder.iterdir() if p.name.startswith(("pending.sqlite3", "audit.jsonl"))]
            # (-wal / -shm exist only while a connection is open; sqlite gives them the database's mode)
            assert {p.name for p in files} >= {"pending.sqlite3", "audit.jsonl"}
            assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
    finally:
        os.umask(old_umask)


# ---- Slack markup injection -----------------------------------------------------------------------------


def _mrkdwn(args: dict) -> list[str]:
    """Every string Slack would parse as mrkdwn in a chat.* call: the text field (a notification's
    fallback) and every mrkdwn text object. plain_text objects are shown verbatim, so not these."""
    out = [args["text"]] if isinstance(args.get("text"), str) else []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn" and isinstance(node.get("text"), str):
                out.append(node["text"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    blocks = args.get("blocks")
    walk(json.loads(blocks) if isinstance(blocks, str) else blocks)
    return out


def _posted_mrkdwn(slack) -> list[str]:
    return [
        t
        for c in slack.stand.calls
        if c.method.startswith("chat.") or c.method == "response_url"
        for t in _mrkdwn(c.args)
    ]


@pytest.mark.parametrize(
    "text,markup,where",
    [
        ("why <!here> URP", "<!here>", "the answer's fallback text"),
        (
            "runbook <https://evil.example|click here for the fix>",
            "<https://evil.example",
            "the issue's text, verbatim",
        ),
        # words no runbook entry has, so the answer quotes the query back: "Nothing in the runbook matches '...'"
        ("runbook <https://evil.example|qqzx vvwk>", "<https://evil.example", "a no-match answer's fallback text"),
        ("why <!channel> <https://evil.example|see here>", "<!channel>", "a verdict that quotes the symptom"),
        ("describe <!here>", "<!here>", "an error answered privately"),
        ("<!everyone> status", "<!everyone>", "an unknown-command error"),
    ],
)
async def test_user_text_is_escaped_wherever_it_is_echoed(slack, text, markup, where):
    await slack.slash(text)
    await slack.stand.wait_for(lambda: slack.stand.thread_replies() or slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    posted = _posted_mrkdwn(slack)
    assert posted, "nothing was posted"
    leaked = [t for t in posted if markup in t]
    assert not leaked, f"{where}: {leaked}"
    escaped = markup.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert any(escaped in t for t in posted)  # the text is echoed, escaped (so the test is not vacuous)


async def test_fallback_text_of_every_answer_page_is_escaped(slack):
    await slack.slash("why <!here> URP")
    replies = await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    fallback = replies[0].args["text"]
    assert "<!here>" not in fallback and "&lt;!here&gt;" in fallback


def test_a_long_answer_split_into_messages_escapes_the_title_in_every_part_marker():
    from bot.render_slack import render_blocks
    from framework.reply import Reply, Section

    reply = Reply(title="Why <!here> URP?", verdict="v", sections=[Section(f"s{i}", ["x"]) for i in range(80)])
    pages = render_blocks(reply)
    assert len(pages) > 1
    markers = [
        e["text"]
        for p in pages
        for b in p["blocks"]
        if b["type"] == "context"
        for e in b["elements"]
        if "part" in e["text"]
    ]
    assert len(markers) == len(pages) and all("<!here>" not in m and "&lt;!here&gt;" in m for m in markers)
    assert all("<!here>" not in p["text"] for p in pages)


# ---- the enterprise allow-list -----------------------------------------------------------------------


async def test_enterprise_allow_list_refuses_other_orgs_and_non_grid_requests(slack):
    await slack.start_bot(allowed_enterprise_ids=frozenset({"E0GOOD"}))
    status, body, _ = await slack.slash("why URP", enterprise="E0EVIL")
    assert status == 200 and "Enterprise Grid org E0EVIL" in body
    status, body, _ = await slack.slash("why URP")  # no enterprise at all
    assert status == 200 and "does not serve Enterprise Grid org" in body
    await slack.bot.drain(60)
    assert slack.stand.called("chat.postMessage") == [] and slack.stand.called("users.info") == []
    assert [r["rule"] for r in slack.audit("refusal")] == ["KBOT_ALLOWED_ENTERPRISE_IDS"] * 2
    await slack.slash("why URP", enterprise="E0GOOD")
    await slack.stand.wait_for(lambda: slack.stand.thread_replies())


async def test_a_click_from_another_enterprise_is_refused(slack):
    message, buttons = await slack.preview("fake-bump orders")
    await slack.start_bot(allowed_enterprise_ids=frozenset({"E0GOOD"}))
    await slack.click(buttons["Confirm"], message, enterprise="E0EVIL")
    await slack.stand.wait_for(lambda: slack.audit("refusal"))
    await slack.bot.drain(60)
    assert slack.bump.count("execute") == 0 and slack.audit("refusal")[0]["rule"] == "KBOT_ALLOWED_ENTERPRISE_IDS"


async def test_a_user_of_another_org_is_refused_even_from_an_allowed_org(slack):
    # A shared channel: the request comes through the allowed org, the person belongs to another.
    slack.stand.add_user("W0VISITOR", enterprise="E0EVIL")
    await slack.start_bot(allowed_enterprise_ids=frozenset({"E0GOOD"}))
    await slack.slash("why URP", user="W0VISITOR", enterprise="E0GOOD")
    eph = await slack.stand.wait_for(lambda: slack.stand.called("chat.postEphemeral"))
    await slack.bot.drain(60)
    assert "Enterprise Grid org E0EVIL" in json.dumps(eph[0].args)
    assert slack.audit("refusal")[0]["rule"] == "KBOT_ALLOWED_ENTERPRISE_IDS"


def _serve_check(monkeypatch, capsys, env: dict, as_json: bool = False):
    for name in ("SLACK_APP_TOKEN", "KBOT_ALLOWED_TEAM_IDS", "KBOT_ALLOWED_ENTERPRISE_IDS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"SLACK_BOT_TOKEN": "xoxb-1-2-x", "SLACK_SIGNING_SECRET": "s3cr3t", **env}.items():
        monkeypatch.setenv(name, value)
    code = serve_run(argparse.Namespace(check=True, json=as_json), load_settings())
    return code, capsys.readouterr()


def test_serve_check_warns_loudly_when_any_workspace_may_call(monkeypatch, capsys):
    code, out = _serve_check(monkeypatch, capsys, {})
    assert code == 0 and "WARNING" in out.err and "ANY Slack workspace" in out.err
    code, out = _serve_check(monkeypatch, capsys, {}, as_json=True)
    assert code == 0 and "ANY Slack workspace" in json.loads(out.out)["warnings"][0]
    for allow in ({"KBOT_ALLOWED_TEAM_IDS": "T0TEAM"}, {"KBOT_ALLOWED_ENTERPRISE_IDS": "E0GOOD"}):
        code, out = _serve_check(monkeypatch, capsys, allow)
        assert code == 0 and "WARNING" not in out.err and "Slack configured" in out.out


# ---- malformed signed payloads -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body,content_type",
    [
        (urlencode({"payload": "not json at all"}), "application/x-www-form-urlencoded"),
        (urlencode({"payload": "[1, 2]"}), "application/x-www-form-urlencoded"),
        (
            urlencode({"payload": json.dumps({"type": "block_actions", "actions": "x", "user": {"id": "U0ALICE"}})}),
            "application/x-www-form-urlencoded",
        ),
        (
            urlencode(
                {
                    "payload": json.dumps(
                        {"type": "block_actions", "user": "U0ALICE", "actions": [{"action_id": "kbot_action_0"}]}
                    )
                }
            ),
            "application/x-www-form-urlencoded",
        ),
        ("{not json", "application/json"),
        (json.dumps({"type": "event_callback", "team_id": "T0TEAM", "event": "app_mention"}), "application/json"),
    ],
)
async def test_a_signed_malformed_payload_is_400_with_one_log_line(slack, caplog, body, content_type):
    caplog.set_level(logging.INFO)
    status, text, _ = await slack.post(body, content_type)
    assert status == 400 and "malformed" in text
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "malformed" in lines[0].getMessage() and lines[0].exc_info is None
    assert not any(r.exc_info for r in caplog.records)  # no traceback anywhere
    # Unsigned, the same garbage is a 401 like any unsigned request.
    status, _, _ = await slack.post(body, content_type, secret="not-the-signing-secret")
    assert status == 401


# ---- request bodies and response URLs stay out of the logs ----------------------------------------------


async def test_a_rejected_request_is_logged_without_its_body_or_response_url(slack, caplog):
    caplog.set_level(logging.DEBUG)
    status, _, _ = await slack.slash("why URP my-private-words", secret="not-the-signing-secret")
    assert status == 401
    status, _, _ = await slack.slash("why URP my-private-words", ts=str(int(time.time()) - 3600))
    assert status == 401
    assert "Invalid request signature" in caplog.text  # Bolt did log the rejection
    assert "/response/U0ALICE" not in caplog.text and "response_url" not in caplog.text
    assert "my-private-words" not in caplog.text and SIGNING_SECRET not in caplog.text
