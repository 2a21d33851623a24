"""`kbot run`: the main job on the embedded default.

1. Kafka: the configured cluster, or, when none is configured, the local one (`kbot cluster up`:
   a real KRaft cluster from Maven Central jars on 127.0.0.1), left running on exit so the next
   start is quick (`kbot cluster down` stops it).
2. The metric lake: collection from the cluster's metrics endpoints into the local lake, and a
   warm Spark session for the history queries (when the lake is available).
3. The Slack app when Slack tokens are set, else the terminal console.
4. With --alerts: Prometheus and Alertmanager (Debian packages) on loopback, scraping the cluster's
   exporters with deploy/prometheus/kafka-rules.yaml and sending alerts to the Slack app's webhook,
   which opens one diagnosed thread per alert group (bot/alerts.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import threading
import time

from bot.alertmanager import CHANNEL_ENV, PATH, ROUTES_ENV, AlertConfig
from bot.alerts_stack import RULES, StackError, local_stack
from bot.app import cluster_configured, local_settings, log_principals_audit
from bot.slack_app import configured
from bot.slack_app import run as run_serve
from bot.slack_settings import SlackSettings
from cli.dev_cluster import DEV, effective_settings
from cli.startup import FAILED, OFF, STARTING, UP, Startup
from framework.context import Context
from gate.files import private_dir, private_file
from kbot_settings import KbotSettings
from lake.connect import stop_server
from lake.errors import LakeError
from localkafka.cluster import LocalCluster


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run",
        help="run the bot on the embedded default (local cluster, lake, Slack app or console)",
        description=__doc__.split("\n\n")[0] + " Starts the local Kafka cluster when no cluster is configured, "
        "collects metrics into the lake, and serves Slack when tokens are set (else the console).",
    )
    p.add_argument("--no-cluster", action="store_true", help="do not start the local cluster when none is configured")
    p.add_argument("--no-lake", action="store_true", help="do not collect metrics or start Spark")
    p.add_argument("--json", action="store_true", help="console answers as JSON")
    p.add_argument(
        "--alerts",
        action="store_true",
        help="also run Prometheus and Alertmanager on loopback with the shipped Kafka rules; alerts open "
        "threads in Slack (KBOT_ALERT_CHANNEL, default #kafka-alerts; needs the Slack app)",
    )
    return p


# the parts of the start-up (the status line's names)
CLUSTER, SPARK, COLLECTOR = "cluster", "Spark", "collector"
# how long the local cluster may take to serve (every step: storage format, JVM starts, registration)
CLUSTER_START_S = 300.0


def _say(message: str) -> None:
    print(f"kbot: {message}", file=sys.stderr, flush=True)


def local_cluster_settings(settings: KbotSettings, startup: Startup) -> tuple[KbotSettings, LocalCluster]:
    """The settings pointed at the local dev cluster, and that cluster; says truly whether its JVMs
    were found running or are being started (the start itself runs behind the prompt)."""
    cluster = LocalCluster.named(DEV)
    running = cluster.running_nodes()
    if len(running) == len(cluster.nodes):
        startup.set(
            CLUSTER, STARTING, f"local cluster found running at {cluster.bootstrap_servers}; checking it serves"
        )
    elif running:
        startup.set(
            CLUSTER,
            STARTING,
            f"local cluster partly running (nodes {', '.join(map(str, running))}): starting the others in the background",
        )
    else:
        startup.set(
            CLUSTER,
            STARTING,
            "no Kafka cluster configured: starting the local one in the background (the first start downloads "
            "the Kafka jars)",
        )
    return local_settings(settings, cluster), cluster


def bring_up_cluster(cluster: LocalCluster, startup: Startup, timeout: float = CLUSTER_START_S) -> None:
    """The local cluster up (brokers serving; metrics endpoints reported, never awaited)."""

    def progress(message: str) -> None:
        startup.set(CLUSTER, STARTING, message, announce=False)

    t0 = time.monotonic()
    try:
        cluster.up(timeout=timeout, progress=progress, metrics=False)
    except Exception as exc:  # the run goes on: answers say what they could not reach
        _cluster_started(startup, cluster, t0, failed=" ".join(str(exc).split()))
        return
    _cluster_started(startup, cluster, t0, silent=[str(i) for i, ok in cluster.metrics_answering().items() if not ok])


def _cluster_started(
    startup: Startup, cluster: LocalCluster, t0: float, *, failed: str | None = None, silent: list[str] | None = None
) -> None:
    """The start-up line of the cluster: serving (with the metrics endpoints not answering yet), or why not."""
    if failed is not None:
        startup.set(
            CLUSTER,
            FAILED,
            f"the local cluster is not serving ({failed[:300]}); live answers say what they cannot reach, "
            "runbook answers work; `kbot cluster status` shows the nodes",
        )
        return
    metrics = (
        "all metrics endpoints answer"
        if not silent
        else f"metrics endpoints of node(s) {', '.join(silent)} not answering yet (the collector retries them)"
    )
    startup.set(
        CLUSTER,
        UP,
        f"local cluster serving at {cluster.bootstrap_servers} after {time.monotonic() - t0:.0f}s; {metrics}",
    )


def cluster_up_in_child(cluster: LocalCluster, startup: Startup, settings: KbotSettings) -> None:
    """The local cluster up in a child process (`kbot cluster up`), watched from a daemon thread:
    an `exit` while it starts neither waits for it nor cuts a Kafka client off in mid-call (the
    child goes on, in a session of its own, and its JVMs are detached anyway)."""
    cmd = [sys.executable, "-m", "localkafka", "up", "--json", "--name", cluster.name]
    cmd += ["--base-dir", str(cluster.base_dir), "--port-base", str(cluster.port_base)]
    cmd += ["--timeout", f"{CLUSTER_START_S:g}"]
    t0 = time.monotonic()
    child = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=settings.child_environ(),
        start_new_session=True,  # Ctrl-C at the console does not stop the cluster's start
    )
    out, err = child.communicate()
    try:
        st = json.loads(out) if child.returncode == 0 else None
    except ValueError:
        st = None
    if st is None:
        why = (err.strip().splitlines() or [f"exit {child.returncode}"])[-1].removeprefix("error: ")
        _cluster_started(startup, cluster, t0, failed=why)
        return
    _cluster_started(startup, cluster, t0, silent=[str(i) for i, ok in (st.get("metrics") or {}).items() if not ok])


def start_collection(settings: KbotSettings) -> subprocess.Popen | None:
    """Collect the cluster's metrics into the lake in a child process (a round every 10 s, each
    landing file ingested as soon as it is written: a sample is queryable seconds after its
    scrape), logging to the state dir; stopped when the bot exits. The child gets this run's
    settings as its environment (KbotSettings.child_environ)."""
    if settings.kbot_metrics_source == "exporters" and not settings.kbot_metrics_targets:
        return None

    # The state folder also holds confirm tokens and the audit trail: 0700, and the log 0600.
    state = private_dir(settings.state_dir)
    log = private_file(state / "collector.log").open("a")
    cmd = [sys.executable, "-m", "cli.main", "lake", "collect", "--interval", "10", "--ingest-follow"]
    child = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=settings.child_environ()
    )
    return child


def run(args, settings: KbotSettings) -> int:
    # This run's configuration: the settings the command line loaded plus what the run itself
    # decides (the embedded cluster, the lake on), copies handed down explicitly. The prompt comes
    # first: the cluster, the Spark server and the collector start behind it (cli/startup.py).
    startup = Startup(_say)
    cluster = None
    if not cluster_configured(settings) and not args.no_cluster:
        settings, cluster = local_cluster_settings(settings, startup)
    settings = effective_settings(settings)  # --no-cluster: a dev cluster that runs is still used
    if getattr(args, "alerts", False):
        # the alert stack scrapes the exporters: it needs the cluster first (not the console's path)
        if cluster is not None:
            bring_up_cluster(cluster, startup)
            cluster = None
        try:
            stack, settings = start_alert_stack(settings)
        except ValueError as exc:  # AlertConfigError: the alert configuration is wrong, one line
            _say(f"--alerts: {exc}")
            return 2
    else:
        stack = None
    # daemon threads: `exit` does not wait for a start still under way (the JVMs it launched are
    # detached and keep starting; `kbot cluster status` shows them)
    if cluster is not None:
        _background(cluster_up_in_child, cluster, startup, settings)
    lake = LakeStart(settings, startup, enabled=not args.no_lake)
    if not args.no_lake:
        _background(lake.bring_up)
    try:
        return _serve_or_console(args, settings, startup, lake)
    finally:
        startup.close()  # what the start threads still find out is not said after the exit
        lake.stop()
        if stack is not None:
            stack.stop()
        _say_what_keeps_running(settings, cluster is not None or _is_dev(settings), lake)


def _background(target, *args) -> None:
    threading.Thread(target=target, args=args, name="kbot-start", daemon=True).start()


async def audit_principals_once_live(ctx: Context, startup: Startup) -> None:
    """The one log line of the bot's audit of its own principals (bot.app), once the cluster's
    start is over (the console path; the Slack app logs its own)."""
    while startup.state(CLUSTER) == STARTING:
        await asyncio.sleep(1)
    if ctx.live is None:
        return
    try:
        await log_principals_audit(ctx)
    except Exception:  # noqa: BLE001 - the audit is a log line; the answers say what the cluster lacks
        logging.getLogger("kbot.principals").warning("principals audit at start failed", exc_info=True)


def _is_dev(settings: KbotSettings) -> bool:
    return settings.kbot_bootstrap is not None and settings.kbot_bootstrap == LocalCluster.named(DEV).bootstrap_servers


def _say_what_keeps_running(settings: KbotSettings, dev: bool, lake: LakeStart) -> None:
    """At exit: what this run leaves running, and the command that stops each."""
    if dev:
        running = LocalCluster.named(DEV).running_nodes()
        if running:
            _say(
                f"the local cluster keeps running ({len(running)} JVMs: nodes {', '.join(map(str, running))} at "
                f"{settings.kbot_bootstrap}) for a quick next start: `kbot cluster down` stops it"
            )
    if lake.server_kept:
        _say(
            "the lake's Spark server keeps running (it was running before this run): `kbot lake serve --stop` stops it"
        )
    elif lake.enabled and lake.startup.state(SPARK) == STARTING:
        # its start runs on in a process of its own: it may come up after this run has ended
        _say(
            "the lake's Spark server was still starting: it may keep running "
            "(`kbot lake serve --status` tells, `kbot lake serve --stop` stops it)"
        )


class LakeStart:
    """The lake behind the prompt: the Spark Connect server, then the collector; the console's
    context gets the lake once the server answers (an earlier lake would start a second, in-process
    Spark beside the server)."""

    def __init__(self, settings: KbotSettings, startup: Startup, *, enabled: bool):
        self.settings = settings if not enabled or settings.kbot_lake is not None else settings.updated(kbot_lake=True)
        self.startup = startup
        self.enabled = enabled
        self.connect = None
        self.collector: subprocess.Popen | None = None
        self.server_kept = False
        self._lake = None
        self._lock = threading.Lock()
        self._stopping = False
        if enabled:
            startup.set(SPARK, STARTING, "starting the lake's Spark server in the background", announce=False)
        else:
            startup.set(SPARK, OFF, "the lake is off (--no-lake)", announce=False)

    def bring_up(self) -> None:
        self.connect = start_connect_server(self.settings, self.startup)
        if self.connect is not None and not self.connect.started:
            self.server_kept = True
        if self._stopping:
            return
        try:
            self.collector = start_collection(self.settings)
        except OSError as exc:
            self.startup.set(COLLECTOR, FAILED, f"the collector did not start: {exc}")
            return
        if self.collector is None:
            self.startup.set(
                COLLECTOR,
                OFF,
                "no metrics targets (KBOT_METRICS_TARGETS, or KBOT_METRICS_SOURCE=prometheus with "
                "KBOT_PROMETHEUS_URL): not collecting into the lake",
            )
        else:
            log = self.settings.state_dir / "collector.log"
            self.startup.set(
                COLLECTOR,
                UP,
                f"collecting metrics into the lake, retrying each target that does not answer (log: {log})",
            )

    def console_settings(self) -> KbotSettings:
        """The settings the console's and the socket's contexts start with: no lake of their own;
        attach() gives them the one lake once the Spark server is up (a lake made earlier would
        start a second, in-process Spark beside the server)."""
        return self.settings.updated(kbot_lake=False) if self.enabled else self.settings

    def attach(self, ctx) -> None:
        """Give a context (the console's, the one-shot socket's) the lake once the Spark server is up
        (or failed: the lake then runs Spark in-process, as without a server): one lake for all."""
        if not self.enabled or ctx.lake is not None or self.startup.state(SPARK) == STARTING:
            return
        with self._lock:
            if self._lake is None:
                from lake.service import lake_from_settings

                self._lake = lake_from_settings(self.settings, spark_log=self.settings.spark_log)
        ctx.lake = self._lake
        ctx.settings = self.settings

    def stop(self) -> None:
        self._stopping = True
        if self.collector is not None:
            stop_collection(self.collector)
        _stop_spark(self.connect, self.settings)


def _stop_spark(connect, settings: KbotSettings) -> None:
    """Stop the Spark Connect server this run started (one that was already running stays)."""
    if connect is not None and connect.started:
        _say("stopping the lake's Spark server")
        stop_server(settings)


# How long the collector may take at exit to ingest its last files and write the pending
# rollups (the open hour's row): one ingest and one rollup run, slower on a loaded machine.
COLLECTOR_STOP_S = 120.0


def stop_collection(collector: subprocess.Popen, wait_s: float = COLLECTOR_STOP_S) -> None:
    """SIGTERM the collector and give it time to flush into the lake (lake.cli handles SIGTERM
    like Ctrl-C). A second Ctrl-C, or running out of time, kills it: what it had not ingested stays
    in landing and rollups.pending for the next run."""
    if collector.poll() is not None:
        return
    collector.terminate()
    try:
        try:
            collector.wait(2)
        except subprocess.TimeoutExpired:
            _say(f"writing the last samples into the lake (up to {wait_s:.0f}s; Ctrl-C to skip, nothing is lost)")
            collector.wait(wait_s)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # never let it stop the rest of the shutdown
        collector.kill()
        collector.wait()


def start_connect_server(settings: KbotSettings, startup: Startup):
    """A Spark Connect server for the lake, kept warm for every bot process - `kbot ask` in another
    terminal, the console, the Slack app (docs/lake-connect.md). None when KBOT_SPARK_MASTER picks
    another Spark, or when it cannot start (the lake then runs Spark in-process)."""
    if settings.kbot_spark_master:
        startup.set(SPARK, UP, f"the lake uses KBOT_SPARK_MASTER={settings.kbot_spark_master}")
        return None
    from lake.service import ensure_server

    try:
        info = ensure_server(settings)
    except LakeError as exc:
        startup.set(
            SPARK,
            FAILED,
            f"Spark Connect server not started ({' '.join(str(exc).split())[:300]}); the lake uses an in-process Spark",
        )
        return None
    startup.set(
        SPARK, UP, f"Spark kept warm at {info.url} ({'started' if info.started else 'found running'}; log {info.log})"
    )
    return info


def _serve_or_console(args, settings: KbotSettings, startup: Startup, lake: LakeStart) -> int:
    from bot.ask_server import serve_in_background

    if configured(settings):
        # the Slack app takes its lake from its settings at start: it waits for the Spark server
        # (the cluster still comes up behind it); one-shot asks are served by the Slack app's own
        startup.wait(SPARK, timeout=300)
        return run_serve(args, lake.settings)
    from bot.console import console

    _say("no Slack tokens set (SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET or SLACK_APP_TOKEN): starting the console")
    startup.before_question.append(lake.attach)
    asker = serve_in_background(
        lake.console_settings(), startup.prepare, at_start=lambda ctx: audit_principals_once_live(ctx, startup)
    )
    try:
        return console(args.json, lake.console_settings(), startup=startup)
    finally:
        asker.stop()


def start_alert_stack(settings: KbotSettings):
    """Prometheus + Alertmanager for `kbot run --alerts`: (the stack, or None and why on stderr when
    it cannot run; the run's settings with the webhook's token and channel). The webhook token is
    made up for this run unless KBOT_ALERT_TOKEN is set; Alertmanager reads it from a 0600 file.
    Raises AlertConfigError when KBOT_ALERT_ROUTES / KBOT_ALERT_CHANNEL are wrong."""
    import secrets

    if not configured(settings):
        _say(
            "--alerts: alerts open threads in Slack, and no Slack tokens are set (SLACK_BOT_TOKEN with "
            "SLACK_SIGNING_SECRET or SLACK_APP_TOKEN): not starting Prometheus and Alertmanager"
        )
        return None, settings
    targets = settings.kbot_metrics_targets
    if not targets:
        _say("--alerts: no metrics targets (KBOT_METRICS_TARGETS) to scrape: not starting Prometheus and Alertmanager")
        return None, settings
    if settings.kbot_alert_token is None:  # the Slack app below reads it from the settings too
        settings = settings.updated(kbot_alert_token=secrets.token_urlsafe(32))
    if not settings.kbot_alert_routes and not (settings.kbot_alert_channel or "").strip():
        settings = settings.updated(kbot_alert_channel="#kafka-alerts")
        _say(f"--alerts: alert threads go to #kafka-alerts (set {CHANNEL_ENV} or {ROUTES_ENV} to choose)")
    AlertConfig.from_settings(settings)  # a wrong routes file stops here, before anything starts
    slack = SlackSettings.from_settings(settings)
    token = settings.kbot_alert_token
    assert token is not None
    stack = local_stack(
        slack.state_dir,
        targets,
        f"http://127.0.0.1:{slack.port}{PATH}",
        token.get_secret_value(),
        cluster=settings.kbot_cluster_name or "local",
    )
    try:
        stack.start()
    except StackError as exc:
        _say(f"--alerts: {exc}")
        return None, settings
    _say(
        f"Prometheus on {stack.prometheus_url} (rules: {RULES}), Alertmanager on {stack.alertmanager_url}, "
        f"alerts to the bot's {PATH}"
    )
    return stack, settings
