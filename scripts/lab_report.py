#!/usr/bin/env python3
"""The failure lab's table: mode | reproduced | top-1 | named | severity | seconds.

    scripts/lab_report.py                  read the results the lab tests wrote (KBOT_LAB_RESULTS,
                                           default /tmp/kbot-lab-results/<mode>.json)
    scripts/lab_report.py --run [MODE...]  run the modes now (all that run here, or the ones named),
                                           healing after each, and write their results first
    scripts/lab_report.py --json           the rows as JSON

A mode that cannot be reproduced on this machine is listed with the reason; one with no result
yet says so. "seconds" is from asking the first question to having its answer (the wait for the
symptom is not counted).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kbot_settings import load_harness  # noqa: E402
from lab.modes import MODES, by_name  # noqa: E402
from lab.runner import unavailable  # noqa: E402

RESULTS_DIR = load_harness().kbot_lab_results
HEADER = ("mode", "reproduced", "top-1", "named", "severity", "seconds")


def _mark(ok: bool) -> str:
    return "ok" if ok else "WRONG"


def row(mode, result: dict | None) -> dict:
    why_not = unavailable(mode)
    if why_not:
        return {
            "mode": mode.name,
            "reproduced": "no: cannot run here",
            "top-1": "-",
            "named": "-",
            "severity": "-",
            "seconds": "-",
            "note": why_not,
        }
    if result is None:
        return {
            "mode": mode.name,
            "reproduced": "not run",
            "top-1": "-",
            "named": "-",
            "severity": "-",
            "seconds": "-",
            "note": "no result yet (run the lab tests or --run)",
        }
    j = result.get("judgement")
    if not result.get("reproduced") or j is None:
        return {
            "mode": mode.name,
            "reproduced": "no",
            "top-1": "-",
            "named": "-",
            "severity": "-",
            "seconds": "-",
            "note": result.get("error") or "",
        }
    named = ", ".join(j["named"]) or "-"
    return {
        "mode": mode.name,
        "reproduced": f"yes ({result.get('symptom_seconds', 0):.0f} s)",
        "top-1": f"{j['top1']} {_mark(j['top1_ok'])}"
        + ("" if j["mechanism_ok"] or not j["top1_ok"] else " (mechanism WRONG)"),
        "named": f"{named} {_mark(j['named_ok'])}",
        "severity": f"{j['severity']} {_mark(j['severity_ok'])}",
        "seconds": f"{j['seconds']:.2f}" + ("" if j["fast"] else " SLOW"),
        "note": f"expected {mode.expect_entry} / {mode.expect_severity}" if not j["passed"] else "",
    }


def table(rows: list[dict]) -> str:
    cols = [*HEADER, "note"]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in HEADER}
    lines = [
        " | ".join(c.ljust(widths[c]) for c in HEADER) + " | note",
        "-|-".join("-" * widths[c] for c in HEADER) + "-|-----",
    ]
    for r in rows:
        lines.append(" | ".join(str(r[c]).ljust(widths[c]) for c in HEADER) + " | " + r["note"])
    del cols
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument(
        "--run", nargs="*", metavar="MODE", help="run these modes now (none named: every mode that runs here)"
    )
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    modes = by_name()
    if args.run is not None:
        unknown = [m for m in args.run if m not in modes]
        if unknown:
            print(f"lab_report: unknown mode(s) {', '.join(unknown)}; modes: {', '.join(modes)}", file=sys.stderr)
            return 2
        from lab.runner import run_mode

        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        for name in args.run or [m.name for m in MODES if unavailable(m) is None]:
            res = run_mode(modes[name], heal=True)
            (RESULTS_DIR / f"{name}.json").write_text(json.dumps(res, indent=1, default=str))
            print(f"lab_report: ran {name}", file=sys.stderr, flush=True)
    rows = []
    for m in MODES:
        path = RESULTS_DIR / f"{m.name}.json"
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            result = None
        rows.append(row(m, result))
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
