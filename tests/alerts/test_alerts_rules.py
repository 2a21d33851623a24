"""deploy/prometheus/kafka-rules.yaml: valid for Prometheus, consistent with the runbook's alert table,
every rule's symptom known to the runbook, every metric one the local cluster's exporters expose."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from bot.alerts_stack import RULES
from runbook_kb import default_kb
from runbook_kb.lookup import Lookup

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = ROOT / "runbook_kb" / "data" / "reference" / "signals.yaml"
NOT_FROM_BROKERS = {"kafka_consumergroup_lag"}  # kafka_exporter's (client-side lag), see the rules file


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_prometheus_accepts_the_rules():
    if shutil.which("promtool") is None:
        pytest.skip("promtool (Debian package prometheus) is not installed: run scripts/setup.sh")
    proc = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_severities_and_thresholds_follow_the_runbook_alert_table():
    table = yaml.safe_load(SIGNALS.read_text())["alerts"]
    checked = 0
    for rule in _rules():
        metric = rule["annotations"].get("kbot_metric")
        if metric is None:
            continue
        rows = [a for a in table if a["metric"] == metric]
        assert rows, f"{rule['alert']}: {metric} is not in the runbook's alert table"
        if len(rows) > 1:  # several thresholds for one metric (handler idle < 0.2 warning, < 0.1 critical)
            rows = [a for a in rows if any(n in rule["expr"] for n in re.findall(r"\d+\.\d+", a["condition"]))]
        assert len(rows) == 1, f"{rule['alert']}: cannot tell which runbook threshold it implements"
        assert rule["labels"]["severity"] == rows[0]["severity"], (
            f"{rule['alert']}: severity disagrees with the runbook"
        )
        checked += 1
    assert checked >= 12


def test_every_rule_names_a_symptom_the_runbook_knows():
    lookup = Lookup.for_kb(default_kb())
    for rule in _rules():
        symptom = rule["annotations"]["kbot_symptom"]
        matches = lookup.search(symptom, limit=1)
        assert matches and not matches[0].reason.startswith("words"), (
            f"{rule['alert']}: '{symptom}' has no runbook entry"
        )
        assert rule["annotations"]["summary"]


@pytest.mark.kafka
def test_every_metric_the_rules_read_is_exposed_by_the_local_cluster(kafka_cluster):
    kafka_cluster.faults.create_topic("rules-check", partitions=1, replication_factor=3)  # per-partition series exist
    exposed = set()
    for url in kafka_cluster.metrics_urls.values():
        with urllib.request.urlopen(url, timeout=30) as r:
            exposed |= set(re.findall(r"^([a-z_0-9]+)[{ ]", r.read().decode(), re.M))
    used = {m for r in _rules() for m in re.findall(r"\b(kafka_[a-z0-9_]+)", r["expr"])}
    missing = used - exposed - NOT_FROM_BROKERS
    assert not missing, f"the rules read metrics the exporters do not have: {sorted(missing)}"
