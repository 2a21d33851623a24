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
from commands.dispatch import Answer, answer, complete
from runbook_kb import KBError, default_kb

from .render import render_addition, render_json, render_text
from .spinner import Spinner

STATE_DIR = Path(os.environ.get("KBOT_HOME", Path.home() / ".kbot"))
EXIT_BAD_INPUT = 2


def _emit(result: Answer, as_json: bool, compact_json: bool = False) -> None:
    if as_json or (result.request is not None and result.request.json):
        # The console prints one JSON document per line, so a script can read it line by line.
        print(render_json(result.reply, indent=None if compact_json else 2))
    else:
        full = result.request is not None and result.request.full
        print(render_text(result.reply, full=full, color=sys.stdout.isatty() and not os.environ.get("NO_COLOR")), end="")


SPINNER = Spinner()


async def _progress(message: str) -> None:
    await SPINNER.progress(message)


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


def _split_png(words: list[str], png: str | None) -> tuple[list[str], str | None]:
    """`--png FILE` written after the question belongs to kbot, not to the question."""
    words = list(words)
    for i, word in enumerate(words):
        if word == "--png" and i + 1 < len(words):
            return words[:i] + words[i + 2:], words[i + 1]
        if word.startswith("--png="):
            return words[:i] + words[i + 1:], word.split("=", 1)[1]
    return words, png


def _write_png(result: Answer, path: str) -> None:
    """`--png FILE`: the answer's trend as a chart; a short line on stderr when it has none."""
    if not result.reply.series:
        print(f"kbot: this answer has no time series to chart; {path} not written", file=sys.stderr)
        return
    from .charts import chart_png

    try:
        Path(path).write_bytes(chart_png(result.reply.series, result.reply.title))
    except OSError as exc:
        print(f"kbot: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return
    print(f"chart written to {path}", file=sys.stderr)


async def _answer_and_emit(text: str, ctx: Context, as_json: bool, *, compact_json: bool = False) -> Answer:
    """Print the answer; when the lake's evidence is still coming, print the live answer first and
    the lake's part when it is in (JSON waits: one document per answer)."""
    try:
        result = await answer(text, ctx, user=ctx.gate.acting_user, early=True)  # the OS account, never $USER
    finally:
        SPINNER.stop()
    if result.reply.later is None:
        _emit(result, as_json, compact_json)
        return result
    if as_json or (result.request is not None and result.request.json):
        result = await complete(result)
        _emit(result, as_json, compact_json)
        return result
    _emit(result, as_json)
    sys.stdout.flush()
    await SPINNER.progress("adding the metric lake's evidence")
    try:
        final = await complete(result)
    finally:
        SPINNER.stop()
    print(render_addition(result.reply, final.reply), end="")
    return final


async def _ask(text: str, as_json: bool, png: str | None = None) -> int:
    ctx = make_context(lake=False)
    try:
        result = await _answer_and_emit(text, ctx, as_json)
    finally:
        await _close(ctx)
    if png:
        _write_png(result, png)
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


def _run_cancellable(loop: asyncio.AbstractEventLoop, coro) -> None:
    """Ctrl-C cancels the request in flight, not the console (and prints no asyncio traceback)."""
    task = loop.create_task(coro)
    try:
        loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        try:
            loop.run_until_complete(task)
        except (asyncio.CancelledError, KeyboardInterrupt):
            pass
        print("\nCancelled.", file=sys.stderr)


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
            _run_cancellable(loop, _answer_and_emit(text, ctx, as_json, compact_json=True))
            sys.stdout.flush()
    finally:
        loop.run_until_complete(_close(ctx))
        loop.close()
    return 0


def _choose_cluster(name: str) -> str | None:
    """``--cluster NAME``: make NAME this process's default cluster (KBOT_CLUSTER, which
    live/config.py honours), after checking it is configured. Returns the problem, if any."""
    from live.config import ConfigError, load_clusters

    try:
        known = sorted(load_clusters())
    except ConfigError as exc:
        return str(exc)
    if name not in known:
        return f"unknown Kafka cluster {name!r}; configured clusters: {', '.join(known) or 'none'}"
    os.environ["KBOT_CLUSTER"] = name
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbot",
        description="Kafka incident bot: cause, mechanism (Kafka source line) and mitigation for Kafka symptoms.",
        epilog="Examples: kbot ask \"why URP\" | kbot ask --json \"runbook PRODUCER_FENCED\" | kbot console",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ask = sub.add_parser("ask", help="ask one question, e.g. kbot ask \"why URP\"",
                         description="Ask one question, exactly as you would type it after /kafka in Slack.")
    # REMAINDER: the question's own options (`--since 30m`, `--full`, `--json`) pass through to the
    # bot's parser, so quotes are optional as the help says.
    ask.add_argument("text", nargs=argparse.REMAINDER, help="the question, e.g. 'why URP' (quotes optional)")
    ask.add_argument("--json", action="store_true", help="print the answer as JSON")
    ask.add_argument("--cluster", metavar="NAME", help="the configured cluster to ask about (clusters.yaml)")
    ask.add_argument("--png", metavar="FILE", help="write the answer's chart (a trend over time) to FILE as PNG")
    console = sub.add_parser("console", help="interactive console with history",
                             description="Interactive console; type what you would type after /kafka. 'exit' quits.")
    console.add_argument("--json", action="store_true", help="print every answer as JSON")
    console.add_argument("--cluster", metavar="NAME", help="the configured cluster this console talks to")
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
    if args.command in ("ask", "console") and args.cluster is not None:
        problem = _choose_cluster(args.cluster)
        if problem:
            print(f"kbot: {problem}", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.command == "ask":
        text, png = _split_png(args.text, args.png)
        if not text:
            parser.error("ask needs a question, e.g. kbot ask why URP")
        return asyncio.run(_ask(" ".join(text), args.json, png))
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
