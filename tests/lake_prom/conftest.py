"""A real Prometheus (the Debian binary, started by the product's own launcher,
bot/alerts_stack.AlertStack) scraping the shared test cluster's JMX exporters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from promkit import TIMING

from bot.alerts_stack import PROMETHEUS, AlertStack
from lake.mapping import SAMPLES


class LakePrometheus(AlertStack):
    """The launcher's stack, keeping the series the lake maps as well as the ones its rules read:
    its scrape config drops every other name (metric_relabel_configs keep)."""

    def write_configs(self) -> None:
        super().write_configs()
        path = self.workdir / "prometheus.yml"
        config = yaml.safe_load(path.read_text())
        for job in config["scrape_configs"]:
            for relabel in job.get("metric_relabel_configs", []):
                if relabel.get("action") == "keep":
                    relabel["regex"] = "|".join([relabel["regex"], *sorted(SAMPLES)])
        path.write_text(yaml.safe_dump(config, sort_keys=False))


@pytest.fixture
def prometheus_stack(kafka_cluster, tmp_path: Path):
    if shutil.which(PROMETHEUS) is None:
        pytest.skip("/usr/bin/prometheus is not installed (scripts/setup.sh installs the Debian package)")
    if shutil.which("prometheus-alertmanager") is None and shutil.which("alertmanager") is None:
        pytest.skip("prometheus-alertmanager is not installed (the launcher starts it with Prometheus)")
    # Alertmanager's webhook points at a port nothing listens on: these tests read no alerts.
    stack = LakePrometheus(
        tmp_path / "stack",
        dict(kafka_cluster.metrics_urls),
        "http://127.0.0.1:9/unused",
        "unused-token",
        cluster="pytest",
        timing=TIMING,
    )
    stack.start(timeout_s=120)
    try:
        yield stack
    finally:
        stack.stop()
