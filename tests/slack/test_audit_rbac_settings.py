"""The audit log (durable, scrubbed, mirrored best-effort), the RBAC policy (pure) and the env settings."""

from __future__ import annotations

import json
import multiprocessing
import time

import pytest

from bot.slack_settings import SlackSettings
from gate.audit import AuditLog, KafkaMirror, scrub, token_id
from gate.rbac import Policy, PolicyError
from kbot_settings import load as load_settings

# ---- audit ----------------------------------------------------------------------------------------------


def test_audit_appends_durably_and_survives_reopening(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    log.record("request", user="U1", text="why URP")
    log.record("execution", user="U1", before={"a": 1}, after={"a": 2}, latency_ms=12.5)
    again = AuditLog(tmp_path / "audit.jsonl")  # a restart
    recs = again.read()
    assert [r["event"] for r in recs] == ["request", "execution"]
    assert recs[1]["before"] == {"a": 1} and "ts" in recs[0]
    assert oct((tmp_path / "audit.jsonl").stat().st_mode & 0o777) == "0o600"


def _append_many(path: str, who: str) -> None:
    log = AuditLog(__import__("pathlib").Path(path))
    for i in range(200):
        log.record("request", user=who, n=i, text="x" * 300)


def test_two_processes_append_without_tearing_lines(tmp_path):
    path = str(tmp_path / "audit.jsonl")
    procs = [multiprocessing.get_context("spawn").Process(target=_append_many, args=(path, w)) for w in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    recs = AuditLog(tmp_path / "audit.jsonl").read()  # every line parses
    assert len(recs) == 400 and {r["user"] for r in recs} == {"a", "b"}


def test_scrub_masks_secrets_but_keeps_the_record():
    rec = scrub(
        {
            "text": "why URP xoxb-123-456-abc and xapp-1-A-2-b",
            "args": {"sasl_password": "hunter2", "topic": "t"},
            "token_id": "abc",
        },
        ("my-signing-secret",),
    )
    assert "xoxb" not in json.dumps(rec) and "xapp" not in json.dumps(rec)
    assert rec["args"] == {"sasl_password": "***", "topic": "t"} and rec["token_id"] == "abc"
    assert scrub("signing my-signing-secret", ("my-signing-secret",)) == "signing ***"
    assert token_id("abc") == token_id("abc") and len(token_id("abc")) == 12


def test_kafka_mirror_failure_never_loses_the_local_record(tmp_path):
    # A real librdkafka producer pointed at a port nothing listens on: delivery fails after the timeout.
    mirror = KafkaMirror(
        "kbot-audit",
        {
            "bootstrap.servers": "127.0.0.1:1",
            "message.timeout.ms": 1500,
            "socket.connection.setup.timeout.ms": 1000,
            "log_level": 0,
        },
    )
    log = AuditLog(tmp_path / "audit.jsonl", mirror=mirror)
    started = time.monotonic()
    log.record("execution", user="U1", result="ok")
    assert time.monotonic() - started < 1.0  # the mirror does not hold the caller
    assert log.read()[0]["event"] == "execution"
    mirror.flush(10)
    assert mirror.failed == 1 and mirror.delivered == 0


def test_mirror_exceptions_are_contained(tmp_path):
    class Broken:
        def send(self, rec):
            raise RuntimeError("mirror down")

        def flush(self):
            pass

    log = AuditLog(tmp_path / "audit.jsonl", mirror=Broken())
    log.record("cancel", user="U1")
    assert log.read()[0]["event"] == "cancel"


# ---- RBAC policy ------------------------------------------------------------------------------------------

POLICY = Policy.from_dict(
    {
        "channels": ["C1", "C2"],
        "grants": [
            {"name": "oncall", "users": ["U1"], "groups": ["S1"], "channels": ["C1"], "commands": ["abort-txn"]}
        ],
        "deny": [{"name": "intern", "users": ["U9"], "commands": ["*"]}],
    },
    "test-policy",
)


@pytest.mark.parametrize(
    "user,groups,channel,command,mutating,allowed,rule",
    [
        ("U5", set(), "C1", "why", False, True, "read_only: open"),
        ("U5", set(), "C3", "why", False, False, "channels"),
        ("U9", set(), "C1", "why", False, False, "deny[intern]"),
        ("U5", set(), "C1", "abort-txn", True, False, "default: deny unless granted"),
        ("U1", set(), "C1", "abort-txn", True, True, "grants[oncall]"),
        ("U1", set(), "C2", "abort-txn", True, False, "default: deny unless granted"),  # the grant is for C1 only
        ("U5", {"S1"}, "C1", "abort-txn", True, True, "grants[oncall]"),
        ("U1", set(), "C1", "throttle set", True, False, "default: deny unless granted"),
    ],
)
def test_policy_check(user, groups, channel, command, mutating, allowed, rule):
    v = POLICY.check(user, groups, channel, command, mutating)
    assert (v.allowed, v.rule) == (allowed, rule)
    if not allowed:
        assert v.reason


def test_default_policy_is_read_only():
    p = Policy()
    assert p.check("U1", set(), "C9", "why", False).allowed
    assert not p.check("U1", set(), "C9", "abort-txn", True).allowed


def test_read_only_granted_mode():
    p = Policy.from_dict({"read_only": "granted", "grants": [{"users": ["U1"], "commands": ["why"]}]})
    assert p.check("U1", set(), None, "why", False).allowed and not p.check("U2", set(), None, "why", False).allowed


@pytest.mark.parametrize(
    "bad,needle",
    [
        ({"grants": [{"users": ["U1"]}]}, "names no commands"),
        ({"grants": [{"commands": ["why"]}]}, "names no users or groups"),
        ({"grantz": []}, "unknown field"),
        ({"read_only": "maybe"}, "read_only"),
        ({"grants": [{"users": "U1", "commands": ["x"], "role": "admin"}]}, "unknown field"),
    ],
)
def test_policy_errors_name_the_field(bad, needle):
    with pytest.raises(PolicyError, match=needle):
        Policy.from_dict(bad)


def test_policy_loads_from_yaml(tmp_path):
    f = tmp_path / "rbac.yaml"
    f.write_text("channels: ['*']\ngrants:\n  - name: sre\n    groups: [S1]\n    commands: [elect-leaders]\n")
    p = Policy.load(f)
    assert p.channels is None and p.group_ids() == {"S1"}
    assert p.check("U1", {"S1"}, "C7", "elect-leaders", True).rule == "grants[sre]"


# ---- settings ---------------------------------------------------------------------------------------------


def test_settings_from_env_and_repr_hides_secrets(tmp_path):
    s = SlackSettings.from_settings(
        load_settings(
            {
                "SLACK_BOT_TOKEN": "xoxb-secret-1",
                "SLACK_SIGNING_SECRET": "sig-secret-2",
                "SLACK_API_URL": "http://127.0.0.1:9/api",
                "KBOT_ALLOWED_TEAM_IDS": "T1, T2",
                "KBOT_STATE_DIR": str(tmp_path),
                "KBOT_PORT": "8080",
                "KBOT_CONFIRM_TTL_S": "60",
            }
        )
    )
    assert s.mode == "http" and s.api_url == "http://127.0.0.1:9/api/" and s.allowed_team_ids == {"T1", "T2"}
    assert s.port == 8080 and s.confirm_ttl_s == 60 and s.state_dir == tmp_path
    assert "xoxb-secret-1" not in repr(s) and "sig-secret-2" not in repr(s)
    assert SlackSettings.from_settings(load_settings({"SLACK_BOT_TOKEN": "x", "SLACK_APP_TOKEN": "y"})).mode == "socket"
    assert (
        SlackSettings.from_settings(load_settings({})).mode is None
        and "SLACK_BOT_TOKEN" in SlackSettings.from_settings(load_settings({})).missing()
    )
    assert SlackSettings.from_settings(load_settings({})).high_risk_kinds == {"abort-txn"}


async def test_concurrent_async_writes_are_group_committed_and_all_durable(tmp_path):
    import asyncio
    import os
    from unittest import mock

    log = AuditLog(tmp_path / "audit.jsonl")
    real_fsync, fsyncs = os.fsync, []

    def counting_fsync(fd):
        fsyncs.append(fd)
        return real_fsync(fd)

    with mock.patch("gate.audit.os.fsync", counting_fsync):
        recs = await asyncio.gather(*(log.write("request", user=f"U{i}", n=i) for i in range(200)))
    assert [r["n"] for r in recs] == list(range(200))
    assert sorted(r["n"] for r in log.read()) == list(range(200))  # every line is on disk when write() returns
    assert 1 <= len(fsyncs) < 200  # batched: fewer fsyncs than lines
    log.close()


def test_hash_tokens_replaces_confirm_tokens_and_leaves_prose_alone():
    from gate.audit import hash_tokens
    from gate.confirmation import new_token

    tok = new_token()
    rec = hash_tokens(
        {
            "text": f"confirm {tok}",
            "raw": f"/kafka CANCEL  {tok}",
            "args": {"token": tok},
            "other": "runbook cancel reassignment stuck",
            "why": f"not at the start: confirm {tok}",
            "glass": f"break-glass {tok} approver unreachable",
        }
    )
    assert rec["text"] == f"confirm #{token_id(tok)}" and rec["raw"] == f"/kafka CANCEL  #{token_id(tok)}"
    assert rec["args"] == {"token_id": token_id(tok)}
    assert rec["other"] == "runbook cancel reassignment stuck"
    assert rec["why"] == f"not at the start: confirm #{token_id(tok)}"
    assert rec["glass"] == f"break-glass #{token_id(tok)} approver unreachable"


def test_redact_log_text_withholds_bodies_and_response_urls():
    from gate.audit import redact_log_text

    line = (
        "Invalid request signature detected (signature: v0=ab, timestamp: 1, "
        "body: token=x&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1%2F2%2Fsecret&text=hi)"
    )
    clean = redact_log_text(line)
    assert "secret" not in clean and "hooks" not in clean and "Invalid request signature detected" in clean
    assert "secret" not in redact_log_text("{'response_url': 'https://hooks.slack.com/actions/T/1/secret'}")
