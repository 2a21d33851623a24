"""Find runbook entries by id, alias, metric, error, config key or free text.

Exact keys (ids, aliases, metric names, MBean names, errors, config keys and the vocabulary of
symptom words) win; free text falls back to a small TF-IDF ranking over each entry's words.
Near misses get "did you mean" suggestions.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from .loader import KnowledgeBase
from .schema import FailureMode

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEP = re.compile(r"[\s_\-]+")
_WORD = re.compile(r"[a-z0-9.]+")
_STOP = frozenset("a an and are as at be by for from has have in is it its of on or that the this to was were what when which why with".split())


def norm(text: str) -> str:
    """Case, CamelCase and separators folded: 'NotEnoughReplicas' == 'not-enough_replicas'."""
    return _SEP.sub(" ", _CAMEL.sub(" ", text.strip())).lower().strip(" ?!.,;:")


def _variants(key: str) -> set[str]:
    n = norm(key)
    out = {n}
    for suffix in (" exception", " error", " per sec"):
        if n.endswith(suffix) and len(n) > len(suffix):
            out.add(n[: -len(suffix)])
    return out


@dataclass(frozen=True)
class Match:
    entry: FailureMode
    score: float
    reason: str  # what matched: "symptom UnderReplicatedPartitions", "alias 'URP flat'", ...


class Lookup:
    def __init__(self, kb: KnowledgeBase):
        self.kb = kb
        self._order = {eid: i for i, eid in enumerate(kb.catalogue)}
        # normalized key -> [(entry id, weight, reason)]
        self._keys: dict[str, list[tuple[str, float, str]]] = defaultdict(list)
        self._display: dict[str, str] = {}
        for mode in kb.failure_modes.values():
            self._index(mode)
        for term, target in kb.vocabulary.items():
            self._display.setdefault(norm(term), term)
        self._docs = {m.id: Counter(self._words(m)) for m in kb.failure_modes.values()}
        df = Counter(w for doc in self._docs.values() for w in doc)
        n = len(self._docs)
        self._idf = {w: math.log(1 + n / c) for w, c in df.items()}

    @classmethod
    def for_kb(cls, kb: KnowledgeBase) -> "Lookup":
        return cls(kb)

    # ---- index ------------------------------------------------------------------------------

    def _add(self, key: str, eid: str, weight: float, reason: str) -> None:
        for k in _variants(key):
            if not any(e == eid for e, _w, _r in self._keys[k]):
                self._keys[k].append((eid, weight, reason))
            self._display.setdefault(k, key)

    def _index(self, m: FailureMode) -> None:
        self._add(m.id, m.id, 100, f"entry {m.id}")
        self._add(m.title, m.id, 100, f"title '{m.title}'")
        for a in m.aliases:
            self._add(a, m.id, 95, f"alias '{a}'")
        for e in m.errors:
            self._add(e, m.id, 90, f"error {e}")
        for i, s in enumerate(m.symptoms):
            # The first symptom is the one the runbook reads first; later ones weigh less.
            weight = 92 - 3 * i
            self._add(s.metric, m.id, weight, f"symptom {s.metric}")
            if s.mbean and "name=" in s.mbean:
                self._add(s.mbean, m.id, weight, f"symptom {s.metric}")
        for c in m.configs:
            self._add(c, m.id, 70, f"config {c}")
        for lever in m.levers:
            self._add(lever.name, m.id, 65, f"lever {lever.name}")

    @staticmethod
    def _words(m: FailureMode) -> list[str]:
        heavy = [m.title, *m.aliases, *(s.metric for s in m.symptoms), *m.errors]
        light = [m.cause, *(s.signature or "" for s in m.symptoms), *(s.condition for s in m.symptoms), *m.configs]
        text = " ".join(heavy * 3 + light)
        return [w for w in _WORD.findall(norm(text)) if w not in _STOP and len(w) > 1]

    # ---- queries ----------------------------------------------------------------------------

    def by_id(self, eid: str) -> FailureMode | None:
        return self.kb.failure_modes.get(eid)

    def exact(self, query: str) -> list[Match]:
        """Entries reached by an exact key, following the symptom vocabulary one step."""
        q = norm(query)
        hits = list(self._keys.get(q, []))
        target = self.kb.vocabulary.get(q) or next(
            (v for k, v in self.kb.vocabulary.items() if norm(k) == q), None
        )
        if target:
            hits += self._keys.get(norm(target), [])
        return self._rank(hits)

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """Exact keys first, then free-text ranking."""
        exact = self.exact(query)
        if exact:
            return exact[:limit]
        terms = [w for w in _WORD.findall(norm(query)) if w not in _STOP and len(w) > 1]
        scored: list[tuple[str, float, str]] = []
        for eid, doc in self._docs.items():
            score = sum(self._idf.get(t, 0) * math.log(1 + doc[t]) for t in terms)
            # Fuzzy match against names catches typos the token ranking misses.
            m = self.kb.failure_modes[eid]
            fuzzy = max(fuzz.token_set_ratio(norm(query), norm(n)) for n in [m.title, *m.aliases])
            if fuzzy >= 80:
                score += fuzzy / 20
            if score > 0:
                matched = [t for t in terms if doc[t]]
                scored.append((eid, score, f"words {', '.join(matched)}" if matched else "similar name"))
        if not scored:
            return []
        top = max(s for _e, s, _r in scored)
        # Keep answers that score within reach of the best; drop the long tail of single-word hits.
        return self._rank([(e, 80 * s / top, r) for e, s, r in scored if s >= top * 0.35])[:limit]

    def did_you_mean(self, query: str, limit: int = 3) -> list[str]:
        found = process.extract(norm(query), list(self._display), scorer=fuzz.WRatio, limit=limit, score_cutoff=70)
        return [self._display[k] for k, _s, _i in found]

    def _rank(self, hits: list[tuple[str, float, str]]) -> list[Match]:
        best: dict[str, tuple[float, str]] = {}
        for eid, weight, reason in hits:
            if eid not in best or weight > best[eid][0]:
                best[eid] = (weight, reason)
        ordered = sorted(best.items(), key=lambda kv: (-kv[1][0], self._order.get(kv[0], 999)))
        return [Match(self.kb.failure_modes[eid], w, r) for eid, (w, r) in ordered]
