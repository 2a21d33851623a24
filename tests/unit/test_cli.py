"""The terminal interface end to end, through a subprocess, as a user runs it."""

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable

import pytest


@pytest.fixture
def kbot(tmp_path) -> Callable[..., subprocess.CompletedProcess]:
    """Run `python -m cli.main ARGS` as a user would, in an environment of its own.

    The runbook-only answers these tests read must not change when a developer's cluster runs, when
    KBOT_BOOTSTRAP or Slack tokens are set, or when ~/.kbot holds a clusters.yaml: the process gets
    no KBOT_* or SLACK_* variable from the caller, an empty HOME, state root and cache (the cache
    root is where `kbot run`'s local cluster is found), and nothing else it could discover."""

    def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        extra = env or {}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_")) and k != "PORT"}
        env.update(
            HOME=str(tmp_path / "home"),
            KBOT_HOME=str(tmp_path / "kbot"),
            KBOT_STATE_DIR=str(tmp_path / "kbot"),
            KBOT_CACHE_DIR=str(tmp_path / "cache"),
            NO_COLOR="1",
            **extra,
        )
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args], input=stdin, capture_output=True, text=True, timeout=120, env=env
        )

    return run


def test_ask_why_urp_gives_cause_mechanism_and_mitigation(kbot):
    r = kbot("ask", "why URP")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("[UNKNOWN] Why URP?"), out  # no cluster: the runbook cannot say it is present
    assert "Check first: Broker loss" in out and "Slow follower" in out
    assert "Partition.scala:232" in out
    assert len(out.splitlines()) <= 40, out
    assert "https://github.com/apache/kafka/blob/04bfe7d/core/src/main/scala/kafka/cluster/Partition.scala#L232" in out
    assert "Traceback" not in r.stderr


def test_the_callers_bot_settings_do_not_reach_the_cli(kbot, monkeypatch):
    """A caller pointed at a cluster (here one where nothing listens) and at Slack: the answer is still
    the no-cluster one, not 'the cluster did not answer'."""
    monkeypatch.setenv("KBOT_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.setenv("KBOT_CLUSTERS_FILE", "/nonexistent/clusters.yaml")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-not-for-tests")
    r = kbot("ask", "--json", "why URP")
    assert r.returncode == 0, r.stdout + r.stderr
    verdict = json.loads(r.stdout)["verdict"]
    assert verdict.startswith("No cluster is configured"), verdict  # not "The cluster did not answer"


def test_ask_runbook_hanging_transaction(kbot):
    r = kbot("ask", "runbook", "hanging", "transaction")
    assert r.returncode == 0, r.stderr
    assert "Runbook: Hanging transaction" in r.stdout
    assert "Partition.scala:1442" in r.stdout
    assert "kafka-transactions.sh" in r.stdout


def test_ask_json(kbot):
    r = kbot("ask", "--json", "why NotEnoughReplicas")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["diagnoses"][0]["entry_id"] == "under-min-isr"
    assert data["diagnoses"][0]["mechanism"][0]["url"].startswith("https://github.com/apache/kafka/blob/04bfe7d/")


@pytest.mark.parametrize(
    "text,needle",
    [
        ("frobnicate", "Unknown command"),
        ("why", "needs symptom"),
        ("x" * 5000, "limit is 4,000"),
        ("why \x07URP", "control characters"),
    ],
)
def test_bad_input_exits_2_with_a_short_error(kbot, text, needle):
    r = kbot("ask", text)
    assert r.returncode == 2
    assert needle in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    assert len(r.stdout.splitlines()) < 10


def test_bad_input_json(kbot):
    r = kbot("ask", "--json", "wyh URP")
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["severity"] == "error" and "Try: why" in data["followups"]


def test_an_unknown_cluster_with_json_is_a_json_error_on_stdout(kbot):
    res = kbot("ask", "--json", "--cluster", "nope", "status")
    assert res.returncode == 2
    out = json.loads(res.stdout)  # a script reads stdout: never empty
    assert out["outcome"] == "bad_input" and "Unknown Kafka cluster 'nope'" in out["verdict"]
    assert "unknown Kafka cluster 'nope'" in res.stderr


def test_console_reads_lines_with_or_without_prefix_and_survives_errors(kbot):
    r = kbot("console", stdin="/kafka why URP\nfrobnicate\nrunbook PRODUCER_FENCED\nexit\nwhy offline\n")
    assert r.returncode == 0, r.stderr
    assert "Why URP?" in r.stdout
    assert "Unknown command 'frobnicate'" in r.stdout
    assert "Runbook: Producer fencing" in r.stdout
    assert "Why offline?" not in r.stdout  # after exit


def test_console_json_prints_one_json_document_per_answer(kbot):
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


def test_help_is_real_help(kbot):
    r = kbot("--help")
    assert r.returncode == 0
    assert "ask" in r.stdout and "console" in r.stdout
    r = kbot("ask", "help why")
    assert r.returncode == 0
    assert "Usage: /kafka why <symptom>..." in r.stdout
    r = kbot("ask", "why --help")
    assert "Usage: /kafka why" in r.stdout


def test_no_subcommand_prints_help_and_exits_2(kbot):
    r = kbot()
    assert r.returncode == 2
    assert "usage: kbot" in r.stdout


def test_kbot_run_waits_for_its_collector_to_flush_after_sigterm(tmp_path):
    """cli.run.stop_collection: a collector that takes a few seconds to write its last batch after
    SIGTERM (as `lake collect` does) is waited for, not killed after a fixed grace period."""
    from cli.run import stop_collection

    done = tmp_path / "flushed"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pathlib, signal, sys, time\n"
            "def term(*_):\n"
            "    time.sleep(3)\n"  # the last ingest and rollup flush
            f"    pathlib.Path({str(done)!r}).write_text('ok')\n"
            "    sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, term)\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            "    time.sleep(1)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    stop_collection(child, wait_s=120)
    assert child.returncode == 0 and done.read_text() == "ok"


def test_kbot_run_kills_a_collector_that_does_not_stop_in_time(tmp_path):
    from cli.run import stop_collection

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "ready"
    stop_collection(child, wait_s=1)
    assert child.returncode == -9


def test_dash_dash_cluster_picks_the_cluster_for_ask_and_console(kbot, tmp_path):
    """`--cluster NAME` binds NAME on every request (a value, as Slack's @name): with two clusters
    and no default, `status` is about NAME instead of asking which cluster is meant."""
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n  alpha: {bootstrap: '127.0.0.1:1'}\n  beta: {bootstrap: '127.0.0.1:2'}\n")
    env = {"KBOT_CLUSTERS_FILE": str(clusters), "KBOT_ADMIN_TIMEOUT_S": "2"}
    unpicked = kbot("ask", "--json", "status", env=env)
    assert "none is the default" in json.loads(unpicked.stdout)["verdict"]
    asked = kbot("ask", "--json", "--cluster", "beta", "status", env=env)
    verdict = json.loads(asked.stdout)["verdict"]
    assert "none is the default" not in verdict and "127.0.0.1:2" in verdict, verdict
    console = kbot("console", "--json", "--cluster", "beta", stdin="status\nexit\n", env=env)
    verdict = json.loads(console.stdout.splitlines()[0])["verdict"]
    assert "none is the default" not in verdict and "127.0.0.1:2" in verdict, verdict


def test_the_edge_finds_the_dev_cluster_kbot_run_left_running(tmp_path, monkeypatch):
    """`kbot ask` in a second terminal sees the dev cluster `kbot run` started (cli/dev_cluster.py):
    only when nothing configures a cluster, and only while its nodes run."""
    from cli.dev_cluster import effective_settings
    from kbot_settings import load
    from localkafka.cluster import Node

    monkeypatch.setenv("KBOT_CACHE_DIR", str(tmp_path / "cache"))  # where the dev cluster's folder is
    settings = load({"KBOT_HOME": str(tmp_path / "kbot"), "KBOT_STATE_DIR": str(tmp_path / "kbot")})
    assert effective_settings(settings) is settings  # not running: nothing added

    monkeypatch.setattr(Node, "pid", lambda self: 4242)
    found = effective_settings(settings)
    assert found.kbot_cluster_name == "local" and (found.kbot_bootstrap or "").startswith("127.0.0.1:")
    assert found.kbot_metrics_targets and found.kbot_expected_brokers
    assert found.state_dir == settings.state_dir and found.environ == settings.environ  # the rest kept
    assert settings.kbot_bootstrap is None  # a copy

    configured = load({"KBOT_HOME": str(tmp_path / "kbot"), "KBOT_BOOTSTRAP": "kafka-1:9092"})
    assert effective_settings(configured) is configured  # a configured cluster wins


def test_ask_console_audit_and_serve_get_the_completed_settings(monkeypatch):
    """The bot (bot/app.py make_context) no longer looks for the dev cluster: the command line hands
    every transport the configuration with it already added."""
    import bot.console
    import cli.main

    monkeypatch.setattr(cli.main, "effective_settings", lambda settings: settings.updated(kbot_bootstrap="found:9092"))
    seen: dict[str, str | None] = {}

    async def ask(text, as_json, png, settings, *, cluster=None):
        seen["ask" if not text.startswith("audit") else "audit"] = settings.kbot_bootstrap
        return 0

    monkeypatch.setattr(bot.console, "ask", ask)
    monkeypatch.setattr(
        bot.console,
        "console",
        lambda as_json, settings, *, cluster=None: seen.update(console=settings.kbot_bootstrap) or 0,
    )
    monkeypatch.setattr(cli.main, "run_serve", lambda args, settings: seen.update(serve=settings.kbot_bootstrap) or 0)
    monkeypatch.setattr(cli.main, "log_to_file", lambda *a: None)  # no handlers left on the root logger
    monkeypatch.setattr(cli.main, "log_to_screen", lambda *a: None)
    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    try:
        for argv in (["ask", "why", "URP"], ["audit"], ["console"], ["serve"]):
            assert cli.main.main(argv) == 0
    finally:
        kafka_log.setLevel(level)  # main() quiets kafka-python's logger for the process
    assert seen == {"ask": "found:9092", "audit": "found:9092", "console": "found:9092", "serve": "found:9092"}
