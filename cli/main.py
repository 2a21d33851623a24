"""kbot: the terminal interface to the Kafka incident bot.

    kbot ask "why URP"            one question, one answer
    kbot console                  interactive, with history; the /kafka prefix is optional
    kbot cluster up|down|status   the local Apache Kafka cluster used for the demo and tests
    kbot lake collect|ingest|status   the metric lake
    kbot lab list|run MODE|heal   the failure lab: reproduce a failure mode, judge the bot's answer
    kbot serve                    the Slack app
    kbot config                   the effective configuration, secrets masked, with each value's source,
                                  and the gate's effective second-approver rule
    kbot audit --principals       the bot's own Kafka principals: rights beyond need, escalation paths
    kbot run                      the main job: local cluster if none is configured, then console

Exit codes: 0 answered; 1 an evidence source or the bot failed, or an action failed or cannot go
ahead (its preview shows a failing precondition); 2 bad input, or a confirm the gate refused.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from bot.logs import log_to_file, log_to_screen
from bot.render import render_json, render_text
from bot.slack_app import register as register_serve
from bot.slack_app import run as run_serve
from bot.slack_settings import SlackSettings, _csv
from cli.dev_cluster import effective_settings
from cli.run import register as register_run
from cli.run import run as run_main
from framework.context import Context
from framework.dispatch import run_request
from framework.reply import error_reply
from framework.spec import CommandRequest
from gate.audit import cluster_secrets
from gate.confirmation import second_approver_rules
from kbot_settings import KbotSettings, SettingsError, describe, load, markdown_table
from lab.cli import register as register_lab
from lab.cli import run as run_lab
from lake.cli import register as register_lake
from lake.cli import run as run_lake
from live.config import ConfigError, clusters_file_warnings, load_clusters
from localkafka.cli import register as register_cluster
from localkafka.cli import run as run_cluster
from runbook_kb import KBError, default_kb
from runbook_kb.lookup import Lookup

EXIT_BAD_INPUT = 2


def _unknown_cluster(name: str, settings: KbotSettings) -> str | None:
    """``--cluster NAME``: the problem when NAME is not a configured cluster, else None."""

    try:
        known = sorted(load_clusters(settings))
    except ConfigError as exc:
        return str(exc)
    if name not in known:
        return f"unknown Kafka cluster {name!r}; configured clusters: {', '.join(known) or 'none'}"
    return None


def _config(args: argparse.Namespace) -> int:
    """`kbot config`: the effective configuration, secrets masked, and where each value came from."""
    import json

    if args.markdown:
        print(markdown_table())
        return 0
    try:
        settings = load()  # this command's edge: it reports a wrong variable in its own words
    except SettingsError as exc:
        for line in exc.lines:
            print(f"kbot config: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    views = describe(settings)
    rules, unknown, heading = _approval_rules(settings)
    warnings = clusters_file_warnings(settings)  # passwords in a clusters file others can read
    if args.json:
        rows: list[dict[str, object]] = [
            {"name": v.env, "value": v.value, "source": v.source, "section": v.section, "secret": v.secret}
            for v in views
        ]
        # the effective second-approver rule: one row per action kind, in the same list
        rows += [
            {
                "name": f"second approver: {r.kind}",
                "value": r.when,
                "source": r.source,
                "section": "Second approver (effective)",
                "secret": False,
                "kind": r.kind,
                "principal": r.principal,
                "approvers_required": settings.kbot_approvers_required,
            }
            for r in rules
        ]
        rows += [
            {"name": "warning", "value": w, "source": "clusters file", "section": "Warnings", "secret": False}
            for w in warnings
        ]
        print(json.dumps(rows, indent=2))
        return 0
    section = None
    for v in views:
        if v.section != section:
            section = v.section
            print(f"\n{section}")
        shown = v.value if v.value is not None else "(not set)"
        print(f"  {v.env:<32} {shown:<44} {v.source}")
    print(f"\n{heading}")
    for r in rules:
        print(f"  {r.kind:<16} {r.when:<28} {r.source}  [runs as the {r.principal} principal]")
    if unknown:
        print(f"  KBOT_HIGH_RISK_KINDS names no action: {', '.join(unknown)} (no effect)")
    for w in warnings:
        print(f"\nWARNING: {w}")
    return 0


def _approval_rules(settings):
    """The gate's effective second-approver rule per action kind (gate/confirmation.py), the
    KBOT_HIGH_RISK_KINDS entries that name no action, and the heading that says how many approve."""
    from commands.registry import ROUTER

    actions = {c.spec.name: c.action for c in ROUTER.commands if c.action is not None}
    rules, unknown = second_approver_rules(actions, _csv(settings.kbot_high_risk_kinds))
    n = settings.kbot_approvers_required
    heading = (
        f"Second approver (effective rule, gate/confirmation.py: {n} approver{'s' if n > 1 else ''} besides "
        "the requester, KBOT_APPROVERS_REQUIRED)"
    )
    return rules, unknown, heading


def _incident_timeline(args: argparse.Namespace, settings: KbotSettings, kb) -> int:
    """`kbot incident timeline <thread>`: the `timeline` command (commands/timeline.py) on this host's
    audit log and state database; bad input is a short line and exit 2, never a traceback."""
    from bot.gate_setup import default_gate
    from commands.registry import ROUTER

    form = "json" if args.json else ("md" if args.markdown else {"markdown": "md"}.get(args.format, args.format))
    command = ROUTER.find("timeline")
    assert command is not None  # registered in commands/registry.py
    request = CommandRequest(command, args={"thread": args.thread}, raw=f"timeline {args.thread}", router=ROUTER)
    ctx = Context(kb=kb, gate=default_gate(SlackSettings.from_settings(settings)), settings=settings)
    result = asyncio.run(run_request(request, ctx))
    markdown = getattr(result.reply, "markdown", None)
    if form == "json":
        print(render_json(result.reply))
    elif form == "md" and markdown is not None:
        print(markdown(), end="")
    else:  # text, or the error of a timeline that could not be built
        print(render_text(result.reply, color=sys.stdout.isatty() and settings.color), end="")
    return result.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbot",
        description="Kafka incident bot: cause, mechanism (Kafka source line) and mitigation for Kafka symptoms.",
        epilog='Examples: kbot ask "why URP" | kbot ask --json "runbook PRODUCER_FENCED" | kbot console',
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    ask = sub.add_parser(
        "ask",
        help='ask one question, e.g. kbot ask "why URP"',
        description="Ask one question, exactly as you would type it after /kafka in Slack.",
    )
    # REMAINDER: the question's own options (`--since 30m`, `--full`, `--json`) pass through to the
    # bot's parser, so quotes are optional as the help says.
    ask.add_argument("text", nargs=argparse.REMAINDER, help="the question, e.g. 'why URP' (quotes optional)")
    ask.add_argument("--json", action="store_true", help="print the answer as JSON")
    # before the question too (`kbot ask --full "why URP"`), as after it: passed on with the question
    ask.add_argument("--full", action="store_true", help="the whole runbook form instead of the short answer")
    ask.add_argument("--cluster", metavar="NAME", help="the configured cluster to ask about (clusters.yaml)")
    ask.add_argument("--png", metavar="FILE", help="write the answer's chart (a trend over time) to FILE as PNG")
    console = sub.add_parser(
        "console",
        help="interactive console with history",
        description="Interactive console; type what you would type after /kafka. 'exit' quits.",
    )
    console.add_argument("--json", action="store_true", help="print every answer as JSON")
    console.add_argument("--cluster", metavar="NAME", help="the configured cluster this console talks to")
    audit = sub.add_parser(
        "audit",
        help="audit the cluster: topics' durability, or with --principals the bot's own Kafka principals",
        description="`kbot audit --principals`: read the ACLs of the bot's principals (observer, config, "
        "operator) and flag rights beyond what their actions need, escalation paths (cluster ALTER, which "
        "Kafka accepts for CreateAcls, on a principal used for more than elections and aborts; ALL; WRITE/ALTER/"
        "CREATE on every topic) and missing principals. Without --principals: the durability audit.",
    )
    audit.add_argument("--principals", action="store_true", help="audit the bot's own principals and their ACLs")
    audit.add_argument("--json", action="store_true", help="print the answer as JSON")
    audit.add_argument("--cluster", metavar="NAME", help="the configured cluster to audit (clusters.yaml)")
    check = sub.add_parser(
        "check",
        help="validate the runbook knowledge base and exit",
        description="Load and validate the whole runbook knowledge base.",
    )
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    config = sub.add_parser(
        "config",
        help="show the effective configuration (secrets masked) and where each value came from",
        description="Every setting the bot reads, its value (secrets masked) and its source: the "
        "environment or the default. Exits 2 when a value is wrong, naming it.",
    )
    config.add_argument("--json", action="store_true", help="print the settings as JSON")
    config.add_argument("--markdown", action="store_true", help="print the README's configuration table")
    incident = sub.add_parser(
        "incident",
        help="an incident thread's postmortem timeline: kbot incident timeline C0INC/1700000000.000100",
        description="`kbot incident timeline <thread>`: the incident in order (alert, questions and verdicts, "
        "gated actions with requester and approver, resolution) with its durations, from this host's audit "
        "log and thread store. <thread>: the Slack channel id and the thread's root ts (C0INC/1700000000.000100) "
        "or the link of the thread's first message.",
    )
    incident_sub = incident.add_subparsers(dest="incident_command", metavar="timeline", required=True)
    timeline = incident_sub.add_parser("timeline", help="the thread's timeline (text, --markdown or --json)")
    timeline.add_argument("thread", help="C0INC/1700000000.000100, or a Slack link to the thread's first message")
    timeline.add_argument(
        "--json", action="store_true", help="print the answer as JSON (the timeline under 'timeline')"
    )
    timeline.add_argument("--markdown", action="store_true", help="print the timeline as Markdown, for a postmortem")
    timeline.add_argument(
        "--format", choices=("text", "md", "markdown", "json"), default="text", help="the output form"
    )
    register_cluster(sub)
    register_lake(sub)
    register_lab(sub)

    register_run(sub)
    register_serve(sub)
    return parser


def main(argv: list[str] | None = None) -> int:

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    # The configuration travels down as this one settings object; the process environment is read
    # here, once (kbot_settings.load), and nowhere below.
    if args.command == "config":
        return _config(args)
    try:
        settings = load()
    except SettingsError as exc:  # one line per wrong variable, then stop: nothing runs half-configured
        for line in exc.lines:
            print(f"kbot: configuration: {line}", file=sys.stderr)
        print("kbot: `kbot config` shows every setting and where it came from", file=sys.stderr)
        return EXIT_BAD_INPUT

    slack = settings.slack_bot_token is not None or settings.slack_app_token is not None
    if args.command in ("ask", "console", "audit", "incident") or (args.command == "run" and not slack):
        # a person at a prompt: tracebacks to the state folder's kbot.log, one short line on screen

        tokens = (settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret)
        secrets = (*(t.get_secret_value() for t in tokens if t), *cluster_secrets(settings))
        log_to_file(settings.kbot_log_level, settings.state_dir, secrets)
    else:
        log_to_screen(settings.kbot_log_level)
    if settings.kbot_log_level != "DEBUG":
        # kafka-python logs every refused connection; the answer already says the cluster is down.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    try:
        kb = default_kb()
    except KBError as exc:
        print(f"kbot: the runbook knowledge base is invalid: {exc}", file=sys.stderr)
        return 1
    if args.command in ("ask", "console", "audit") and args.cluster is not None:
        problem = _unknown_cluster(args.cluster, settings)
        if problem:
            print(f"kbot: {problem}", file=sys.stderr)
            if getattr(args, "json", False):  # a script reads stdout: it gets the error as JSON too
                print(render_json(error_reply(problem[0].upper() + problem[1:] + ".", ["kbot config"])))
            return EXIT_BAD_INPUT
    if args.command in ("ask", "audit", "console", "serve"):
        # nothing configures a cluster: the dev cluster `kbot run` left running, if any (`kbot run`
        # decides for itself: it starts that cluster when it is down)
        settings = effective_settings(settings)
    if args.command == "ask":
        from bot.console import ask, split_png

        text, png = split_png(args.text, args.png)
        if not text:
            parser.error("ask needs a question, e.g. kbot ask why URP")
        question = " ".join([*text, "--full"] if args.full else text)
        return asyncio.run(ask(question, args.json, png, settings, cluster=args.cluster))
    if args.command == "audit":
        from bot.console import ask

        text = "audit --principals" if args.principals else "audit"
        return asyncio.run(ask(text, args.json, None, settings, cluster=args.cluster))
    if args.command == "console":
        from bot.console import console

        return console(args.json, settings, cluster=args.cluster)
    if args.command == "incident":
        return _incident_timeline(args, settings, kb)
    if args.command == "check":
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
        return run_cluster(args)
    if args.command == "lake":
        return run_lake(args, settings)
    if args.command == "lab":
        return run_lab(args)
    if args.command == "serve":
        return run_serve(args, settings)
    if args.command == "run":
        return run_main(args, settings)
    parser.print_help()
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
