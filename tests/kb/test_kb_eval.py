"""The hand-written question set (eval_questions.yaml) against the ranking.

The held-out questions were never used for tuning (see the file's comments); the bar is the one
issue 8 sets. scripts/kb_eval.py prints the same figures and the tune split's confusion list.
Nothing here prints a held-out question: a failure names counts, never the questions.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from runbook_kb import default_kb
from runbook_kb.lookup import Lookup, tokens
from runbook_kb.ranker import EXAMPLES_FILE, WRITTEN_FILE, load_examples

ROOT = Path(__file__).resolve().parents[2]
HELD_OUT_TOP1 = 0.95
# 5-fold cross-validation on the tune split measured 96.8 %; the floor leaves room for new entries
# and examples without letting the word model quietly stop generalising.
CV_TOP1 = 0.95
CV_STRICT_TOP1 = 0.93


def _kb_eval():
    spec = importlib.util.spec_from_file_location("kb_eval", ROOT / "scripts" / "kb_eval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kb_eval", module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kb_eval():
    return _kb_eval()


@pytest.fixture(scope="module")
def questions(kb_eval):
    return kb_eval.load_questions()


def test_the_set_is_large_split_and_covers_every_entry(questions):
    kb = default_kb()
    entries = set(kb.failure_modes) | set(kb.topics)
    assert len(questions) >= 150
    assert {q.expect for q in questions} == entries, "every failure mode and reference topic is asked about"
    held = [q for q in questions if q.split == "held"]
    assert len(held) >= 100
    assert {q.expect for q in held} == entries, "the held-out part covers every entry too"
    dupes = [q for q, n in Counter(q.q.lower() for q in questions).items() if n > 1]
    assert not dupes, dupes


def test_held_out_phrasings_were_not_copied_into_the_vocabulary(questions):
    """Guard against gaming: no alias, key, term or vocabulary word equals a held-out question."""
    kb = default_kb()
    names = {tuple(tokens(a)) for m in kb.failure_modes.values() for a in m.aliases}
    names |= {tuple(tokens(x)) for t in kb.topics.values() for x in (*t.aliases, *t.keys, *t.terms, *t.intent)}
    names |= {tuple(tokens(k)) for k in kb.vocabulary}
    copied = [q.q for q in questions if q.split == "held" and tuple(tokens(q.q)) in names]
    assert not copied, copied


def test_the_example_questions_are_the_tune_split_and_never_a_held_out_question(questions):
    """The word model trains on data/examples.yaml (a copy of the tune split) and on written examples;
    a held-out question in either would make the held-out figure a training figure."""
    kb = default_kb()
    copied = load_examples(EXAMPLES_FILE)
    written = load_examples(WRITTEN_FILE)
    entries = set(kb.failure_modes) | set(kb.topics)
    assert set(copied) == entries and set(written) == entries, "every entry has examples of both kinds"
    pairs = sorted((q, eid) for eid, qs in copied.items() for q in qs)
    assert pairs == sorted((q.q, q.expect) for q in questions if q.split == "tune"), (
        "data/examples.yaml must be exactly the tune split of eval_questions.yaml"
    )
    asked = {tuple(tokens(q.q)) for q in questions}
    held = {tuple(tokens(q.q)) for q in questions if q.split == "held"}
    in_written = [q for qs in written.values() for q in qs if tuple(tokens(q)) in asked]
    in_copied = sum(1 for qs in copied.values() for q in qs if tuple(tokens(q)) in held)
    assert not in_written, f"{len(in_written)} written examples are evaluation questions"
    assert not in_copied, f"{in_copied} copied examples are held-out questions"


def test_held_out_top1(kb_eval, questions):
    outcomes = kb_eval.evaluate(Lookup(default_kb()), questions)
    held = kb_eval.accuracy(outcomes, "held")
    wrong = sum(1 for o in outcomes if o.split == "held" and o.rank != 1)
    assert held >= HELD_OUT_TOP1, f"held-out top-1 {held:.1%} < {HELD_OUT_TOP1:.0%} ({wrong} confusions, not shown)"


def test_cross_validated_top1_on_the_tune_split(kb_eval, questions):
    """What the held-out figure predicts without reading it: each tune question asked of a model
    trained without it."""
    outcomes = kb_eval.cross_validate(default_kb(), questions, 5)
    assert len(outcomes) == sum(1 for q in questions if q.split == "tune")
    top1 = kb_eval.accuracy(outcomes, "tune")
    assert top1 >= CV_TOP1, f"5-fold cross-validated top-1 {top1:.1%} < {CV_TOP1:.0%}"


def test_strict_cross_validation_drops_only_the_words_of_the_asked_fold(kb_eval):
    kb = default_kb()
    asked = [kb_eval.Question("URP flat since the hot key deploy", "broker-loss", "tune")]
    others = [kb_eval.Question("hot key on one partition", "hot-partition", "tune")]
    stripped = kb_eval.without_fold_words(kb, asked, others)
    assert "urp" in kb.vocabulary and "urp" not in stripped.vocabulary
    assert "hot key" in stripped.vocabulary, "a word the other folds use stays"
    assert "isr shrink" in stripped.vocabulary, "a word no asked question uses stays"
    assert stripped.failure_modes["broker-loss"].title == kb.failure_modes["broker-loss"].title


def test_strict_cross_validated_top1_on_the_tune_split(kb_eval, questions):
    """The pessimistic estimate (measured 95.0 %): the KB words only the asked fold uses are taken out."""
    outcomes = kb_eval.cross_validate(default_kb(), questions, 5, strict=True)
    top1 = kb_eval.accuracy(outcomes, "tune")
    assert top1 >= CV_STRICT_TOP1, f"strict 5-fold cross-validated top-1 {top1:.1%} < {CV_STRICT_TOP1:.0%}"


def _mini_set(tmp_path):
    """Two questions per split, one answered right and one wrong in each."""
    path = tmp_path / "q.yaml"
    path.write_text(
        "questions:\n"
        "  - {q: 'UnderMinIsrPartitionCount', expect: under-min-isr, split: tune}\n"
        "  - {q: 'OfflineLogDirectoryCount', expect: memory, split: tune}\n"
        "  - {q: 'ProducerFencedException', expect: producer-fencing, split: held}\n"
        "  - {q: 'LastStableOffsetLag', expect: security, split: held}\n"
    )
    return path


def test_the_eval_script_reports_splits_and_tune_confusions_only(tmp_path, capsys, kb_eval):
    path = _mini_set(tmp_path)
    assert kb_eval.main([str(path), "--split", "all"]) == 0
    out = capsys.readouterr().out
    assert "tune  n=  2  top-1  50.0 %" in out and "held  n=  2  top-1  50.0 %" in out
    assert "OfflineLogDirectoryCount | memory -> log-dir-failure" in out
    assert "LastStableOffsetLag" not in out, "a held-out confusion was printed without --show-held"
    assert "1 held-out confusions not shown" in out
    assert kb_eval.main([str(path), "--split", "all", "--show-held"]) == 0
    assert "LastStableOffsetLag | security -> hanging-transaction" in capsys.readouterr().out


def test_the_eval_script_defaults_to_the_tune_split_and_speaks_json(tmp_path, capsys, kb_eval):
    path = _mini_set(tmp_path)
    assert kb_eval.main([str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["accuracy"]) == {"tune"}
    assert [c["question"] for c in report["confusions"]] == ["OfflineLogDirectoryCount"]
    assert kb_eval.main([str(path), "--json", "--split", "held"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["confusions"] == [] and report["held_confusions_hidden"] == 1


def test_the_eval_script_refuses_bad_options_with_a_short_error(capsys, kb_eval):
    assert kb_eval.main(["--cv", "1"]) == 2
    err = capsys.readouterr().err
    assert "--cv needs a number of folds from 2 to 20" in err and "Traceback" not in err
    assert kb_eval.main(["--split", "nope"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_the_eval_script_refuses_a_bad_file_with_a_short_error(tmp_path, capsys, kb_eval):
    bad = tmp_path / "q.yaml"
    bad.write_text("questions:\n  - {q: 'URP', expect: broker-loss}\n")
    assert kb_eval.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "needs exactly the fields q, expect, split" in err and "Traceback" not in err
    bad.write_text("questions:\n  - {q: 'URP', expect: no-such-entry, split: held}\n")
    assert kb_eval.main([str(bad)]) == 2
    assert "no-such-entry" in capsys.readouterr().err
