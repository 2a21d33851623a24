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
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from bot.alertmanager import CHANNEL_ENV, PATH, ROUTES_ENV, AlertConfig
from bot.alerts_stack import RULES, StackError, local_stack
from bot.app import cluster_configured, local_settings, log_principals_audit
from bot.slack_app import configured
from bot.slack_app import run as run_serve
from bot.slack_settings import SlackSettings
from cli.dev_cluster import DEV, effective_settings
from framework.context import Context
from gate.files import private_dir, private_file
from kbot_settings import KbotSettings
from lake.connect import stop_server
from lake.errors import LakeError
from live.pool import GatewayPool
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


def _say(message: str) -> None:
    print(f"kbot: {message}", file=sys.stderr, flush=True)


def embedded_cluster(settings: KbotSettings) -> KbotSettings:
    """Start (or reuse) the local cluster; return the settings pointed at it."""

    cluster = LocalCluster(name=DEV)
    _say("no Kafka cluster configured: starting the local one (the first start downloads the Kafka jars)")
    cluster.up(timeout=300, progress=_say)
    _say(f"local cluster up at {cluster.bootstrap_servers} (stop it with `kbot cluster down`)")
    return local_settings(settings, cluster)


def start_collection(settings: KbotSettings) -> subprocess.Popen | None:
    """Collect the cluster's metrics into the lake in a child process (a round every 10 s, each
    landing file ingested as soon as it is written: a sample is queryable seconds after its
    scrape), logging to the state dir; stopped when the bot exits. The child gets this run's
    settings as its environment (KbotSettings.child_environ)."""
    if settings.kbot_metrics_source == "exporters" and not settings.kbot_metrics_targets:
        _say(
            "no metrics targets (KBOT_METRICS_TARGETS, or KBOT_METRICS_SOURCE=prometheus with KBOT_PROMETHEUS_URL): "
            "not collecting into the lake"
        )
        return None

    # The state folder also holds confirm tokens and the audit trail: 0700, and the log 0600.
    state = private_dir(settings.state_dir)
    log = private_file(state / "collector.log").open("a")
    cmd = [sys.executable, "-m", "cli.main", "lake", "collect", "--interval", "10", "--ingest-follow"]
    child = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=settings.child_environ()
    )
    _say(f"collecting metrics into the lake (log: {state / 'collector.log'})")
    return child


def run(args, settings: KbotSettings) -> int:
    # This run's configuration: the settings the command line loaded plus what the run itself
    # decides (the embedded cluster, the lake on), copies handed down explicitly.
    local = False
    spark = None
    if not args.no_lake:
        if settings.kbot_lake is None:
            settings = settings.updated(kbot_lake=True)
        # Spark's server starts while the cluster does (it needs none of the cluster's settings):
        # the prompt waits for the slower of the two, not for both in a row.
        spark = ThreadPoolExecutor(1, thread_name_prefix="spark-start").submit(start_connect_server, settings)
    if not cluster_configured(settings) and not args.no_cluster:
        try:
            settings = embedded_cluster(settings)
            local = True
        except Exception as exc:  # the run goes on: runbook answers need no cluster
            _say(
                f"could not start the local cluster ({' '.join(str(exc).split())[:300]}); answering from the runbook only"
            )
    collector = stack = None
    if getattr(args, "alerts", False):
        try:
            stack, settings = start_alert_stack(settings)
        except ValueError as exc:  # AlertConfigError: the alert configuration is wrong, one line
            _say(f"--alerts: {exc}")
            _stop_spark(spark.result() if spark is not None else None, settings)
            return 2
    connect = None
    if spark is not None:
        connect = spark.result()
        collector = start_collection(settings)
    log_principals(settings)
    try:
        return _serve_or_console(args, settings)
    finally:
        if collector is not None:
            stop_collection(collector)
        _stop_spark(connect, settings)
        if stack is not None:
            stack.stop()
        if local:  # kept for the next run (a warm start); say so, and how to stop it
            _say(f"the local cluster keeps running at {settings.kbot_bootstrap}: `kbot cluster down` stops it")


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


def start_connect_server(settings: KbotSettings):
    """A Spark Connect server for the lake, kept warm for every bot process - `kbot ask` in another
    terminal, the console, the Slack app (docs/lake-connect.md). None when KBOT_SPARK_MASTER picks
    another Spark, or when it cannot start (the lake then runs Spark in-process)."""
    if settings.kbot_spark_master:
        return None
    from lake.service import ensure_server

    try:
        info = ensure_server(settings)
    except LakeError as exc:
        _say(
            f"Spark Connect server not started ({' '.join(str(exc).split())[:300]}); the lake uses an in-process Spark"
        )
        return None
    _say(f"Spark kept warm at {info.url} ({'started' if info.started else 'already running'}; log {info.log})")
    return info


def log_principals(settings: KbotSettings) -> None:
    """One log line at start: the bot's audit of its own Kafka principals (bot.app)."""
    if not cluster_configured(settings):
        return

    async def once() -> None:
        pool = GatewayPool(settings)
        try:
            await log_principals_audit(Context(live=pool, settings=settings))
        finally:
            await pool.close()

    asyncio.run(once())


def _serve_or_console(args, settings: KbotSettings) -> int:
    # with --no-cluster the bot still finds a dev cluster that is running, as `kbot ask` does
    settings = effective_settings(settings)
    if configured(settings):
        return run_serve(args, settings)
    from bot.console import console

    _say("no Slack tokens set (SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET or SLACK_APP_TOKEN): starting the console")
    return console(args.json, settings)


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
