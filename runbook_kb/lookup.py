"""Find runbook entries (failure modes and reference topics) for a key or a free-text question.

Ranking is structure first, then words:

1. Structured keys found anywhere in the question - entry ids, titles, aliases, metric and MBean
   names, error classes, config keys, and the symptom vocabulary ("URP" -> UnderReplicatedPartitions) -
   matched as whole phrases, longest first. "why is URP 12" and "URP" therefore reach the same entries
   with the same weights, and noise words around a key cannot change which entries it points at.
2. A number next to a metric ("ActiveControllerCount 0", "12 AtMinIsr partitions") is compared with
   each entry's condition for that metric ("> 0", "< 0.1"): an entry whose condition holds gains, one
   whose condition is contradicted loses.
3. The remaining words are ranked with BM25F over weighted fields (names, keys, body text), so rare,
   specific words decide and common ones barely count. Words that only say a metric moved
   ("spiking", "status") are left out, so they cannot reorder what a key found.
4. Small, named nudges from the question's form: "what is / how does / difference between" leans to
   reference topics, "died / stuck / failing" to failure modes, a topic's intent words ("default")
   to that topic, and "should I <something the runbook says not to do>" to the entry that says so.
5. A word model learnt from example questions (ranker.py: naive Bayes over the question's words,
   word pairs and the keys found) adds how likely each entry is given the wording: it knows that
   "the VM running broker 1 was deleted" is a lost broker although no key says so. It is trained
   when the Lookup is built, from data shipped in the package.

All weights are constants below; scripts/kb_eval.py measures them on tests/kb/eval_questions.yaml
(``--cv 5`` cross-validates the word model on the tune split).

``search()`` ranks failure modes only (what ``why`` and ``triage`` diagnose); ``answer()`` ranks
failure modes and reference topics together.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz, process

from runbook_kb import cache, loader
from runbook_kb.loader import KnowledgeBase, table_rows
from runbook_kb.ranker import KB_TEXT_WEIGHT, WordModel, kb_sentences, shipped_examples
from runbook_kb.schema import Configs, FailureMode, PartitionCategories, ReferenceTopic, Signals
from runbook_kb.text import (
    CONFIG_KEY,
    IDENT,
    PAREN,
    QUOTED,
    comparisons,
    condition_holds,
    identifiers,
    iter_strings,
    norm,
    number,
    stem,
    tokens,
    variants,
)

__all__ = ["Hit", "Lookup", "Match", "norm", "tokens"]

_STOP = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was were what when which
    why with how do does did i we our my me you your should can could would will it's there their them then than
    so if but not no yes any all some just very much many more most also about into over under up out off
    after before while during since until again still now right get got getting see seeing seen look looking
    keep keeps kept happen happens happening happened going go one two three four five per vs via
    kafka broker brokers cluster topic topics partition partitions""".split()
)
# Questions about how something is, not about what is wrong now.
_DEFINITION = re.compile(
    r"(?:^|\b)(?:what (?:is|are|does|do|exactly)|how (?:does|many|much|is|are)|how long|how (?:big|large)|when (?:is|does|do|are)|why (?:does|do)|explain|describe)\b"
    r"|^(?:can|does|do)\b|\bwhich\b|\bwhat (?:happens|if)\b|\bwhere (?:is|does|do|are)\b"
    r"|\b(?:difference between|vs|versus|meaning of|meaning|mean|explained|purpose)\b"
)
# Words of something going wrong now: they lean to failure modes, as definitions lean to topics.
_PROBLEM = frozenset(
    """lost lose losing down dead died die dies crash crashed crashing stuck fail fails failing failed failure error errors
    exception exceptions timeout timeouts hang hangs hanging broken cannot can't unable rejected refused evicted
    missing halted gone killed frozen freezes stalled saturated maxed overloaded busy slow lagging behind falls
    falling""".split()
)
# A key right after one of these is a requirement, not evidence: "guarantees no data loss".
_NEGATION = frozenset("no without avoid avoiding prevent prevents never".split())
_VERB_FILLER = frozenset("is are was were a an one =".split())
# Words that say a metric moved but not how: "IsrShrinksPerSec spiking" is the same evidence as
# "IsrShrinksPerSec" and must rank the same ("flapping", "flat", "stuck" do say how, and count).
_NOISE = frozenset(
    """spike spikes spiking spiked high higher rising rose increasing increased elevated firing status alarm
    good half first soon quick quickly other others ok okay fine thing things way lot lots every each both same
    sum total across average avg""".split()
)
# Tokens that carry no meaning for the ranking but must not break key phrases ("12" after URP).
_FILLER = frozenset("is are was at of to the a an = equals equal now currently reads shows showing".split())

Kind = Literal["failure-mode", "reference"]

# Weights of the structured keys. Names beat symptoms, symptoms beat configs: a question that names
# an entry means that entry; a metric points at the entries it is a symptom of, in their order.
W_ID = 100
W_ALIAS = 95
W_ERROR = 90
W_SYMPTOM = 92  # minus 3 per position in the entry's symptom list
W_TOPIC_KEY = 70  # as strong as a failure mode's config key: the words around it decide
W_TOPIC_METRIC = 80  # ties with a failure mode's later symptoms; words and other keys decide
W_WORD_KEY = 80  # a plain word ("offline") or a described symptom ("consumer group rebalances")
W_ALERT = 74  # below every own symptom: the alert table only says where else to look
W_OWN_CONFIG = 75
W_CONFIG = 70
W_LEVER = 65

EXTRA_KEY_SHARE = 0.25  # each further distinct key of the same entry adds this share of its weight
DEFINITION_BONUS = 10.0  # "what is / how does / difference between" questions lean to reference topics
PROBLEM_BONUS = 10.0  # "... died / stuck / failing" questions lean to failure modes
INTENT_BONUS = 15.0  # a topic's own intent word ("default", "alert threshold") is a deliberate ask
GAP_FACTOR = 0.9  # a name matched with one extra word inside it is a little less certain
DO_NOT_BONUS = 20.0  # times the share of a do-not item's words the question repeats ("should I lower ...")
NUMBER_AGREES = 8.0
NUMBER_CONTRADICTS = -20.0
WORD_SCALE = 2.2  # BM25 points -> key points
FIELD_WEIGHTS = {"name": 3.0, "keys": 1.5, "body": 1.0, "donot": 2.0, "facts": 0.4}
K1, B = 1.2, 0.75
KEEP_RATIO = 0.35  # answers scoring under this share of the best are the long tail
# The word model's probability (0-1) -> key points. With ranker.TEMPERATURE spreading the
# probabilities, a sure model outweighs a name and a torn one barely counts. Measured with 5-fold
# cross-validation on the tune split (scripts/kb_eval.py --cv 5): keys and words alone 92.3 % top-1,
# the model alone 95 %, both 96.8 %; W_MODEL from 150 to 600 (TEMPERATURE scaled along) scores
# within one question of that.
W_MODEL = 300.0
P_MIN = 0.1  # an entry no key or word reached answers only when the word model is this sure


_STOP_STEMS = frozenset(stem(w) for w in _STOP) | _STOP
_NOISE_STEMS = frozenset(stem(w) for w in _NOISE)
_PROBLEM_STEMS = frozenset(stem(w) for w in _PROBLEM)


@dataclass(frozen=True)
class Match:
    entry: FailureMode
    score: float
    reason: str  # what matched: "symptom UnderReplicatedPartitions", "alias 'URP flat'", ...


@dataclass(frozen=True)
class Hit:
    """One ranked answer: a failure mode or a reference topic."""

    id: str
    kind: Kind
    title: str
    score: float
    reason: str


# A key phrase found in a question: token start, token end, the phrase, its weight factor.
_Span = tuple[int, int, tuple[str, ...], float]
_NO_WORDS: Counter[str] = Counter()  # the words of a field a document does not have


@dataclass
class _Doc:
    id: str
    kind: Kind
    title: str
    names: list[str]
    fields: dict[str, Counter[str]]


@dataclass(frozen=True)
class _KeyHit:
    doc: str
    weight: float
    reason: str


_BUILT: dict[int, tuple[KnowledgeBase, "Lookup"]] = {}


def remember(kb: KnowledgeBase, lookup: "Lookup") -> "Lookup":
    """Make ``lookup`` the one Lookup.for_kb returns for ``kb`` in this process."""
    if len(_BUILT) >= 4:  # tests load a few KB copies; never hold more than a handful
        _BUILT.clear()
    _BUILT[id(kb)] = (kb, lookup)
    return lookup


class Lookup:
    def __init__(self, kb: KnowledgeBase, examples: Mapping[str, Sequence[str]] | None = None):
        """``examples``: example questions per entry id for the word model; the shipped ones
        (ranker.shipped_examples) when None. scripts/kb_eval.py passes folds of its own to cross-validate."""
        self.kb = kb
        self._order: dict[str, int] = {eid: i for i, eid in enumerate(kb.catalogue)}
        for i, tid in enumerate(kb.topics):
            self._order[tid] = 100 + i
        self._phrases: dict[tuple[str, ...], list[_KeyHit]] = defaultdict(list)
        # (doc id, phrase) -> conditions that a number next to the phrase is compared with
        self._conditions: dict[tuple[str, tuple[str, ...]], list[str]] = defaultdict(list)
        self._display: dict[str, str] = {}
        self._label: dict[tuple[str, ...], str] = {}  # phrase -> the key as written in the KB
        self._docs: dict[str, _Doc] = {}
        self._do_not: dict[str, list[frozenset[str]]] = {}
        self._intent: dict[str, list[frozenset[str]]] = {}
        self._whole_only: set[tuple[str, ...]] = set()
        for mode in kb.failure_modes.values():
            self._index_mode(mode)
        for topic in kb.topics.values():
            self._index_topic(topic)
        self._index_tables()
        self._index_vocabulary()
        # The lengths of the key phrases starting with each word: the span search tries only those
        # (training the word model runs it over ~1,700 texts at every build).
        lengths: dict[str, set[int]] = defaultdict(set)
        for p in self._phrases:
            if p:
                lengths[p[0]].add(len(p))
        self._lengths = {w: sorted(ns, reverse=True) for w, ns in lengths.items()}
        # Phrases that may match with one extra word inside, by (first word, last word, length): with
        # the extra word, the last word sits one place further, and both ends are known before trying.
        self._gappable: dict[tuple[str, str, int], list[tuple[str, ...]]] = defaultdict(list)
        gap_lengths: dict[str, set[int]] = defaultdict(set)
        for p in self._phrases:
            if len(p) >= 2:
                self._gappable[(p[0], p[-1], len(p))].append(p)
                gap_lengths[p[0]].add(len(p))
        self._gap_lengths = {w: sorted(ns) for w, ns in gap_lengths.items()}
        self._prepare_bm25()
        self._train(shipped_examples() if examples is None else examples)

    @classmethod
    def for_kb(cls, kb: KnowledgeBase) -> "Lookup":
        """The lookup for a knowledge base, built once per process: a request's Context asks for it
        every time, and the build (~100 ms of indexing and training the word model) should not be paid per question."""
        cached = _BUILT.get(id(kb))
        if cached is None or cached[0] is not kb:
            prebuilt = loader.prebuilt_lookups.pop(id(kb), None)
            if prebuilt is not None:
                return remember(kb, prebuilt)  # built by an earlier process, from the same inputs
            lookup = remember(kb, cls(kb))
            if kb is loader.fresh_default:  # the packaged runbook: the next process loads both ready-made
                cache.store(loader.DATA_DIR, kb, lookup)
            return lookup
        return cached[1]

    # ---- index: structured keys ---------------------------------------------------------------

    def _add(self, key: str, doc: str, weight: float, reason: str, condition: str | None = None) -> None:
        for phrase in variants(key):
            hits = self._phrases[phrase]
            same = next((h for h in hits if h.doc == doc), None)
            if same is None or same.weight < weight:
                if same is not None:
                    hits.remove(same)
                hits.append(_KeyHit(doc, weight, reason))
            if condition:
                self._conditions[(doc, phrase)].append(condition)
            self._label.setdefault(phrase, key)
        self._display.setdefault(norm(key), key)

    def _index_mode(self, m: FailureMode) -> None:
        self._add(m.id, m.id, W_ID, f"entry {m.id}")
        self._add(m.title, m.id, W_ID, f"title '{m.title}'")
        for a in m.aliases:
            # A config key listed as an alias is the entry's own setting: above other entries' config
            # keys, below a symptom or a name, so "default of <key>" can still reach config-defaults.
            weight = W_OWN_CONFIG if CONFIG_KEY.fullmatch(a) else W_ALIAS
            self._add(a, m.id, weight, f"alias '{a}'")
        for e in m.errors:
            self._add(PAREN.sub("", e), m.id, W_ERROR, f"error {PAREN.sub('', e).strip()}")
            # the requests named in an error's context ("TimeoutException (admin CreateTopics ...)")
            for name in IDENT.findall(" ".join(re.findall(r"\(([^)]*)\)", e))):
                self._add(name, m.id, W_LEVER, f"error {PAREN.sub('', e).strip()} on {name}")
        for i, s in enumerate(m.symptoms):
            # The first symptom is the one the runbook reads first; later ones weigh less.
            weight = W_SYMPTOM - 3 * i
            # Quoted log lines are evidence as precise as a metric name.
            names = QUOTED.findall(s.metric) + (
                identifiers(s.metric)
                or [part for part in PAREN.sub("", s.metric).split(" / ") if 0 < len(part.split()) <= 4]
            )
            if s.mbean and "name=" in s.mbean:
                names.append(s.mbean.split(",topic=")[0])
            for name in names:
                label = name if len(names) == 1 or "name=" not in name else names[0]
                # A described symptom ("consumer group rebalances") is a weaker pointer than a metric name.
                w = weight if IDENT.search(name) or "name=" in name else min(weight, W_WORD_KEY)
                self._add(name, m.id, w, f"symptom {label}", s.condition)
        for c in m.configs:
            self._add(c, m.id, W_CONFIG, f"config {c}")
        for lever in m.levers:
            for name in identifiers(lever.name):
                self._add(name, m.id, W_LEVER, f"lever {lever.name}")
        body = [m.cause, *(s.signature or "" for s in m.symptoms), *(s.condition for s in m.symptoms), *m.triage]
        self._do_not[m.id] = [
            frozenset(t for t in tokens(d.action) if t not in _STOP_STEMS and number(t) is None) for d in m.do_not
        ]
        self._docs[m.id] = _Doc(
            m.id,
            "failure-mode",
            m.title,
            [m.title, *m.aliases],
            {
                "name": Counter(tokens(" ".join([m.id, m.title, *m.aliases]))),
                "keys": Counter(tokens(" ".join([*(s.metric for s in m.symptoms), *m.errors, *m.configs]))),
                "body": Counter(tokens(" ".join(body))),
                # "should I ..." questions are often answered by what the entry says not to do
                "donot": Counter(tokens(" ".join(d.action for d in m.do_not))),
                "facts": Counter(tokens(" ".join(m.mechanism_notes))),
            },
        )

    def _index_topic(self, t: ReferenceTopic) -> None:
        # A topic's name is a subject, often mentioned in passing ("after a leader election"); it weighs
        # like an alias, below a failure mode's own name.
        self._add(t.id, t.id, W_ALIAS, f"topic {t.id}")
        named = {v for a in t.aliases for v in variants(a)}
        if len(tokens(t.id)) == 1:
            self._whole_only.update(variants(t.id) - named)
        self._add(t.title, t.id, W_ALIAS, f"title '{t.title}'")
        for a in t.aliases:
            self._add(a, t.id, W_ALIAS, f"alias '{a}'")
        for k in t.keys:
            # A metric the topic explains is its subject; a config key is shared with failure modes.
            weight = W_TOPIC_METRIC if IDENT.fullmatch(k) and not k[0].islower() else W_TOPIC_KEY
            self._add(k, t.id, weight, f"key {k}")
        self._intent[t.id] = [frozenset(tokens(w)) for w in t.intent]
        self._docs[t.id] = _Doc(
            t.id,
            "reference",
            t.title,
            [t.title, *t.aliases],
            {
                "name": Counter(tokens(" ".join([t.id, t.title, *t.aliases, *t.terms, *t.intent]))),
                "keys": Counter(tokens(" ".join(t.keys))),
                "body": Counter(tokens(t.summary)),
                "donot": Counter(),
                "facts": Counter(tokens(" ".join(self._topic_fact_text(t)))),
            },
        )

    def _topic_fact_text(self, t: ReferenceTopic) -> list[str]:
        """The facts a topic shows, and the text of its tables (durability rows, recommendations ...)."""
        out = []
        for src in t.sources:
            model = self.kb.reference[src.file]
            out += [f.text for f in getattr(model, "facts", []) if f.topic in src.facts]
            if src.table and table_rows(model) is not None:
                out += [
                    s
                    for name in ("matrix", "rf_recommendations", "categories", "examples", "components")
                    for s in iter_strings(getattr(model, name, []))
                ]
        return out

    def _index_tables(self) -> None:
        """Config keys and metric names of the reference tables point (weakly) at their topic, and
        the alert thresholds give numbers something to be compared with."""
        topics = self.kb.topics
        configs = self.kb.reference.get("configs")
        signals = self.kb.reference.get("signals")
        if isinstance(configs, Configs) and "config-defaults" in topics:
            for c in configs.configs:
                # just under an owner's config key: the topic that explains a key answers before the table
                self._add(c.key, "config-defaults", W_CONFIG - 2, f"config {c.key}")
        categories = self.kb.reference.get("partition_categories")
        if isinstance(categories, PartitionCategories) and "partition-categories" in topics:
            # the states the KIP-427 topic defines: "under replicated vs under min isr vs offline"
            for cat in categories.categories:
                for name in {cat.name, cat.metric}:
                    self._add(name, "partition-categories", W_TOPIC_KEY, f"category {cat.name}")
        if isinstance(signals, Signals):
            if "alert-thresholds" in topics:
                for metric in signals.metrics:
                    # A metric named by one plain word ("Size") is no key: the word is ordinary English.
                    for name in identifiers(metric.name) or ([metric.name] if len(tokens(metric.name)) > 1 else []):
                        self._add(name, "alert-thresholds", W_CONFIG - 2, f"metric {name}")
            for alert in signals.alerts:
                names = identifiers(alert.metric) or [PAREN.sub("", alert.metric)]
                for j, eid in enumerate(alert.runbook):
                    for name in names:
                        # The alert table says which entries to open for a metric: a key for those
                        # entries too, weaker than their own symptoms, in the table's order.
                        if not any(h.doc == eid for p in variants(name) for h in self._phrases.get(p, [])):
                            self._add(name, eid, W_ALERT - 2 * j, f"alert on {name}")
                        for phrase in variants(name):
                            self._conditions[(eid, phrase)].append(alert.condition)

    def _index_vocabulary(self) -> None:
        """Symptom words ('URP') reach what their target reaches, with the target's weights."""
        for term, target in self.kb.vocabulary.items():
            hits = [h for p in variants(target) for h in self._phrases.get(p, [])]
            for phrase in variants(term):
                for h in hits:
                    existing = next((x for x in self._phrases[phrase] if x.doc == h.doc), None)
                    # A symptom word is never as strong as the entry's own name.
                    # A single plain word ("offline", "unclean") is a weaker pointer than a phrase or an acronym.
                    cap = W_WORD_KEY if len(phrase) == 1 and len(term) > 3 else W_SYMPTOM
                    capped = _KeyHit(h.doc, min(h.weight, cap), h.reason)
                    if existing is None or existing.weight < capped.weight:
                        if existing is not None:
                            self._phrases[phrase].remove(existing)
                        self._phrases[phrase].append(capped)
                        for tp in variants(target):
                            self._conditions[(h.doc, phrase)] += self._conditions.get((h.doc, tp), [])
            self._display.setdefault(norm(term), term)
            for phrase in variants(term):
                self._label.setdefault(phrase, target)

    # ---- index: words (BM25F) -------------------------------------------------------------------

    def _prepare_bm25(self) -> None:
        n = len(self._docs)
        df: Counter[str] = Counter()
        for d in self._docs.values():
            df.update({w for f in d.fields.values() for w in f})
        self._idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}
        self._avg = {
            f: max(1.0, sum(sum(d.fields.get(f, {}).values()) for d in self._docs.values()) / n) for f in FIELD_WEIGHTS
        }
        self._len = {d.id: {f: sum(d.fields.get(f, {}).values()) for f in FIELD_WEIGHTS} for d in self._docs.values()}

    def _bm25(self, doc: _Doc, words: list[str]) -> tuple[float, list[str]]:
        score, matched = 0.0, []
        for w in words:
            idf = self._idf.get(w)
            if idf is None:
                continue
            tf = 0.0
            for f, weight in FIELD_WEIGHTS.items():
                c = doc.fields.get(f, _NO_WORDS).get(w, 0)
                if c:
                    tf += weight * c / (1 - B + B * self._len[doc.id][f] / self._avg[f])
            if tf:
                score += idf * tf / (K1 + tf)
                matched.append(w)
        return score, matched

    # ---- query analysis -----------------------------------------------------------------------

    def _spans(self, toks: list[str]) -> list[_Span]:
        """Known key phrases in the question, longest first, not overlapping, with how sure each is."""
        found: list[tuple[int, int, tuple[str, ...], float]] = []
        taken = [False] * len(toks)

        def take(i: int, j: int, phrase: tuple[str, ...], factor: float) -> None:
            found.append((i, j, phrase, factor))
            for k in range(i, j):
                taken[k] = True

        # Candidates, exact and with one extra word inside ("leader is none" is the alias "leader none",
        # "io threads all busy" is "io threads busy"), longest phrase first so a gapped long name beats
        # a short exact one inside it. A filler word ("is") costs nothing, another word a little
        # certainty; two-word names allow only fillers.
        candidates: list[tuple[int, int, int, tuple[str, ...], float]] = []
        for i, tok in enumerate(toks):
            for n in self._lengths.get(tok, ()):
                if i + n > len(toks):
                    continue
                phrase = tuple(toks[i : i + n])
                # A one-word topic id ("memory") names the topic only when it is the whole query.
                if phrase in self._phrases and not (phrase in self._whole_only and n != len(toks)):
                    candidates.append((n, 1, i, phrase, 1.0))
        for i, tok in enumerate(toks):
            for n in self._gap_lengths.get(tok, ()):
                if i + n >= len(toks):
                    break
                for phrase in self._gappable.get((tok, toks[i + n], n), ()):
                    got = self._gapped_end(toks, i, phrase)
                    if got is not None:
                        candidates.append((n + 1, 0, i, phrase, 1.0 if got[1] in _FILLER else GAP_FACTOR))
        # The name that explains most of the question's words wins; exact before gapped on a tie.
        for covered, _exact, i, phrase, factor in sorted(candidates, key=lambda c: (-c[0], -c[1], c[2])):
            end = i + covered
            if not any(taken[i:end]):
                take(i, end, phrase, factor)
        return sorted(found)

    @staticmethod
    def _gapped_end(toks: list[str], start: int, phrase: tuple[str, ...]) -> tuple[int, str] | None:
        """(end, extra token) when phrase matches from start with exactly one extra token inside it."""
        end = start + len(phrase)
        # one word inserted strictly inside: the phrase's last word must close the window (a cheap
        # test first, as this runs for every key phrase starting with each word of ~1,700 texts)
        if end >= len(toks) or toks[end] != phrase[-1]:
            return None
        window = toks[start : end + 1]
        for skip in range(1, len(phrase)):
            if number(window[skip]) is not None:
                continue  # a number inside is a reading ("LastStableOffsetLag 2000000 on ..."), not a filler
            if tuple(window[:skip] + window[skip + 1 :]) == phrase:
                if len(phrase) < 3 and window[skip] not in _VERB_FILLER:
                    return None
                return start + len(phrase) + 1, window[skip]
        return None

    def _hits(self, phrase: tuple[str, ...]) -> list[_KeyHit]:
        """Hits of a phrase and of its form without 'exception'/'error' ('NotLeaderOrFollowerException'
        also reaches what 'NotLeaderOrFollower' names), the stronger one per entry."""
        best: dict[str, _KeyHit] = {}
        for p in {phrase} | variants(" ".join(phrase)):
            for h in self._phrases.get(p, []):
                if h.doc not in best or h.weight > best[h.doc].weight:
                    best[h.doc] = h
        return list(best.values())

    @staticmethod
    def _value_near(toks: list[str], start: int, end: int, keyed: set[int]) -> tuple[float, bool] | None:
        """A number after the key within a few words ("ActiveControllerCount across controllers is 0"),
        stopping at the next key, or else right before it ("12 AtMinIsr partitions")."""
        for j in range(end, min(len(toks), end + 4)):
            if j in keyed:
                break
            v = number(toks[j])
            if v is not None:
                return v, toks[j].endswith("%")
        if start > 0:
            v = number(toks[start - 1])
            if v is not None:
                return v, toks[start - 1].endswith("%")
        return None

    def _key_evidence(
        self, toks: list[str], spans: list[_Span]
    ) -> tuple[dict[str, list[_KeyHit]], dict[str, float], dict[str, str]]:
        """Per entry: the key hits, and the bonus and note from numbers compared with conditions."""
        per_doc: dict[str, list[_KeyHit]] = defaultdict(list)
        number_bonus: dict[str, float] = defaultdict(float)
        number_note: dict[str, str] = {}
        keyed = {i for s_, e_, _p, _f in spans for i in range(s_, e_)}
        for start, end, phrase, factor in spans:
            value = self._value_near(toks, start, end, keyed)
            for h in self._hits(phrase):
                per_doc[h.doc].append(h if factor == 1.0 else _KeyHit(h.doc, h.weight * factor, h.reason))
                conds = self._conditions.get((h.doc, phrase), [])
                if value is None or not conds:
                    continue
                verdicts = [(c, condition_holds(value[0], value[1], comparisons(c))) for c in conds]
                verdicts = [(c, v) for c, v in verdicts if v is not None]
                if not verdicts:
                    continue
                shown = f"{self._label.get(phrase, ' '.join(phrase))} {value[0]:g}{'%' if value[1] else ''}"
                met = next((c for c, v in verdicts if v), None)
                if met is not None:
                    number_bonus[h.doc] += NUMBER_AGREES
                    number_note[h.doc] = f"{shown} meets '{met}'"
                else:
                    number_bonus[h.doc] += NUMBER_CONTRADICTS
                    number_note[h.doc] = f"{shown} does not meet '{verdicts[0][0]}'"
        return per_doc, number_bonus, number_note

    def _do_not_overlap(self, doc_id: str, content: set[str], words: list[str]) -> float:
        """Share of a do-not item the question repeats ("should I lower min.insync.replicas ..."),
        when it repeats at least three of its words and one besides the keys; else 0."""
        best = 0.0
        for item in self._do_not.get(doc_id, []):
            shared = content & item
            if item and len(shared) >= 3 and item & set(words):
                best = max(best, len(shared) / len(item))
        return best if best >= 0.5 else 0.0

    def _analyse(self, text: str) -> tuple[list[str], list[_Span], bool, bool]:
        """Tokens, key spans (a key after 'no' / 'without' is a requirement, not evidence), and whether
        the text asks what something is and whether it says something broke."""
        toks = tokens(text)
        if not toks:
            return toks, [], False, False
        spans = [sp for sp in self._spans(toks) if not (sp[0] > 0 and toks[sp[0] - 1] in _NEGATION)]
        definitional = bool(_DEFINITION.search(norm(text)))
        problem = any(t in _PROBLEM_STEMS for t in toks) or "can't" in text.lower()
        return toks, spans, definitional, problem

    def _rank(self, query: str, kinds: set[str]) -> list[Hit]:
        toks, spans, definitional, problem = self._analyse(query)
        if not toks:
            return []
        per_doc, number_bonus, number_note = self._key_evidence(toks, spans)
        in_key = {i for s, e, _p, _f in spans for i in range(s, e)}
        words = list(
            dict.fromkeys(
                t
                for i, t in enumerate(toks)
                if i not in in_key
                and t not in _STOP_STEMS
                and t not in _NOISE_STEMS
                and len(t) > 1
                and number(t) is None
            )
        )
        content = {t for t in toks if t not in _STOP_STEMS and number(t) is None}
        allowed = [d.id for d in self._docs.values() if d.kind in kinds]
        learnt = self._model.posteriors(self._features(toks, spans, definitional, problem), allowed)
        results: list[Hit] = []
        for doc in self._docs.values():
            if doc.kind not in kinds:
                continue
            hits = sorted(per_doc.get(doc.id, []), key=lambda h: -h.weight)
            key_score, reason = 0.0, ""
            if hits:
                # one hit per distinct reason: a key reached twice (term + its variant) counts once
                distinct = list({h.reason: h for h in hits}.values())
                key_score = distinct[0].weight + EXTRA_KEY_SHARE * sum(h.weight for h in distinct[1:3])
                reason = distinct[0].reason
            word_score, matched = self._bm25(doc, words)
            score = key_score + number_bonus.get(doc.id, 0.0) + WORD_SCALE * word_score
            overlap = self._do_not_overlap(doc.id, content, words)
            if overlap:
                score += DO_NOT_BONUS * overlap
                matched.append("a do-not item")
            p = learnt.get(doc.id, 0.0)
            if hits or matched or p >= P_MIN:
                if doc.kind == "reference" and definitional:
                    score += DEFINITION_BONUS
                if doc.kind == "reference":
                    score += INTENT_BONUS * sum(1 for i in self._intent.get(doc.id, []) if i <= content)
                # a question can be both ("lost a broker, how long can we run like this?"): both nudge
                if doc.kind == "failure-mode" and problem:
                    score += PROBLEM_BONUS
                score += W_MODEL * p
                if not (hits or matched):
                    reason = "worded like its example questions"
            else:
                # A typo of a name ("hangingtransaction") still deserves an answer.
                fuzzy = max(fuzz.token_set_ratio(norm(query), norm(n)) for n in doc.names)
                if fuzzy < 85:
                    continue
                score, reason = fuzzy / 5, "similar name"
            if score <= 0:
                continue
            reason = reason or f"words {', '.join(matched)}"
            if doc.id in number_note:
                reason += f"; {number_note[doc.id]}"
            results.append(Hit(doc.id, doc.kind, doc.title, round(score, 2), reason))
        if not results:
            return []
        results.sort(key=lambda h: (-h.score, self._order.get(h.id, 999)))
        top = results[0].score
        # Everything a key reached stays (the same symptom always lists the same entries); word-only
        # answers far below the best are the long tail.
        return [h for h in results if h.score >= top * KEEP_RATIO or h.id in per_doc]

    # ---- the word model learnt from example questions (ranker.py) -------------------------------

    def _features(self, toks: list[str], spans: list[_Span], definitional: bool, problem: bool) -> list[str]:
        """What the word model sees of a question: its words and word pairs, the key phrases found in
        it and the entries they point at, and whether it asks what something is or says what broke.
        Stop words stay in: unlike for BM25, "what / how / should / which" tell the model much about
        whether a question asks for a reference topic or for what broke. Words that only say a metric
        moved ("spiking") stay out here too, so they cannot reorder what a key found."""
        words = [t for t in toks if number(t) is None and len(t) > 1 and t not in _NOISE_STEMS]
        feats = set(words)
        feats.update(f"{a} {b}" for a, b in zip(words, words[1:]))
        for _s, _e, phrase, _f in spans:
            feats.add("key:" + " ".join(phrase))
            feats.update("to:" + h.doc for h in self._hits(phrase))
        if definitional:
            feats.add("#definition")
        if problem:
            feats.add("#problem")
        return sorted(feats)

    def _question_features(self, text: str) -> list[str]:
        return self._features(*self._analyse(text))

    def _train(self, examples: Mapping[str, Sequence[str]]) -> None:
        """Train the word model on the example questions and on the entries' own text."""
        labelled = [
            (self._question_features(q), eid, 1.0) for eid, qs in examples.items() if eid in self._docs for q in qs
        ]
        labelled += [
            (self._question_features(s), eid, KB_TEXT_WEIGHT)
            for eid, sents in kb_sentences(self.kb).items()
            for s in sents
        ]
        self._model = WordModel(labelled)

    # ---- queries ----------------------------------------------------------------------------

    def by_id(self, eid: str) -> FailureMode | None:
        return self.kb.failure_modes.get(eid)

    def exact(self, query: str) -> list[Match]:
        """Failure modes reached by the question as one exact key (id, alias, metric, error, config)."""
        toks = tuple(tokens(query))
        if toks not in self._phrases:
            return []
        return self.search(query, limit=len(self.kb.failure_modes))

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """Failure modes for a symptom, metric, error or question, best first."""
        return [
            Match(self.kb.failure_modes[h.id], h.score, h.reason) for h in self._rank(query, {"failure-mode"})[:limit]
        ]

    def answer(self, question: str, limit: int = 5) -> list[Hit]:
        """Failure modes and reference topics for a question, best first."""
        return self._rank(question, {"failure-mode", "reference"})[:limit]

    def did_you_mean(self, query: str, limit: int = 3) -> list[str]:
        found = process.extract(norm(query), list(self._display), scorer=fuzz.WRatio, limit=limit, score_cutoff=70)
        return [self._display[k] for k, _s, _i in found]
