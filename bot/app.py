"""The bot's assembly for a process: the Context its commands get, from the configuration it is handed.

Used by every transport (the terminal in bot/console.py, the Slack app in bot/slack_app.py, the
failure lab); nothing here parses arguments or prints. Everything here takes the settings the
process loaded once at its edge (kbot_settings.load) and never reads the environment itself. Which
cluster a process talks to when none is configured is the command line's call (cli/dev_cluster.py),
not the bot's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.slack_settings import SlackSettings
from diagnosis.principals import startup_line
from framework.context import Context
from kbot_settings import KbotSettings
from lake.connect import running_url
from live.config import ConfigError, load_config
from live.pool import GatewayPool
from runbook_kb import default_kb


def local_settings(settings: KbotSettings, cluster, name: str = "local") -> KbotSettings:
    """``settings`` pointed at a local cluster (its brokers and exporters), replaced on a copy (the
    same environment snapshot otherwise); ``cluster``: any object with localkafka's LocalCluster's
    bootstrap_servers, brokers and metrics_urls."""
    return settings.updated(
        kbot_bootstrap=cluster.bootstrap_servers,
        kbot_cluster_name=name,
        kbot_expected_brokers=",".join(str(b) for b in cluster.brokers),
        kbot_metrics_targets=",".join(f"{nid}={url}" for nid, url in cluster.metrics_urls.items()),
    )


def cluster_configured(settings: KbotSettings) -> bool:

    try:
        clusters, _default = load_config(settings)
    except ConfigError:
        return True  # configured, if wrongly: the commands will say what is wrong
    return bool(clusters)


def make_context(
    settings: KbotSettings,
    lake: bool = True,
    progress: Callable[[str], Awaitable[None]] | None = None,
    *,
    spark_log: Path | None = None,
) -> Context:
    """The bot's context from the process's settings (loaded once, at its edge; every component
    gets this one object): the packaged KB, the live cluster and the metric lake when configured.
    ``lake=False`` (one-shot `kbot ask`) skips Spark unless KBOT_LAKE=1 asks for it: a cold Spark
    start costs seconds that a single question should not pay. ``spark_log``: where an in-process
    Spark's start-up output goes (the console's, so it does not land over the prompt)."""
    from bot.gate_setup import default_gate
    from lake.service import lake_from_settings

    pool = GatewayPool(settings)
    flag = settings.kbot_lake
    want_lake = lake or flag is True
    if not want_lake and flag is not False:
        # a one-shot `kbot ask` pays no cold Spark start when `kbot run` keeps a server warm

        want_lake = running_url(settings) is not None
    ctx = Context(
        kb=default_kb(),
        live=pool if pool.configured() else None,
        gate=default_gate(SlackSettings.from_settings(settings)),
        # a one-shot ask does not warm an in-process Spark up first: its own question is the first
        # query, and a warm-up would push a cold start past the lake's 30 s timeout (figures in
        # docs/lake-connect.md)
        lake=lake_from_settings(settings, warm=None if lake else False, spark_log=spark_log) if want_lake else None,
        settings=settings,
    )
    if progress is not None:
        ctx.progress = progress
    return ctx


_PRINCIPALS_LOGGED = False


async def log_principals_audit(ctx: Context) -> None:
    """At bot start, once per process: one log line with the verdict of the bot's audit of its own
    Kafka principals (diagnosis/principals.py): WARNING when it flags anything, else INFO."""
    global _PRINCIPALS_LOGGED
    if _PRINCIPALS_LOGGED or ctx.live is None:
        return
    _PRINCIPALS_LOGGED = True
    import logging

    level, line = await startup_line(ctx)
    logging.getLogger("kbot.principals").log(logging.INFO if level == "ok" else logging.WARNING, line)


async def close_context(ctx: Context) -> None:
    if ctx.live is not None:
        await ctx.live.close()
    if ctx.lake is not None:
        ctx.lake.stop()
