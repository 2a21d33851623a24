"""A word model learnt from example questions: which entry do questions worded like this one ask for?

The structured keys (lookup.py) say what a question names; they cannot say that "the VM running
broker 1 was deleted" is a lost broker or that "who serves reads, leader or followers?" asks how
replication works. Those are wordings, and wordings are learnt best from examples: the example
questions shipped in data/examples.yaml plus the entries' own text (titles, aliases, symptoms,
causes, topic summaries), each a labelled example.

Two files of examples: data/examples.yaml is a copy of the tune split of the evaluation questions
(tests/kb/eval_questions.yaml), data/examples_written.yaml holds questions written from the runbook
text for the model alone. Neither holds a held-out evaluation question (tests/kb/test_kb_eval.py).

The model is a multinomial naive Bayes over features the lookup extracts (word unigrams, word
bigrams, the key phrases it found, the entries those keys point at). Counting is all its training
takes (~50 ms with the feature extraction, in pure Python), so it is trained when the Lookup is
built, from the data shipped in the package: no weights file to keep in step with the examples.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

from runbook_kb.loader import DATA_DIR, KBError, KnowledgeBase
from runbook_kb.text import PAREN

EXAMPLES_FILE = DATA_DIR / "examples.yaml"  # the tune split's questions (scripts/kb_eval.py folds them)
WRITTEN_FILE = DATA_DIR / "examples_written.yaml"  # written for the model, in every fold

ALPHA = 0.1  # additive smoothing: small, because ~20 examples per entry leave most words unseen
KB_TEXT_WEIGHT = 0.5  # a sentence of the entry's own text counts half an example question
# Naive Bayes adds up every word as if independent, so its raw probabilities are nearly always 0 or 1;
# dividing the log-likelihoods by this spreads them so they can be weighed against the keys.
TEMPERATURE = 20.0


def load_examples(path: Path = EXAMPLES_FILE) -> dict[str, list[str]]:
    """Example questions per entry id, from one examples file."""
    try:
        # libyaml's loader when present: the pure-Python one is several times slower, at every build
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError) as exc:
        raise KBError(f"{path.name}: cannot read: {exc}") from exc
    examples = raw.get("examples") if isinstance(raw, dict) else None
    if not isinstance(examples, dict) or not all(
        isinstance(v, list) and all(isinstance(q, str) for q in v) for v in examples.values()
    ):
        raise KBError(f"{path.name}: field 'examples': expected a mapping of entry ids to lists of questions")
    return {str(k): list(v) for k, v in examples.items()}


def shipped_examples() -> dict[str, list[str]]:
    """Every example question the package ships: the copied tune questions and the written ones."""
    return merge(load_examples(EXAMPLES_FILE), load_examples(WRITTEN_FILE))


def kb_sentences(kb: KnowledgeBase) -> dict[str, list[str]]:
    """Each entry's own text as short labelled examples: names, symptoms, causes, summaries."""
    out: dict[str, list[str]] = defaultdict(list)
    for m in kb.failure_modes.values():
        out[m.id] += [m.title, *m.aliases, *(PAREN.sub(" ", e) for e in m.errors)]
        out[m.id] += [s.metric for s in m.symptoms] + [s.signature for s in m.symptoms if s.signature]
        out[m.id] += _sentences(m.cause)
        out[m.id] += list(m.triage)
    for t in kb.topics.values():
        out[t.id] += [t.title, *t.aliases, *t.keys, " ".join(t.terms), *t.intent]
        out[t.id] += _sentences(t.summary)
    return dict(out)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in text.replace("; ", ". ").split(". ") if s.strip()]


class WordModel:
    """Multinomial naive Bayes over feature strings; labels are entry ids."""

    def __init__(self, labelled: Iterable[tuple[Sequence[str], str, float]], alpha: float | None = None):
        alpha = ALPHA if alpha is None else alpha
        # weighted counts (floats: a runbook sentence counts less than an example question)
        counts: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
        prior: defaultdict[str, float] = defaultdict(float)
        for features, label, weight in labelled:
            prior[label] += weight
            for f in features:
                counts[label][f] += weight
        vocab = {f for c in counts.values() for f in c}
        self.labels = sorted(prior)
        total = sum(prior.values())
        # Uniform-ish prior: how many examples an entry has says how busy its author was, not how
        # often it is asked for, so the prior is flattened to a square root.
        self._log_prior = {lab: 0.5 * math.log(prior[lab] / total) for lab in self.labels}
        self._log_p: dict[str, dict[str, float]] = {}
        self._log_unseen: dict[str, float] = {}
        v = len(vocab)
        for lab in self.labels:
            denom = sum(counts[lab].values()) + alpha * v
            self._log_p[lab] = {f: math.log((c + alpha) / denom) for f, c in counts[lab].items()}
            self._log_unseen[lab] = math.log(alpha / denom)
        self.vocab = frozenset(vocab)

    def posteriors(self, features: Sequence[str], labels: Iterable[str] | None = None) -> dict[str, float]:
        """P(entry | features) over the given labels, from the features the model knows; {} when it
        knows none of them (a question in words no example used says nothing to the model)."""
        known = [f for f in features if f in self.vocab]
        if not known:
            return {}
        chosen = [lab for lab in (labels if labels is not None else self.labels) if lab in self._log_p]
        if not chosen:
            return {}
        logs: dict[str, float] = {}
        for lab in chosen:
            table, unseen = self._log_p[lab], self._log_unseen[lab]
            logs[lab] = self._log_prior[lab] + sum(table.get(f, unseen) for f in known)
        top = max(logs.values())
        exp = {lab: math.exp((x - top) / TEMPERATURE) for lab, x in logs.items()}
        z = sum(exp.values())
        return {lab: e / z for lab, e in exp.items()}


def merge(*sources: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Example questions of several sources per entry id, in order."""
    out: dict[str, list[str]] = defaultdict(list)
    for src in sources:
        for k, v in src.items():
            out[k] += list(v)
    return dict(out)
