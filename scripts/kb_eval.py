#!/usr/bin/env python3
"""Evaluate the runbook search on the hand-written question set.

    .venv/bin/python scripts/kb_eval.py [--split tune|held|all] [--json] [QUESTIONS.yaml]

Prints top-1 (and top-3) accuracy per split and the confusion list: every question whose first
answer is not the expected entry, with what came first instead. Exit 0 always (this is a report;
tests/kb/test_kb_eval.py holds the bar), 2 on a bad question file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runbook_kb import default_kb  # noqa: E402
from runbook_kb.lookup import Lookup  # noqa: E402

DEFAULT_QUESTIONS = ROOT / "tests" / "kb" / "eval_questions.yaml"
SPLITS = ("tune", "held")


@dataclass(frozen=True)
class Question:
    q: str
    expect: str
    split: str


@dataclass(frozen=True)
class Outcome:
    question: str
    expected: str
    got: str | None
    rank: int | None  # 1-based rank of the expected entry, None when absent from the answers
    split: str
    reason: str


def load_questions(path: Path = DEFAULT_QUESTIONS) -> list[Question]:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("questions"), list):
        raise ValueError(f"{path.name}: expected a mapping with a 'questions' list")
    out = []
    for i, item in enumerate(raw["questions"]):
        if not isinstance(item, dict) or set(item) != {"q", "expect", "split"}:
            raise ValueError(f"{path.name}: question {i} needs exactly the fields q, expect, split")
        if item["split"] not in SPLITS:
            raise ValueError(f"{path.name}: question {i}: split must be one of {SPLITS}")
        out.append(Question(str(item["q"]), str(item["expect"]), str(item["split"])))
    return out


def evaluate(lookup: Lookup, questions: list[Question]) -> list[Outcome]:
    outcomes = []
    for q in questions:
        hits = lookup.answer(q.q, limit=10)
        ids = [h.id for h in hits]
        rank = ids.index(q.expect) + 1 if q.expect in ids else None
        outcomes.append(Outcome(q.q, q.expect, ids[0] if ids else None, rank, q.split,
                                hits[0].reason if hits else "no answer"))
    return outcomes


def accuracy(outcomes: list[Outcome], split: str | None = None, k: int = 1) -> float:
    chosen = [o for o in outcomes if split is None or o.split == split]
    if not chosen:
        return 0.0
    return sum(1 for o in chosen if o.rank is not None and o.rank <= k) / len(chosen)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="?", type=Path, default=DEFAULT_QUESTIONS)
    ap.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    try:
        questions = load_questions(args.questions)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"kb_eval: {exc}", file=sys.stderr)
        return 2
    kb = default_kb()
    known = set(kb.failure_modes) | set(kb.topics)
    unknown = sorted({q.expect for q in questions} - known)
    if unknown:
        print(f"kb_eval: expected ids not in the knowledge base: {unknown}", file=sys.stderr)
        return 2
    if args.split != "all":
        questions = [q for q in questions if q.split == args.split]
    started = time.perf_counter()
    lookup = Lookup(kb)
    outcomes = evaluate(lookup, questions)
    per_question_ms = 1000 * (time.perf_counter() - started) / max(1, len(questions))
    splits = [s for s in SPLITS if any(o.split == s for o in outcomes)]
    wrong = [o for o in outcomes if o.rank != 1]
    if args.json:
        print(json.dumps({
            "questions": len(outcomes),
            "accuracy": {s: {"top1": accuracy(outcomes, s), "top3": accuracy(outcomes, s, 3),
                             "n": sum(1 for o in outcomes if o.split == s)} for s in splits},
            "ms_per_question": round(per_question_ms, 2),
            "confusions": [asdict(o) for o in wrong],
        }, indent=2))
        return 0
    for s in splits:
        n = sum(1 for o in outcomes if o.split == s)
        print(f"{s:5} n={n:3}  top-1 {100 * accuracy(outcomes, s):5.1f} %   top-3 {100 * accuracy(outcomes, s, 3):5.1f} %")
    print(f"covered entries: {len({q.expect for q in questions})} of {len(known)}; "
          f"{per_question_ms:.1f} ms per question (Lookup build included)")
    if wrong:
        print("\nconfusions (split | question | expected -> got [rank of expected] | why got):")
        for o in wrong:
            rank = o.rank if o.rank is not None else "-"
            print(f"  {o.split} | {o.question} | {o.expected} -> {o.got} [{rank}] | {o.reason}")
    else:
        print("\nno confusions")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except BrokenPipeError:  # piped into head: the reader has seen enough
        sys.stderr.close()
        raise SystemExit(0)
