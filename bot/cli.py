"""kbot: the terminal interface to the Kafka incident bot.

    kbot ask "why URP"            one question, one answer
    kbot console                  interactive, with history; the /kafka prefix is optional
    kbot cluster up|down|status   the local Apache Kafka cluster used for the demo and tests
    kbot lake collect|ingest|status   the metric lake
    kbot lab list|run MODE|heal   the failure lab: reproduce a failure mode, judge the bot's answer
    kbot serve                    the Slack app
    kbot run                      the main job: local cluster if none is configured, then console

Exit codes: 0 answered, 1 an evidence source or the bot failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from commands.context import Context
from commands.dispatch import Answer, answer
from runbook_kb import KBError, default_kb

from .render import render_json, render_text

STATE_DIR = Path(os.environ.get("KBOT_HOME", Path.home() / ".kbot"))
EXIT_BAD_INPUT = 2


def _emit(result: Answer, as_json: bool) -> None:
    if as_json or (result.request is not None and result.request.json):
        print(render_json(result.reply))
    else:
        print(render_text(result.reply), end="")


async def _progress(message: str) -> None:
    print(f"… {message}", file=sys.stderr, flush=True)


def make_context(lake: bool = True) -> Context:
    """The bot's context: the packaged KB, the live cluster and the metric lake when configured.
    ``lake=False`` (one-shot `kbot ask`) skips Spark unless KBOT_LAKE=1 asks for it: a cold Spark
    start costs seconds that a single question should not pay."""
    from lake.service import lake_from_env
    from live.pool import GatewayPool

    from .gate import default_gate
    from .run import use_running_local_cluster

    use_running_local_cluster()
    pool = GatewayPool()
    want_lake = lake or os.environ.get("KBOT_LAKE", "").strip().lower() in ("1", "true", "yes", "on")
    return Context(kb=default_kb(), progress=_progress, live=pool if pool.configured() else None,
                   gate=default_gate(), lake=lake_from_env() if want_lake else None)


async def _close(ctx: Context) -> None:
    if ctx.live is not None:
        await ctx.live.close()
    if ctx.lake is not None:
        ctx.lake.stop()


async def _ask(text: str, as_json: bool) -> int:
    ctx = make_context(lake=False)
    try:
        result = await answer(text, ctx, user=ctx.gate.acting_user)  # the OS account, never $USER (bot/identity.py)
    finally:
        await _close(ctx)
    _emit(result, as_json)
    return result.exit_code


def _console_lines(prompt: str):
    """Lines typed by the user: prompt_toolkit with history on a terminal, plain stdin otherwise."""
    if sys.stdin.isatty():
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory

        from .settings import private_dir, private_file

        # the history holds every command typed, tokens of confirmations included: private
        history = private_file(private_dir(STATE_DIR) / "console_history")
        session = PromptSession(history=FileHistory(str(history)))
        while True:
            try:
                yield session.prompt(prompt)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
    else:
        for line in sys.stdin:
            yield line.rstrip("\n")


def console(as_json: bool) -> int:
    ctx = make_context()
    if sys.stdin.isatty():
        print("Kafka incident bot. Ask as in Slack, e.g. 'why URP' or 'runbook hanging transaction'. 'help' lists commands; 'exit' quits.")
    loop = asyncio.new_event_loop()
    try:
        for line in _console_lines("kafka> "):
            text = line.strip()
            if not text:
                continue
            if text.lower() in ("exit", "quit", r"\q"):
                break
            result = loop.run_until_complete(answer(text, ctx, user=ctx.gate.acting_user))  # OS account, not $USER
            _emit(result, as_json)
            sys.stdout.flush()
    finally:
        loop.run_until_complete(_close(ctx))
        loop.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbot",
        description="Kafka incident bot: cause, mechanism (Kafka source line) and mitigation for Kafka symptoms.",
        epilog="Examples: kbot ask \"why URP\" | kbot ask --json \"runbook PRODUCER_FENCED\" | kbot console",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ask = sub.add_parser("ask", help="ask one question, e.g. kbot ask \"why URP\"",
                         description="Ask one question, exactly as you would type it after /kafka in Slack.")
    ask.add_argument("text", nargs="+", help="the question, e.g. 'why URP' (quotes optional)")
    ask.add_argument("--json", action="store_true", help="print the answer as JSON")
    console = sub.add_parser("console", help="interactive console with history",
                             description="Interactive console; type what you would type after /kafka. 'exit' quits.")
    console.add_argument("--json", action="store_true", help="print every answer as JSON")
    check = sub.add_parser("check", help="validate the runbook knowledge base and exit",
                           description="Load and validate the whole runbook knowledge base.")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    try:
        from localkafka.cli import register as register_cluster
    except ImportError:  # the local cluster tooling is optional at import time
        register_cluster = None
    if register_cluster is not None:
        register_cluster(sub)
    from lake.cli import register as register_lake

    register_lake(sub)
    try:
        from lab.cli import register as register_lab
    except ImportError:  # an install made before the lab package existed: everything else still works
        register_lab = None
    if register_lab is not None:
        register_lab(sub)
    from .run import register as register_run
    from .slack_app import register as register_serve

    register_run(sub)
    register_serve(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("KBOT_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if os.environ.get("KBOT_LOG_LEVEL", "").upper() != "DEBUG":
        # kafka-python logs every refused connection; the answer already says the cluster is down.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        kb = default_kb()
    except KBError as exc:
        print(f"kbot: the runbook knowledge base is invalid: {exc}", file=sys.stderr)
        return 1
    if args.command == "ask":
        return asyncio.run(_ask(" ".join(args.text), args.json))
    if args.command == "console":
        return console(args.json)
    if args.command == "check":
        from runbook_kb.lookup import Lookup

        try:
            Lookup.for_kb(kb)  # trains the search's word model: the example-question files are checked too
        except KBError as exc:
            print(f"kbot: the runbook knowledge base is invalid: {exc}", file=sys.stderr)
            return 1
        summary = {"failure_modes": len(kb.failure_modes), "reference_files": sorted(kb.reference)}
        if args.json:
            import json

            print(json.dumps({"ok": True, **summary}))
        else:
            print(f"knowledge base ok: {summary['failure_modes']} failure modes, {len(kb.reference)} reference files")
        return 0
    if args.command == "cluster":
        from localkafka.cli import run as run_cluster

        return run_cluster(args)
    if args.command == "lake":
        from lake.cli import run as run_lake

        return run_lake(args)
    if args.command == "lab":
        from lab.cli import run as run_lab

        return run_lab(args)
    if args.command == "serve":
        from .slack_app import run as run_serve

        return run_serve(args)
    if args.command == "run":
        from .run import run as run_main

        return run_main(args)
    parser.print_help()
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
