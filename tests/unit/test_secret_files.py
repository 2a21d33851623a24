"""Issue 37 item 8: a clusters.yaml that holds passwords and that others can read is warned about,
when the bot loads it and in `kbot config` (a separate process, as an operator runs it)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import yaml

from kbot_settings import load as load_settings
from live.config import load_clusters

ROOT = Path(__file__).resolve().parents[2]


def _clusters(tmp_path: Path, password: str, mode: int) -> Path:
    path = tmp_path / "clusters.yaml"
    entry = {
        "bootstrap": "127.0.0.1:1",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "kbot",
        "sasl_password": password,
        "operator": {"sasl_username": "kbot-operator", "sasl_password": "${KBOT_TEST_OPERATOR_PW}"},
    }
    path.write_text(yaml.safe_dump({"default": "prod", "clusters": {"prod": entry}}))
    path.chmod(mode)
    return path


def _kbot_config(path: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(KBOT_CLUSTERS_FILE=str(path), KBOT_HOME=str(tmp_path / "home"), KBOT_TEST_OPERATOR_PW="x")
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "config", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_passwords_in_a_clusters_file_others_can_read_are_warned_about(tmp_path, caplog):
    path = _clusters(tmp_path, "s3cret-literal", 0o644)
    caplog.set_level(logging.WARNING)
    settings = load_settings({"KBOT_CLUSTERS_FILE": str(path), "KBOT_TEST_OPERATOR_PW": "x"})
    assert set(load_clusters(settings)) == {"prod"}
    warned = [r.getMessage() for r in caplog.records if "clusters file" in r.getMessage()]
    assert len(warned) == 1, warned
    assert f"{path} holds passwords (prod.sasl_password)" in warned[0]  # ${VAR} is not in the file: not named
    assert "readable by its group and every user on this host (mode 0644)" in warned[0]
    assert f"chmod 600 {path}" in warned[0] and "s3cret-literal" not in warned[0]
    load_clusters(settings)  # loaded again (every request does): not said again
    assert len([r for r in caplog.records if "clusters file" in r.getMessage()]) == 1

    shown = _kbot_config(path, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"WARNING: {path} holds passwords (prod.sasl_password)" in shown.stdout
    assert "s3cret-literal" not in shown.stdout + shown.stderr
    rows = json.loads(_kbot_config(path, tmp_path, "--json").stdout)
    assert [r["value"] for r in rows if r["section"] == "Warnings"] == [warned[0].removeprefix("clusters file: ")]


def test_a_private_file_or_passwords_from_the_environment_draw_no_warning(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    private = _clusters(tmp_path, "s3cret-literal", 0o600)
    load_clusters(load_settings({"KBOT_CLUSTERS_FILE": str(private), "KBOT_TEST_OPERATOR_PW": "x"}))
    (tmp_path / "env").mkdir()
    by_reference = _clusters(tmp_path / "env", "${KBOT_TEST_OPERATOR_PW}", 0o644)
    load_clusters(load_settings({"KBOT_CLUSTERS_FILE": str(by_reference), "KBOT_TEST_OPERATOR_PW": "x"}))
    assert not [r for r in caplog.records if "clusters file" in r.getMessage()]
    assert "WARNING: " not in _kbot_config(by_reference, tmp_path).stdout
