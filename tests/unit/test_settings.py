"""One configuration (issue 12): every variable the bot reads is a field of kbot_settings, a wrong
value gives one line naming it (never a traceback, never a secret), `kbot config` shows where each
value came from, and the README's table is the one the settings generate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kbot_settings import ENV_NAMES, SettingsError, describe, load, markdown_table

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "commands", "live", "lake", "runbook_kb", "spark_queries", "localkafka", "kbot_settings")
# read by the test harness and the failure lab, not by the bot
NOT_SETTINGS = re.compile(r"^KBOT_(TEST_|LAB_|REQUIRE_SEEDS$|UPDATE_GOLDEN$)")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_")) and k != "PORT"}
    return {**env, **extra}


def test_every_variable_the_code_reads_is_a_setting():
    read: dict[str, str] = {}
    for pkg in PRODUCT:
        for f in (ROOT / pkg).rglob("*.py"):
            for name in re.findall(r"[\"']((?:KBOT|SLACK)_[A-Z0-9_]+)[\"']", f.read_text()):
                if not NOT_SETTINGS.match(name):
                    read.setdefault(name, str(f.relative_to(ROOT)))
    missing = {n: where for n, where in read.items() if n not in ENV_NAMES}
    assert not missing, f"read by the code but not a field of kbot_settings: {missing}"


def test_the_readme_table_is_the_generated_one():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("<!-- settings-table:start -->\n", 1)[1].split("\n<!-- settings-table:end -->", 1)[0]
    assert table == markdown_table(), "README's configuration table is stale: paste `kbot config --markdown`"


def test_one_line_per_mistake_naming_the_variable_and_never_a_secret():
    with pytest.raises(SettingsError) as caught:
        load(
            {
                "KBOT_PORT": "abc",
                "KBOT_LAKE": "maybe",
                "KBOT_CONFIRM_TTL_S": "-5",
                "KBOT_SECURITY_PROTOCOL": "tls",
                "SLACK_BOT_TOKEN": "xoxb-fine",
            }
        )
    assert caught.value.lines == [
        "KBOT_SECURITY_PROTOCOL: must be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or 'SASL_SSL', not 'TLS'",
        "KBOT_PORT: must be a whole number, not 'abc'",
        "KBOT_CONFIRM_TTL_S: must be greater than 0, not '-5'",
        "KBOT_LAKE: must be 1/0, true/false or yes/no, not 'maybe'",
    ]
    assert all("xoxb" not in line for line in caught.value.lines)


def test_one_state_root_and_where_each_value_came_from():
    env = {"KBOT_HOME": "/srv/kbot", "PORT": "8080", "SLACK_BOT_TOKEN": "xoxb-123", "KBOT_LAKE": ""}
    s = load(env)
    assert (s.state_dir, s.lake_dir, s.clusters_file) == (
        Path("/srv/kbot"),
        Path("/srv/kbot/lake"),
        Path("/srv/kbot/clusters.yaml"),
    )
    assert s.kbot_port == 8080 and s.kbot_lake is None  # an empty variable is unset
    shown = {v.env: v for v in describe(s)}
    assert shown["KBOT_PORT"].source == "environment (PORT)" and shown["KBOT_PORT"].value == "8080"
    assert (
        shown["KBOT_LAKE_DIR"].source == "default (KBOT_HOME/lake)" and shown["KBOT_LAKE_DIR"].value == "/srv/kbot/lake"
    )
    assert shown["SLACK_BOT_TOKEN"].value == "(set, hidden)" and shown["SLACK_BOT_TOKEN"].secret
    assert shown["KBOT_SASL_PASSWORD"].value is None and shown["KBOT_LOG_LEVEL"].source == "default"


def _kbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_kbot_config_masks_secrets_and_a_wrong_value_stops_every_command_in_one_line(tmp_path):
    env = _clean_env(HOME=str(tmp_path), SLACK_SIGNING_SECRET="very-secret-value", KBOT_ADMIN_TIMEOUT_S="20")
    shown = _kbot("config", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    rows = {r["name"]: r for r in json.loads(shown.stdout)}
    assert rows["SLACK_SIGNING_SECRET"]["value"] == "(set, hidden)" and "very-secret-value" not in shown.stdout
    assert rows["KBOT_ADMIN_TIMEOUT_S"] == {
        "name": "KBOT_ADMIN_TIMEOUT_S",
        "value": "20.0",
        "source": "environment (KBOT_ADMIN_TIMEOUT_S)",
        "section": "Kafka cluster",
        "secret": False,
    }
    bad = _kbot("serve", "--check", env={**env, "KBOT_PORT": "abc"})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.splitlines()[0] == "kbot: configuration: KBOT_PORT: must be a whole number, not 'abc'"
