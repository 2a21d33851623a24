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

from runbook_kb import KBError, default_kb

EXIT_BAD_INPUT = 2


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
        from .console import ask, split_png

        text, png = split_png(args.text, args.png)
        if not text:
            parser.error("ask needs a question, e.g. kbot ask why URP")
        return asyncio.run(ask(" ".join(text), args.json, png))
    if args.command == "console":
        from .console import console

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
