"""`kbot serve`: run the Slack app (bot/slack_bot.py) in HTTP mode or Socket Mode.

    HTTP mode     SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET: aiohttp serves POST /slack/events (slash
                  commands, interactivity and events; every request's signature and timestamp are
                  verified by Bolt, a bad one gets 401), GET /healthz (200, or 503 when Kafka, the lake or
                  Slack is down: bot/health.py), GET /metrics (Prometheus) and, with KBOT_ALERT_TOKEN set,
                  POST /alerts/alertmanager (bot/alerts.py), on KBOT_PORT (default 3000); /healthz and
                  /metrics answer on KBOT_HEALTH_HOST only (default 127.0.0.1: they have no auth)
    Socket Mode   SLACK_BOT_TOKEN + SLACK_APP_TOKEN: no public endpoint; /healthz still listens so a
                  platform's `web:` process sees its port bound
    neither       says what is missing and exits 3, so a wrapper can fall back to `kbot console`

`--check` (and every start) warns loudly when neither KBOT_ALLOWED_TEAM_IDS nor
KBOT_ALLOWED_ENTERPRISE_IDS is set: then any workspace where the app is installed may call the bot.

Slack app configuration: slack/manifest.yaml (create the app "From an app manifest" at
api.slack.com/apps) holds the /kafka command, Interactivity and the app_mention event, all pointing
at https://<host>/slack/events (HTTP mode), and the bot scopes with why each is needed.

This module stays cheap to import (cli/main.py imports it to build its parser): Bolt, slack_sdk
and aiohttp load only when the server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from bot.alertmanager import AlertConfig, AlertConfigError
from bot.app import log_principals_audit, make_context
from bot.slack_settings import SlackSettings
from gate.audit import RedactingFilter
from kbot_settings import KbotSettings

log = logging.getLogger(__name__)

EXIT_NOT_CONFIGURED = 3  # `kbot serve` without Slack tokens: the caller falls back to the console


class SecretFilter(RedactingFilter):
    """Masks the Slack tokens and the signing secret (ours by value, any other Slack token by shape),
    request bodies and response URLs in any log line, whoever logs it."""


def install_log_redaction(settings: SlackSettings, extra: tuple[str, ...] = ()) -> None:
    f = SecretFilter([*settings.secrets(), *(e for e in extra if e)])
    for handler in logging.getLogger().handlers:
        handler.addFilter(f)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the Slack app (HTTP on KBOT_PORT, or Socket Mode when SLACK_APP_TOKEN is set)",
        description="Run the Slack app. HTTP mode needs SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET and serves "
        "/slack/events; Socket Mode needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN. Without them it says so "
        f"and exits {EXIT_NOT_CONFIGURED}.",
    )
    p.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=int, default=None, help="port (default KBOT_PORT, else 3000)")
    p.add_argument(
        "--check",
        action="store_true",
        help=f"only check the Slack configuration: exit 0 if it is complete, {EXIT_NOT_CONFIGURED} if not",
    )
    p.add_argument("--json", action="store_true", help="with --check: the result as JSON on stdout")


def configured(settings: KbotSettings) -> bool:
    """True when the settings hold what `kbot serve` needs (for `kbot run` to pick Slack or the console)."""
    return SlackSettings.from_settings(settings).mode is not None


def run(args: argparse.Namespace, kbot: KbotSettings) -> int:
    """`kbot serve`; also callable with another command's args (host / port / check default).
    ``kbot``: the process's settings, loaded once at its edge."""
    settings = SlackSettings.from_settings(kbot)
    as_json = getattr(args, "check", False) and getattr(args, "json", False)
    if as_json:
        import json

        warning = settings.open_origin_warning() if settings.mode else ""
        try:
            cfg = AlertConfig.from_settings(kbot)
            alerts = {
                "configured": cfg is not None,
                "routes": len(cfg.routes) if cfg else 0,
                "default_channel": cfg.default_channel if cfg else None,
            }
        except AlertConfigError as exc:
            alerts = {"configured": False, "error": str(exc)}
        print(
            json.dumps(
                {
                    "configured": settings.mode is not None,
                    "mode": settings.mode,
                    "missing": settings.missing() or None,
                    "warnings": [warning] if warning else [],
                    "alerts": alerts,
                }
            )
        )
        if warning:
            print(f"kbot serve: WARNING: {warning}", file=sys.stderr)
        if "error" in alerts:
            return 2
        return 0 if settings.mode else EXIT_NOT_CONFIGURED
    if settings.mode is None:
        print(
            f"kbot serve: Slack is not configured: {settings.missing()}. Use `kbot console` for the terminal.",
            file=sys.stderr,
        )
        return EXIT_NOT_CONFIGURED

    try:
        alerts = AlertConfig.from_settings(kbot)
    except AlertConfigError as exc:  # one line naming the file and the entry, never a traceback
        print(f"kbot serve: {exc}", file=sys.stderr)
        return 2
    warning = settings.open_origin_warning()
    if getattr(args, "check", False):
        if warning:
            print(f"kbot serve: WARNING: {warning}", file=sys.stderr)
        print(
            f"kbot serve: Slack configured ({settings.mode} mode)"
            + (f"; Alertmanager webhook on /alerts/alertmanager ({len(alerts.routes)} routes)" if alerts else "")
        )
        return 0
    install_log_redaction(settings, (alerts.token,) if alerts else ())
    if warning:
        print(f"kbot serve: WARNING: {warning}", file=sys.stderr, flush=True)
    if logging.getLogger().level > logging.INFO:
        logging.getLogger(__name__).setLevel(logging.INFO)
    from bot.ask_server import serve_in_background

    asker = serve_in_background(kbot)  # a one-shot `kbot ask` on this machine is answered by this bot
    try:
        asyncio.run(
            serve(
                settings,
                host=getattr(args, "host", None) or "0.0.0.0",
                port=getattr(args, "port", None) or settings.port,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        asker.stop()
    return 0


async def serve(settings: SlackSettings, *, host: str = "0.0.0.0", port: int = 3000, ctx=None) -> None:
    from aiohttp import web

    from bot.slack_bot import KafkaBot

    if ctx is None:
        ctx = make_context(settings.kbot)

    principals = asyncio.ensure_future(log_principals_audit(ctx))  # one line; the start does not wait
    principals.add_done_callback(lambda t: None if t.cancelled() else t.exception())
    bot = KafkaBot(settings, ctx=ctx)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    socket_handler = None
    # HTTP always listens: /slack/events in HTTP mode, only /healthz in Socket Mode (platforms that
    # run a `web:` process expect the port to be bound).
    runner = web.AppRunner(bot.web_app(with_slack=settings.mode == "http"), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    if settings.mode == "socket":
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        socket_handler = AsyncSocketModeHandler(bot.app, settings.app_token)
        await socket_handler.connect_async()

    health = settings.kbot.kbot_health_host
    shown = f"[{health}]" if health.version == 6 else str(health)
    log.info("kbot serving Slack in %s mode; health on http://%s:%d/healthz", settings.mode, shown, port)
    try:
        await stop.wait()
    finally:
        if socket_handler is not None:
            await socket_handler.close_async()
        await runner.cleanup()
