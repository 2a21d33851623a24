"""The console as an incident (issue 37), end to end through `kbot console` in a subprocess as a
user runs it: plain-word follow-ups use the session's memory, what fits no shape gets "I can
answer: ...", and `timeline` alone is the session's own timeline, with a line saying why it has no
chart (no metric lake here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _console(tmp_path, stdin: str, *args: str) -> subprocess.CompletedProcess:
    """`kbot console` with no cluster, no lake and no setting of the caller's (as tests/unit/test_cli.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_")) and k != "PORT"}
    env.update(
        HOME=str(tmp_path / "home"),
        KBOT_HOME=str(tmp_path / "kbot"),
        KBOT_STATE_DIR=str(tmp_path / "kbot"),
        KBOT_CACHE_DIR=str(tmp_path / "cache"),
        NO_COLOR="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "console", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def test_a_console_session_answers_plain_words_and_has_a_timeline(tmp_path):
    r = _console(tmp_path, "why URP\nwhat should I do first?\nand the coffee?\ntimeline\nexit\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Read “what should I do first?” as `runbook that`. From this session: cause broker-loss" in out
    assert "Runbook: Broker loss" in out
    assert "I can answer: “what should I do first?”" in out and "Unknown command" not in out
    assert "Incident timeline: why URP" in out
    assert "`why URP`" in out and "`what should I do first?`" in out  # the session's questions, in order
    assert "No chart of UnderReplicatedPartitions: no metric lake is configured here" in out
    assert "Traceback" not in r.stderr


def test_the_console_timeline_in_json(tmp_path):
    r = _console(tmp_path, "why URP\ntimeline\n", "--json")
    assert r.returncode == 0, r.stderr
    docs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    timeline = docs[-1]["timeline"]
    assert timeline["thread"] == "this console session" and timeline["questions"] == 1
    assert [e["kind"] for e in timeline["events"]] == ["question"]
    assert timeline["durations"]["resolution"] == "last answer"
