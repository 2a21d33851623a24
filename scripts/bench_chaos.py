#!/usr/bin/env python3
"""The chaos campaign as a benchmark: N random trials from a seed, the table written to docs/.

    scripts/bench_chaos.py --seed 1 --trials 50 [--out docs/chaos.md] [--slow]

Runs `kbot lab chaos`'s campaign on the standard lab cluster (its own ports: KBOT_LAB_PORT_BASE,
KBOT_LAB_CLUSTER_DIR), prints each trial as it ends, and writes a Markdown page: the machine, its
load during the run, the targets (>= 90 % of trials with the right top cause, no OK / Healthy while
a fault is in place, no harmful first step) against what was measured, and one row a trial with
its seed, so any trial can be rerun alone (`kbot lab chaos --seed S --trial K`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.chaos import run_campaign, summary, table  # noqa: E402
from lab.topology import standard  # noqa: E402

TOP1_TARGET = 0.90


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown CPU",
    )
    mem = int(
        next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    )
    return f"{os.cpu_count()} cores ({cpu}), {mem / 1024 / 1024:.1f} GiB"


def page(seed: int, results: list[dict], loads: list[float], seconds: float) -> str:
    s = summary(results)
    judged = max(1, s["judged"])
    top1 = s["top1_right"] / judged
    met = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lines = [
        "# The chaos campaign",
        "",
        "Random, composed faults on the standard lab cluster (brokers 101-103), each injected from "
        "outside and judged from the bot's JSON answer (`lab/chaos.py`). Rerun the whole campaign "
        f"with `scripts/bench_chaos.py --seed {seed} --trials {s['trials']}`, one trial with "
        f"`kbot lab chaos --seed {seed} --trial K`.",
        "",
        f"- Machine: {machine()}; load (1-minute) during the run {min(loads):.1f}-{max(loads):.1f}, "
        f"mean {sum(loads) / len(loads):.1f}; {seconds / 60:.0f} min for {s['trials']} trials.",
        f"- Trials staged and judged: {s['judged']} of {s['trials']} ({s['not_staged']} could not be staged: "
        "the row says why).",
        f"- Right top cause: {s['top1_right']} of {s['judged']} ({top1:.0%}; target >= {TOP1_TARGET:.0%}: "
        f"{met(top1 >= TOP1_TARGET)}).",
        f"- Said OK / Healthy while a fault was in place: {s['said_ok_during_fault']} (target 0: "
        f"{met(s['said_ok_during_fault'] == 0)}).",
        f"- Harmful first steps: {s['harmful_first_steps']} (target 0: {met(s['harmful_first_steps'] == 0)}).",
        f"- Passed whole (all of the above and every entity named): {s['passed']} of {s['judged']}.",
        "",
        table(results),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--slow", action="store_true", help="also draw the modes that take minutes to reproduce")
    ap.add_argument("--out", type=Path, default=Path("docs/chaos.md"))
    ap.add_argument("--json", type=Path, default=None, help="also write every trial's result as JSON here")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error("--trials must be 1 or more")
    loads: list[float] = [os.getloadavg()[0]]

    def progress(res: dict) -> None:
        loads.append(os.getloadavg()[0])
        j = res["judgement"]
        state = res["error"] or ("pass" if j["passed"] else "FAIL: " + "; ".join(j["failures"]))
        print(
            f"trial {res['trial']} {res['shape']} {' + '.join(res['faults'])}: {state} ({res['seconds']} s)", flush=True
        )

    t0 = time.monotonic()
    cluster = standard()
    cluster.up(timeout=300)
    results = run_campaign(cluster, args.seed, args.trials, slow=args.slow, progress=progress)
    text = page(args.seed, results, loads, time.monotonic() - t0)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
