"""kbot: the terminal interface to the Kafka incident bot.

    kbot ask "why URP"            one question, one answer
    kbot console                  interactive, with history; the /kafka prefix is optional
    kbot cluster up|down|status   the local Apache Kafka cluster used for the demo and tests

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


def make_context() -> Context:
    return Context(kb=default_kb(), progress=_progress)


async def _ask(text: str, as_json: bool) -> int:
    result = await answer(text, make_context(), user=os.environ.get("USER", "terminal"))
    _emit(result, as_json)
    return result.exit_code


def _console_lines(prompt: str):
    """Lines typed by the user: prompt_toolkit with history on a terminal, plain stdin otherwise."""
    if sys.stdin.isatty():
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory

        STATE_DIR.mkdir(parents=True, exist_ok=True)
        session = PromptSession(history=FileHistory(str(STATE_DIR / "console_history")))
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


def _console(as_json: bool) -> int:
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
            result = loop.run_until_complete(answer(text, ctx, user=os.environ.get("USER", "terminal")))
            _emit(result, as_json)
            sys.stdout.flush()
    finally:
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
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("KBOT_LOG_LEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
        return _console(args.json)
    if args.command == "check":
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
    parser.print_help()
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
