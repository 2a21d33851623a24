"""`kbot lab`: the failure lab on the command line.

    kbot lab list [--json]                 every mode: what it does, the expected answer, whether it runs here
    kbot lab run MODE [--heal] [--json]    reproduce MODE on a lab cluster, ask the bot, judge the answer
    kbot lab heal [--json]                 undo the fault a `lab run` left in place
    kbot lab down [--json]                 stop the lab clusters and delete their data
    kbot lab chaos [--seed S] [--trials N] [--trial K] [--slow] [--json]
                                           a seeded campaign of random, composed faults, judged

Exit codes: 0 done (run: the answer passed), 1 the answer failed or the mode could not be
reproduced, 2 bad input (an unknown mode).
"""

from __future__ import annotations

import argparse
import json
import sys

from lab.judge import ANSWER_BUDGET_S
from lab.modes import by_name
from lab.topology import TOPOLOGIES, cluster_for, standard

EXIT_BAD_INPUT = 2


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "lab",
        help="the failure lab: reproduce a runbook failure mode on a local cluster and judge the bot's answer",
        description="Reproduce the runbook's failure modes on a real local Kafka cluster (faults injected from "
        "outside: signals, separate clients, a small filesystem the lab makes), ask the bot as an "
        "engineer would, and judge the answer: top-1 cause, the entity named, the mechanism lines, "
        f"severity, and an answer within {ANSWER_BUDGET_S:.0f} s.",
        epilog="Examples: kbot lab list | kbot lab run broker-loss | kbot lab run hanging-transaction --json | kbot lab heal",
    )
    sub = p.add_subparsers(dest="lab_command", metavar="ACTION")
    ls = sub.add_parser(
        "list",
        help="list the modes, the expected answer and whether each runs on this machine",
        description="List every failure mode with its expected runbook entry and severity, the "
        "question asked, and why a mode cannot be reproduced here when it cannot.",
    )
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    run = sub.add_parser(
        "run",
        help="run one mode: inject, wait for the symptom, ask, judge",
        description="Start the lab cluster the mode needs (as `kbot cluster up` does, on the lab's "
        "own ports), inject the fault from outside, wait for the symptom, ask the bot "
        "and judge its answer. The fault stays in place afterwards so you can ask more "
        "yourself; `kbot lab heal` (or --heal) undoes it.",
    )
    run.add_argument("mode", help="the mode's name, as `kbot lab list` shows it")
    run.add_argument(
        "--heal", action="store_true", help="heal right after judging instead of leaving the fault in place"
    )
    run.add_argument("--json", action="store_true", help="print the result (answers and judgement) as JSON")
    heal = sub.add_parser(
        "heal",
        help="undo the fault the last `lab run` left in place",
        description="Undo the fault a `kbot lab run` left in place on the lab clusters and wait "
        "until every partition is fully in sync again.",
    )
    heal.add_argument("--json", action="store_true", help="print what was done as JSON")
    down = sub.add_parser(
        "down",
        help="stop the lab clusters and delete their data",
        description="Stop the lab clusters (both topologies), unmount the lab's small "
        "filesystem and delete the clusters' data.",
    )
    down.add_argument("--json", action="store_true", help="print what was done as JSON")
    chaos = sub.add_parser(
        "chaos",
        help="a seeded campaign of random faults: alone, two at once, or during a recovery",
        description="Draw faults at random from a seed (the lab's modes and broker faults on a broker "
        "drawn at random; sometimes two at once, or one landing while a restarted broker catches "
        "up), inject each from outside, ask what an engineer would, and judge: each fault's top "
        "cause, what it hit named, no OK / Healthy while it is in place, no first step that moves "
        "data for a cause not in place. Every trial is healed before the next.",
        epilog="Examples: kbot lab chaos --seed 7 --trials 10 | kbot lab chaos --seed 7 --trial 3 --json",
    )
    chaos.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    chaos.add_argument("--trials", type=int, default=10, help="how many trials (default 10)")
    chaos.add_argument("--trial", type=int, default=None, help="run trial K of the campaign alone (rerun one)")
    chaos.add_argument("--slow", action="store_true", help="also draw the modes that take minutes to reproduce")
    chaos.add_argument("--json", action="store_true", help="print every trial's result as JSON")
    return p


def _say(text: str) -> None:
    print(f"kbot lab: {text}", file=sys.stderr, flush=True)


def run(args) -> int:
    action = getattr(args, "lab_command", None)
    if action == "list":
        return _list(args.json)
    if action == "run":
        return _run(args.mode, args.heal, args.json)
    if action == "heal":
        return _heal(args.json)
    if action == "down":
        return _down(args.json)
    if action == "chaos":
        return _chaos(args)
    _say("say what to do: list, run MODE, heal, down or chaos (kbot lab --help)")
    return EXIT_BAD_INPUT


def _list(as_json: bool) -> int:
    from lab.catalogue import catalogue

    rows = catalogue()
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["mode"]) for r in rows)
    for r in rows:
        state = "runs here" if r["runs_here"] else "NOT HERE"
        print(f"{r['mode']:<{width}}  {state:<9}  expect {r['expect_entry'] or '-'} / {r['expect_severity'] or '-'}")
        print(f"{'':<{width}}  {r['summary']}")
        if r["questions"]:
            print(f"{'':<{width}}  asks: {' | '.join(r['questions'])}")
        if r["why_not"]:
            print(f"{'':<{width}}  why not: {r['why_not']}")
        if r.get("note") and r["runs_here"]:
            print(f"{'':<{width}}  note: {r['note']}")
    return 0


def _unknown(name: str) -> int:
    _say(f"unknown mode {name!r}; modes: {', '.join(by_name())}")
    return EXIT_BAD_INPUT


def _run(name: str, heal: bool, as_json: bool) -> int:
    from lab.runner import run_mode

    mode = by_name().get(name)
    if mode is None:
        return _unknown(name)
    if not as_json:
        _say(f"{name}: starting the lab cluster if needed, injecting, waiting for the symptom ...")
    try:
        result = run_mode(mode, heal=heal)
    except Exception as exc:  # cluster start-up and the like: a short answer, not a traceback
        _say(f"{name}: {' '.join(str(exc).split())[:400]}")
        return 1
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(format_result(result))
        if result["reproduced"] and not heal:
            print("\nThe fault is still in place: ask the bot yourself, then `kbot lab heal`.")
    j = result.get("judgement")
    return 0 if j and j["passed"] else 1


def format_result(result: dict) -> str:
    lines = [f"mode {result['mode']}: expect {result['expect']['entry']} / {result['expect']['severity']}"]
    if result.get("error"):
        lines.append(f"  {result['error']}")
    if result["reproduced"]:
        lines.append(f"  reproduced in {result.get('inject_seconds', 0) + result.get('symptom_seconds', 0):.1f} s")
    for a in result["answers"]:
        reply = a["reply"]
        top = [d["entry_id"] for d in reply.get("diagnoses") or []]
        lines.append(f"\n  > {a['question']}   ({a['seconds']:.2f} s, {a['outcome']})")
        lines.append(f"    [{reply.get('severity')}] {reply.get('verdict')}")
        for e in reply.get("evidence") or []:
            lines.append(f"    - {e['label']}: {e['value']}")
        if top:
            lines.append(f"    ranked: {', '.join(top)}")
            lines.append(
                f"    mechanism: {', '.join(m['label'] for m in reply['diagnoses'][0]['mechanism']) or '(none)'}"
            )
    j = result.get("judgement")
    if j:
        lines.append("")
        lines.append(f"  judgement (first question): {'PASS' if j['passed'] else 'FAIL'}")
        lines.append(f"    top-1     {j['top1']!s:<24} {'ok' if j['top1_ok'] else 'WRONG'}")
        lines.append(
            f"    named     {', '.join(j['named']) or '-':<24} {'ok' if j['named_ok'] else 'MISSING ' + ', '.join(j['named_missing'])}"
        )
        lines.append(f"    mechanism {'':<24} {'ok' if j['mechanism_ok'] else 'WRONG'}")
        lines.append(f"    severity  {j['severity']!s:<24} {'ok' if j['severity_ok'] else 'WRONG'}")
        within = f"within {j.get('budget_s', 3):.3g} s"  # 3 s idle, stretched by the machine's load
        lines.append(f"    seconds   {j['seconds']:<24} {'ok, ' + within if j['fast'] else 'SLOW, not ' + within}")
    return "\n".join(lines)


def _heal(as_json: bool) -> int:
    from lab.runner import heal_pending

    done = {}
    for topo in TOPOLOGIES:
        cluster = cluster_for(topo)
        if not any(n.pid() for n in cluster.nodes):
            continue  # that lab cluster is not running: nothing to heal
        try:
            out = heal_pending(cluster)
            done[topo] = out if out is not None else cluster.faults.heal(timeout=180)
        except Exception as exc:
            _say(f"heal of the {topo} lab cluster failed: {' '.join(str(exc).split())[:400]}")
            return 1
    if as_json:
        print(json.dumps(done, indent=2, default=str))
    else:
        print("\n".join(f"{t}: healed ({v})" for t, v in done.items()) or "no lab cluster is running")
    return 0


def _down(as_json: bool) -> int:
    done = []
    for topo in TOPOLOGIES:
        cluster = cluster_for(topo)
        if cluster.base_dir.exists():
            cluster.destroy()
            done.append(topo)
    print(
        json.dumps({"destroyed": done}) if as_json else (f"destroyed: {', '.join(done)}" if done else "no lab cluster")
    )
    return 0


def _chaos(args) -> int:
    from lab.chaos import run_campaign, summary, table

    if args.trials < 1 or (args.trial is not None and args.trial < 0):
        _say("--trials must be 1 or more and --trial 0 or more")
        return EXIT_BAD_INPUT

    def progress(res: dict) -> None:
        j = res["judgement"]
        state = res["error"] or ("pass" if j["passed"] else "FAIL: " + "; ".join(j["failures"]))
        _say(f"trial {res['trial']} ({res['seed']}, {res['shape']}: {' + '.join(res['faults'])}): {state}")

    _say(f"seed {args.seed}: starting the lab cluster if needed ...")
    try:
        cluster = standard()
        cluster.up(timeout=300)
        results = run_campaign(cluster, args.seed, args.trials, only=args.trial, slow=args.slow, progress=progress)
    except Exception as exc:  # the cluster would not start: a short answer, not a traceback
        _say(f"chaos: {' '.join(str(exc).split())[:400]}")
        return 1
    if args.json:
        print(json.dumps({"seed": args.seed, "summary": summary(results), "trials": results}, indent=2, default=str))
    else:
        print(table(results))
        print(json.dumps(summary(results)))
    return 0 if all(r["judgement"] and r["judgement"]["passed"] for r in results) else 1
