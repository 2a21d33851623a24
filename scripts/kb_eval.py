#!/usr/bin/env python3
"""Evaluate the runbook search on the hand-written question set.

    .venv/bin/python scripts/kb_eval.py [--split tune|held|all] [--cv K [--strict]] [--show-held] [--json]
                                        [QUESTIONS.yaml]

Prints top-1 (and top-3) accuracy per split and the confusion list: every question whose first
answer is not the expected entry, with what came first instead. Exit 0 always (this is a report;
tests/kb/test_kb_eval.py holds the bar), 2 on a bad question file or bad options.

The held-out split must stay held out: the default is the tune split, and held-out confusions are
never printed unless --show-held is passed (its aggregate accuracy is printed with --split held|all).

The word model of the search (runbook_kb/ranker.py) is trained on data/examples.yaml, a copy of the
tune split (and on data/examples_written.yaml), so the tune figure is a training figure. --cv K
measures what the tune figure cannot: K-fold cross-validation over the tune questions, the model
trained each time without the fold it is asked about (folds are dealt round-robin within each
entry, so every fold covers every entry).
The aliases and vocabulary were written while the tune split was read, so even that flatters the
search; --strict also drops, per fold, the KB words only the asked fold's questions use.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runbook_kb import KnowledgeBase, default_kb  # noqa: E402
from runbook_kb.lookup import Lookup, tokens  # noqa: E402
from runbook_kb.ranker import WRITTEN_FILE, load_examples, merge  # noqa: E402

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
        outcomes.append(
            Outcome(q.q, q.expect, ids[0] if ids else None, rank, q.split, hits[0].reason if hits else "no answer")
        )
    return outcomes


def folds(questions: list[Question], k: int) -> list[int]:
    """The fold of each question: round-robin within each entry, in file order."""
    seen: Counter = Counter()
    out = []
    for q in questions:
        out.append(seen[q.expect] % k)
        seen[q.expect] += 1
    return out


def _contains(toks: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(toks[i : i + n]) == phrase for i in range(len(toks) - n + 1))


def without_fold_words(kb: KnowledgeBase, asked: list[Question], others: list[Question]) -> KnowledgeBase:
    """The KB without the aliases, topic terms and vocabulary words that occur in an asked question but
    in none of the others: as if the words had not been added for the questions now asked (the
    tune split was read while they were written, so plain cross-validation flatters them)."""
    asked_toks = [tokens(q.q) for q in asked]
    other_toks = [tokens(q.q) for q in others]

    def keep(word: str) -> bool:
        phrase = tuple(tokens(word))
        return not (
            phrase
            and any(_contains(t, phrase) for t in asked_toks)
            and not any(_contains(t, phrase) for t in other_toks)
        )

    modes = {
        eid: m.model_copy(update={"aliases": [a for a in m.aliases if keep(a)] or m.aliases[:1]})
        for eid, m in kb.failure_modes.items()
    }
    reference = dict(kb.reference)
    holder = reference.get("topics")
    if holder is not None:
        reference["topics"] = holder.model_copy(
            update={
                "topics": [
                    t.model_copy(
                        update={
                            "aliases": [a for a in t.aliases if keep(a)] or t.aliases[:1],
                            "terms": [w for w in t.terms if keep(w)],
                            "intent": [w for w in t.intent if keep(w)],
                        }
                    )
                    for t in holder.topics
                ]
            }
        )
    vocabulary = {w: target for w, target in kb.vocabulary.items() if keep(w)}
    return dataclasses.replace(kb, failure_modes=modes, reference=reference, vocabulary=vocabulary)


def cross_validate(kb: KnowledgeBase, questions: list[Question], k: int, strict: bool = False) -> list[Outcome]:
    """Each tune question answered by a Lookup whose word model never saw it (k-fold): trained on the
    other folds plus the written examples (data/examples_written.yaml, never an evaluation question).
    ``strict`` also takes out the KB words only the asked fold uses (without_fold_words)."""
    tune = [q for q in questions if q.split == "tune"]
    fold_of = folds(tune, k)
    written = load_examples(WRITTEN_FILE)
    outcomes: list[Outcome | None] = [None] * len(tune)
    for f in range(k):
        examples: dict[str, list[str]] = defaultdict(list)
        for q, g in zip(tune, fold_of):
            if g != f:
                examples[q.expect].append(q.q)
        fold_kb = kb
        if strict:
            fold_kb = without_fold_words(
                kb, [q for q, g in zip(tune, fold_of) if g == f], [q for q, g in zip(tune, fold_of) if g != f]
            )
        lookup = Lookup(fold_kb, examples=merge(written, examples))
        asked = [i for i, g in enumerate(fold_of) if g == f]
        for i, o in zip(asked, evaluate(lookup, [tune[i] for i in asked])):
            outcomes[i] = o
    return [o for o in outcomes if o is not None]


def accuracy(outcomes: list[Outcome], split: str | None = None, k: int = 1) -> float:
    chosen = [o for o in outcomes if split is None or o.split == split]
    if not chosen:
        return 0.0
    return sum(1 for o in chosen if o.rank is not None and o.rank <= k) / len(chosen)


def _print_confusions(wrong: list[Outcome], hidden: int) -> None:
    if wrong:
        print("\nconfusions (split | question | expected -> got [rank of expected] | why got):")
        for o in wrong:
            rank = o.rank if o.rank is not None else "-"
            print(f"  {o.split} | {o.question} | {o.expected} -> {o.got} [{rank}] | {o.reason}")
    else:
        print("\nno confusions" + (" shown" if hidden else ""))
    if hidden:
        print(f"\n{hidden} held-out confusions not shown (the held-out split stays unread; --show-held shows them)")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="?", type=Path, default=DEFAULT_QUESTIONS)
    ap.add_argument(
        "--split", choices=(*SPLITS, "all"), default="tune", help="which questions to evaluate (default: tune)"
    )
    ap.add_argument("--cv", type=int, metavar="K", help="K-fold cross-validation of the word model on the tune split")
    ap.add_argument(
        "--strict",
        action="store_true",
        help="with --cv: also drop the KB aliases/terms/vocabulary only the asked fold uses",
    )
    ap.add_argument("--show-held", action="store_true", help="also print held-out confusions (spoils the held-out set)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:  # argparse has printed its short usage error
        return 0 if exc.code == 0 else 2
    if args.cv is not None and not 2 <= args.cv <= 20:
        print("kb_eval: --cv needs a number of folds from 2 to 20", file=sys.stderr)
        return 2
    if args.strict and args.cv is None:
        print("kb_eval: --strict goes with --cv K", file=sys.stderr)
        return 2
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
    started = time.perf_counter()
    if args.cv is not None:
        outcomes = cross_validate(kb, questions, args.cv, strict=args.strict)
        mode = f"{args.cv}-fold cross-validation on the tune split" + (
            " (strict: without the KB words only the asked fold uses)" if args.strict else ""
        )
    else:
        if args.split != "all":
            questions = [q for q in questions if q.split == args.split]
        outcomes = evaluate(Lookup(kb), questions)
        mode = "the shipped word model (trained on the tune split and the written examples)"
    per_question_ms = 1000 * (time.perf_counter() - started) / max(1, len(outcomes))
    splits = [s for s in SPLITS if any(o.split == s for o in outcomes)]
    wrong = [o for o in outcomes if o.rank != 1]
    shown = [o for o in wrong if o.split != "held" or args.show_held]
    hidden = len(wrong) - len(shown)
    if args.json:
        print(
            json.dumps(
                {
                    "mode": mode,
                    "questions": len(outcomes),
                    "accuracy": {
                        s: {
                            "top1": accuracy(outcomes, s),
                            "top3": accuracy(outcomes, s, 3),
                            "n": sum(1 for o in outcomes if o.split == s),
                        }
                        for s in splits
                    },
                    "ms_per_question": round(per_question_ms, 2),
                    "confusions": [asdict(o) for o in shown],
                    "held_confusions_hidden": hidden,
                },
                indent=2,
            )
        )
        return 0
    print(mode)
    for s in splits:
        n = sum(1 for o in outcomes if o.split == s)
        print(
            f"{s:5} n={n:3}  top-1 {100 * accuracy(outcomes, s):5.1f} %   top-3 {100 * accuracy(outcomes, s, 3):5.1f} %"
        )
    print(
        f"covered entries: {len({o.expected for o in outcomes})} of {len(known)}; "
        f"{per_question_ms:.1f} ms per question (Lookup builds included)"
    )
    _print_confusions(shown, hidden)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except BrokenPipeError:  # piped into head: the reader has seen enough
        sys.stderr.close()
        raise SystemExit(0) from None
