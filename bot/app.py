"""The bot's assembly for a process: the Context its commands get, from the configuration it is handed.

Used by every transport (the terminal in bot/console.py, the Slack app in bot/slack_app.py, the
failure lab); nothing here parses arguments or prints. Which cluster a process talks to when none
is configured is the command line's call (cli/dev_cluster.py), not the bot's.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping

from bot.settings import Settings
from diagnosis.principals import startup_line
from framework.context import Context
from kbot_settings import load
from lake.connect import running_url
from live.config import ConfigError, load_config
from live.pool import GatewayPool
from runbook_kb import default_kb


def local_env(cluster, name: str = "local") -> dict[str, str]:
    """The environment that points the bot at a local cluster (its brokers and exporters); any
    object with localkafka's LocalCluster's bootstrap_servers, brokers and metrics_urls."""
    return {
        "KBOT_BOOTSTRAP": cluster.bootstrap_servers,
        "KBOT_CLUSTER_NAME": name,
        "KBOT_EXPECTED_BROKERS": ",".join(str(b) for b in cluster.brokers),
        "KBOT_METRICS_TARGETS": ",".join(f"{nid}={url}" for nid, url in cluster.metrics_urls.items()),
    }


def cluster_configured(env: Mapping[str, str] | None = None) -> bool:

    try:
        clusters, _default = load_config(env)
    except ConfigError:
        return True  # configured, if wrongly: the commands will say what is wrong
    return bool(clusters)


def make_context(
    lake: bool = True, progress: Callable[[str], Awaitable[None]] | None = None, env: Mapping[str, str] | None = None
) -> Context:
    """The bot's context: the packaged KB, the live cluster and the metric lake when configured.
    ``lake=False`` (one-shot `kbot ask`) skips Spark unless KBOT_LAKE=1 asks for it: a cold Spark
    start costs seconds that a single question should not pay. ``env``: the whole configuration
    (default: the process environment); the command line adds a running dev cluster to it first."""
    from bot.gate import default_gate
    from lake.service import lake_from_env

    env = dict(os.environ if env is None else env)
    pool = GatewayPool(env=env)
    flag = load(env).kbot_lake
    want_lake = lake or flag is True
    if not want_lake and flag is not False:
        # a one-shot `kbot ask` pays no cold Spark start when `kbot run` keeps a server warm

        want_lake = running_url(env=env) is not None
    ctx = Context(
        kb=default_kb(),
        live=pool if pool.configured() else None,
        gate=default_gate(Settings.from_env(env)),
        # a one-shot ask does not warm an in-process Spark up first: its own question is the first
        # query, and a warm-up would push a cold start past the lake's 30 s timeout (figures in
        # docs/lake-connect.md)
        lake=lake_from_env(env, warm=None if lake else False) if want_lake else None,
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
