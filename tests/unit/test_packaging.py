"""The files that ship the bot elsewhere: the Slack app manifest, the Dockerfile and the Procfile
stay in step with the code (docker itself does not run here, so these checks read the files)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_manifest_declares_the_command_and_the_scopes_the_code_calls():
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yaml").read_text())
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/kafka"]
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    source = "\n".join(p.read_text() for p in (ROOT / "bot").glob("*.py"))
    needed = {"commands", "app_mentions:read"}
    if re.search(r"chat_(postMessage|update|postEphemeral)|\"chat_update\"|delivery\.(post|update)", source):
        needed.add("chat:write")
    if "files_upload_v2" in source:
        needed.add("files:write")
    if "users_info" in source:
        needed.add("users:read")
    if "usergroups_users_list" in source:
        needed.add("usergroups:read")
    assert needed <= scopes, needed - scopes
    settings = manifest["settings"]
    assert settings["interactivity"]["request_url"].endswith("/slack/events")
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")


def test_dockerfile_installs_every_package_and_serves_with_a_health_check():
    docker = (ROOT / "Dockerfile").read_text()
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for pattern in include:
        package = pattern.rstrip("*")
        assert f"COPY {package} ./{package}" in docker, package
    assert "openjdk-17-jre-headless" in docker  # Spark needs a JRE
    assert 'CMD ["kbot", "serve"]' in docker and "/healthz" in docker
    assert "USER kbot" in docker


def test_procfile_runs_the_slack_app():
    assert (ROOT / "Procfile").read_text().strip() == "web: kbot serve"
