"""The terminal interface end to end, through a subprocess, as a user runs it."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

# The runbook-only answers these tests read must not change when a developer's cluster runs or
# KBOT_BOOTSTRAP is set: each run gets an empty home and cache, and no KBOT_* setting but the seeds'.
_HERMETIC = tempfile.mkdtemp(prefix="kbot-cli-test-")
ENV = {k: v for k, v in os.environ.items() if not k.startswith("KBOT_") or k == "KBOT_REQUIRE_SEEDS"}
ENV.update(KBOT_HOME=os.path.join(_HERMETIC, "home"), KBOT_CACHE_DIR=os.path.join(_HERMETIC, "cache"), NO_COLOR="1")


def kbot(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], input=stdin, capture_output=True, text=True, timeout=120, env=ENV
    )


def test_ask_why_urp_gives_cause_mechanism_and_mitigation():
    r = kbot("ask", "why URP")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("[UNKNOWN] Why URP?"), out  # no cluster: the runbook cannot say it is present
    assert "Check first: Broker loss" in out and "Slow follower" in out
    assert "Partition.scala:232" in out
    assert len(out.splitlines()) <= 40, out
    assert "https://github.com/apache/kafka/blob/04bfe7d/core/src/main/scala/kafka/cluster/Partition.scala#L232" in out
    assert "Traceback" not in r.stderr


def test_ask_runbook_hanging_transaction():
    r = kbot("ask", "runbook", "hanging", "transaction")
    assert r.returncode == 0, r.stderr
    assert "Runbook: Hanging transaction" in r.stdout
    assert "Partition.scala:1442" in r.stdout
    assert "kafka-transactions.sh" in r.stdout


def test_ask_json():
    r = kbot("ask", "--json", "why NotEnoughReplicas")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["diagnoses"][0]["entry_id"] == "under-min-isr"
    assert data["diagnoses"][0]["mechanism"][0]["url"].startswith("https://github.com/apache/kafka/blob/04bfe7d/")


@pytest.mark.parametrize(
    "text,needle",
    [("frobnicate", "Unknown command"), ("why", "needs symptom"), ("x" * 5000, "limit is 4,000"), ("why \x07URP", "control characters")],
)
def test_bad_input_exits_2_with_a_short_error(text, needle):
    r = kbot("ask", text)
    assert r.returncode == 2
    assert needle in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    assert len(r.stdout.splitlines()) < 10


def test_bad_input_json():
    r = kbot("ask", "--json", "wyh URP")
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["severity"] == "error" and "Try: why" in data["followups"]


def test_console_reads_lines_with_or_without_prefix_and_survives_errors():
    r = kbot("console", stdin="/kafka why URP\nfrobnicate\nrunbook PRODUCER_FENCED\nexit\nwhy offline\n")
    assert r.returncode == 0, r.stderr
    assert "Why URP?" in r.stdout
    assert "Unknown command 'frobnicate'" in r.stdout
    assert "Runbook: Producer fencing" in r.stdout
    assert "Why offline?" not in r.stdout  # after exit


def test_console_json_prints_one_json_document_per_answer():
    r = kbot("console", "--json", stdin="why URP\nhelp\n")
    assert r.returncode == 0, r.stderr
    decoder = json.JSONDecoder()
    text, pos, found = r.stdout, 0, []
    while pos < len(text.strip()):
        obj, end = decoder.raw_decode(text, pos)
        found.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    assert [d["title"] for d in found] == ["Why URP?", "Kafka incident bot"]


def test_help_is_real_help():
    r = kbot("--help")
    assert r.returncode == 0
    assert "ask" in r.stdout and "console" in r.stdout
    r = kbot("ask", "help why")
    assert r.returncode == 0
    assert "Usage: /kafka why <symptom>..." in r.stdout
    r = kbot("ask", "why --help")
    assert "Usage: /kafka why" in r.stdout


def test_no_subcommand_prints_help_and_exits_2():
    r = kbot()
    assert r.returncode == 2
    assert "usage: kbot" in r.stdout
