"""`kbot serve` checks the alert configuration before it starts; `kbot run --alerts` starts Prometheus
and Alertmanager wired to the bot's webhook (the real processes, on loopback), and stops them."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from waiting import wait_until

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[2]
SLACK_ENV = {
    "SLACK_BOT_TOKEN": "xoxb-1111-2222-standinbottoken",
    "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
}


def _serve_check(tmp_path, extra: dict, *flags: str):
    env = {**os.environ, **SLACK_ENV, "KBOT_STATE_DIR": str(tmp_path), **extra}
    env.pop("SLACK_APP_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "serve", "--check", *flags],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_refuses_a_broken_routes_file_with_one_line(tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text("routes:\n  - match: {severity: critical}\n    channel: not a channel\n")
    proc = _serve_check(tmp_path, {"KBOT_ALERT_TOKEN": "secret-alert-token", "KBOT_ALERT_ROUTES": str(routes)})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "routes[0].channel" in lines[0] and str(routes) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "secret-alert-token" not in proc.stderr + proc.stdout


def test_serve_check_reports_the_alert_webhook(tmp_path):
    routes = tmp_path / "routes.yaml"
    routes.write_text("routes:\n  - match: {severity: critical}\n    channel: C0INC\ndefault_channel: C0ALERTS\n")
    proc = _serve_check(tmp_path, {"KBOT_ALERT_TOKEN": "t0k", "KBOT_ALERT_ROUTES": str(routes)}, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["alerts"] == {"configured": True, "routes": 1, "default_channel": "C0ALERTS"}


def test_run_alerts_without_slack_says_why_and_starts_nothing(monkeypatch, capsys):
    from cli import run

    env = {
        k: v for k, v in os.environ.items() if k not in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN")
    }
    stack, _settings = run.start_alert_stack(load_settings(env))
    assert stack is None
    assert "no Slack tokens are set" in capsys.readouterr().err


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.kafka
def test_run_alerts_starts_prometheus_and_alertmanager_wired_to_the_webhook(kafka_cluster, monkeypatch, tmp_path):
    if shutil.which("prometheus") is None or shutil.which("prometheus-alertmanager") is None:
        pytest.skip("prometheus / prometheus-alertmanager not installed: run scripts/setup.sh")
    from bot.alerts_stack import free_port
    from cli import run

    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KBOT_ALERT_TOKEN", "KBOT_ALERT_ROUTES", "KBOT_ALERT_CHANNEL", "SLACK_APP_TOKEN")
    }
    env.update(
        {
            **SLACK_ENV,
            "KBOT_STATE_DIR": str(tmp_path),
            "KBOT_PORT": str(port),
            "KBOT_METRICS_TARGETS": ",".join(f"{n}={u}" for n, u in kafka_cluster.metrics_urls.items()),
        }
    )
    stack, settings = run.start_alert_stack(load_settings(env))
    assert stack is not None
    try:
        # made up for this run, handed on in the run's settings (not os.environ)
        assert settings.kbot_alert_token is not None
        token = settings.kbot_alert_token.get_secret_value()
        assert len(token) >= 32 and settings.kbot_alert_channel == "#kafka-alerts"
        assert "KBOT_ALERT_TOKEN" not in os.environ
        am = yaml.safe_load((stack.workdir / "alertmanager.yml").read_text())
        hook = am["receivers"][0]["webhook_configs"][0]
        assert hook["url"] == f"http://127.0.0.1:{port}/alerts/alertmanager"
        token_file = Path(hook["http_config"]["authorization"]["credentials_file"])
        assert token_file.read_text() == token and stat.S_IMODE(token_file.stat().st_mode) == 0o600
        for name in ("alertmanager.yml", "prometheus.yml"):
            assert token not in (stack.workdir / name).read_text()
        for proc in stack.procs.values():
            assert token not in Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace")
        rules = _get_json(stack.prometheus_url + "/api/v1/rules")["data"]["groups"]
        assert sum(len(g["rules"]) for g in rules) == 15
        seen: list = []

        def scraping_every_node() -> list | None:
            seen[:] = targets = _get_json(stack.prometheus_url + "/api/v1/targets")["data"]["activeTargets"]
            every = len(targets) == len(kafka_cluster.metrics_urls) and all(t["health"] == "up" for t in targets)
            return targets if every else None

        targets = wait_until(
            scraping_every_node, 90, "Prometheus to scrape every node", interval=1, detail=lambda: f"targets: {seen}"
        )
        assert {t["labels"]["node_id"] for t in targets} == {str(n) for n in kafka_cluster.metrics_urls}
        assert _get_json(stack.alertmanager_url + "/api/v2/status")["cluster"]["status"] == "disabled"
        pids = [p.pid for p in stack.procs.values()]
    finally:
        stack.stop()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
