"""Prometheus and Alertmanager for the local loop: scrape the cluster's JMX exporters with the
shipped rules (deploy/prometheus/kafka-rules.yaml) and send the alerts to the bot's webhook.

`kbot run --alerts` and the end-to-end test start their OWN processes from the Debian packages
(`prometheus`, `prometheus-alertmanager`; scripts/setup.sh installs them), on free loopback ports,
with config and data folders of their own, and stop them on exit. A system service the package may
have started is left alone (it listens on 9090 / 9093; we never do).

The bearer token reaches Alertmanager as a 0600 credentials file (``http_config.authorization``),
never on a command line (where `ps` shows it) or in its main config file.
"""

from __future__ import annotations

import logging
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from gate.files import private_dir, private_file

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "kafka-rules.yaml"
PROMETHEUS, ALERTMANAGER = "prometheus", "prometheus-alertmanager"


class StackError(RuntimeError):
    """Prometheus or Alertmanager is missing or did not start; the message says which and why."""


@dataclass(frozen=True)
class Timing:
    """How quickly the loop reacts. The defaults are Prometheus's and Alertmanager's usual ones; the
    tests use seconds (and shorten the rules' ``for``) so an alert opens a thread within a minute."""

    scrape: str = "15s"
    scrape_timeout: str = "10s"
    evaluation: str = "15s"
    group_wait: str = "30s"
    group_interval: str = "1m"
    repeat_interval: str = "4h"
    rule_for: str | None = None  # None: the rules' own ``for``


# A JMX exporter page takes 1-2 s to render on a loaded machine: a 2 s scrape timeout turns load
# into "node down" alerts, so the test scrapes every 4 s and evaluates every 2 s.
FAST = Timing(
    scrape="4s",
    scrape_timeout="4s",
    evaluation="2s",
    group_wait="1s",
    group_interval="2s",
    repeat_interval="1h",
    rule_for="2s",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binaries() -> tuple[str, str]:
    found = shutil.which(PROMETHEUS), shutil.which(ALERTMANAGER) or shutil.which("alertmanager")
    if not all(found):
        missing = [n for n, f in zip((PROMETHEUS, ALERTMANAGER), found) if not f]
        raise StackError(
            f"{' and '.join(missing)} not installed: run scripts/setup.sh "
            "(Debian packages prometheus, prometheus-alertmanager)"
        )
    return found[0], found[1]


def _metric_names(rules: dict) -> set[str]:
    """The metric names the rules read, to keep only those from ~600 KB exporter pages."""
    import re

    names = set()
    for group in rules.get("groups", []):
        for rule in group.get("rules", []):
            names |= set(re.findall(r"\b(kafka_[a-z0-9_]+)", str(rule.get("expr", ""))))
    return names


@dataclass
class AlertStack:
    workdir: Path
    targets: dict[int, str]  # node id -> its exporter URL (LocalCluster.metrics_urls)
    webhook_url: str
    token: str = field(repr=False)
    cluster: str = "local"
    timing: Timing = Timing()
    rules_file: Path = RULES
    prometheus_port: int = 0
    alertmanager_port: int = 0
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    @property
    def alertmanager_url(self) -> str:
        return f"http://127.0.0.1:{self.alertmanager_port}"

    # ---- configuration ----
    def _rules(self) -> dict:
        rules = yaml.safe_load(self.rules_file.read_text())
        if self.timing.rule_for is not None:
            for group in rules.get("groups", []):
                for rule in group.get("rules", []):
                    if "for" in rule:
                        rule["for"] = self.timing.rule_for
        return rules

    def write_configs(self) -> None:
        private_dir(self.workdir)
        rules = self._rules()
        (self.workdir / "kafka-rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
        static = []
        for node, url in sorted(self.targets.items()):
            parts = urlsplit(url)
            static.append({"targets": [parts.netloc], "labels": {"node_id": str(node), "cluster": self.cluster}})
        paths = {urlsplit(url).path or "/metrics" for url in self.targets.values()}
        if len(paths) > 1:
            raise StackError(f"the exporters serve metrics under different paths ({', '.join(sorted(paths))})")
        path = paths.pop() if paths else "/metrics"
        keep = "|".join(sorted(_metric_names(rules))) or "kafka_.*"
        prometheus = {
            "global": {
                "scrape_interval": self.timing.scrape,
                "scrape_timeout": self.timing.scrape_timeout,
                "evaluation_interval": self.timing.evaluation,
            },
            "rule_files": [str(self.workdir / "kafka-rules.yaml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{self.alertmanager_port}"]}]}]},
            "scrape_configs": [
                {
                    "job_name": "kafka",
                    "metrics_path": path,
                    "static_configs": static,
                    # The rules read a few dozen series of the thousands an exporter page holds.
                    "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": keep, "action": "keep"}],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(prometheus, sort_keys=False))
        token_file = private_file(self.workdir / "webhook-token")
        token_file.write_text(self.token)
        alertmanager = {
            "route": {
                "receiver": "kbot",
                "group_by": ["alertname", "cluster"],
                "group_wait": self.timing.group_wait,
                "group_interval": self.timing.group_interval,
                "repeat_interval": self.timing.repeat_interval,
            },
            "receivers": [
                {
                    "name": "kbot",
                    "webhook_configs": [
                        {
                            "url": self.webhook_url,
                            "send_resolved": True,
                            "http_config": {"authorization": {"type": "Bearer", "credentials_file": str(token_file)}},
                        }
                    ],
                }
            ],
        }
        (self.workdir / "alertmanager.yml").write_text(yaml.safe_dump(alertmanager, sort_keys=False))

    # ---- processes ----
    def start(self, timeout_s: float = 60.0) -> "AlertStack":
        prometheus, alertmanager = binaries()
        self.prometheus_port = self.prometheus_port or free_port()
        self.alertmanager_port = self.alertmanager_port or free_port()
        self.write_configs()
        (self.workdir / "am-data").mkdir(exist_ok=True)
        (self.workdir / "prom-data").mkdir(exist_ok=True)
        try:
            self._spawn(
                "alertmanager",
                [
                    alertmanager,
                    f"--config.file={self.workdir / 'alertmanager.yml'}",
                    f"--storage.path={self.workdir / 'am-data'}",
                    f"--web.listen-address=127.0.0.1:{self.alertmanager_port}",
                    "--cluster.listen-address=",
                ],
            )  # no HA gossip port (9094) to clash on
            self._spawn(
                "prometheus",
                [
                    prometheus,
                    f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.workdir / 'prom-data'}",
                    f"--web.listen-address=127.0.0.1:{self.prometheus_port}",
                ],
            )
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, cmd: list[str]) -> None:
        logf = (self.workdir / f"{name}.log").open("ab")
        # Its own process group: a Ctrl-C in `kbot run` reaches us first, and we stop it in order.
        self.procs[name] = subprocess.Popen(
            cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        logf.close()

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = {"alertmanager": self.alertmanager_url + "/-/ready", "prometheus": self.prometheus_url + "/-/ready"}
        while pending:
            for name, url in list(pending.items()):
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise StackError(f"{name} exited with {proc.returncode}: {self._log_tail(name)}")
                try:
                    with urllib.request.urlopen(url, timeout=2) as r:
                        if r.status == 200:
                            del pending[name]
                except (urllib.error.URLError, OSError):
                    pass
            if pending and time.monotonic() > deadline:
                raise StackError(
                    f"{', '.join(pending)} not ready within {timeout_s:g} s: "
                    + "; ".join(self._log_tail(n) for n in pending)
                )
            if pending:
                time.sleep(0.3)

    def _log_tail(self, name: str) -> str:
        try:
            lines = (self.workdir / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return " | ".join(lines[-3:])[-600:] or "no output"

    def stop(self, grace_s: float = 10.0) -> None:
        for proc in list(self.procs.values()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in list(self.procs.items()):
            try:
                proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %g s; killing it", name, grace_s)
                proc.kill()
                proc.wait(5)
        self.procs.clear()

    def __enter__(self) -> "AlertStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def local_stack(state_dir: Path, targets_env: str, webhook_url: str, token: str, cluster: str = "local") -> AlertStack:
    """The stack `kbot run --alerts` starts: the exporters of KBOT_METRICS_TARGETS (``id=url,...``)."""
    targets = {}
    for item in filter(None, (p.strip() for p in targets_env.split(","))):
        node, _, url = item.partition("=")
        targets[int(node)] = url
    if not targets:
        raise StackError("no metrics targets (KBOT_METRICS_TARGETS) to scrape")
    return AlertStack(Path(state_dir) / "alerts-stack", targets, webhook_url, token, cluster=cluster)
