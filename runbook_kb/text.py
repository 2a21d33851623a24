"""Text of the knowledge base and of questions.

Two jobs: flatten knowledge-base models into plain text (search indexing, completeness checks),
and fold text into comparable tokens and conditions (the lookup's analysis): CamelCase, separators
and light suffixes folded, Java packages dropped from pasted exception lines, and the comparisons
inside a symptom's condition ("> 0", "below 0.2") parsed so a number in a question can be checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from pydantic import BaseModel

from runbook_kb.loader import KnowledgeBase


def iter_strings(value: object) -> Iterator[str]:
    """Every string inside a model, list or dict, keys of dicts included (config names live there)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from iter_strings(getattr(value, name))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from iter_strings(v)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from iter_strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def kb_text(kb: KnowledgeBase, only: str | None = None) -> str:
    """All text of the KB, or of one failure mode / reference file when ``only`` names it."""
    parts: list[object] = []
    if only is None:
        parts = [*kb.failure_modes.values(), *kb.reference.values()]
    elif only in kb.failure_modes:
        parts = [kb.failure_modes[only]]
    else:
        parts = [kb.reference[only]]
    return "\n".join(s for part in parts for s in iter_strings(part))


# ---- question and key analysis ----------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEP = re.compile(r"[\s_\-]+")
_TOKEN = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*%?")
PAREN = re.compile(r"\([^)]*\)")
_BREAKDOWN = re.compile(r"\bbreak\s+down\b", re.IGNORECASE)
_PACKAGE = re.compile(r"\b(?:[a-z][a-z0-9]*\.){2,}(?=[A-Z])")
# Identifier-like names inside a free-form symptom: CamelCase metrics, UPPER_SNAKE errors,
# dotted config keys, hyphenated client metrics, shell tools.
IDENT = re.compile(
    r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z]{2,}(?:_[A-Z]+)+|[a-z]+(?:\.[a-z]+)+|[a-z]+(?:-[a-z]+){2,}|[a-z-]+\.sh)\b"
)
# An operator starts a comparison only after a space: "acks=-1" is a setting, "> 0" a condition.
_COMPARE = re.compile(r"(?:^|(?<=\s))(==|>=|<=|=|>|<|\babove\b|\bbelow\b)\s*(?:about\s+)?(-?\d+(?:\.\d+)?)\s*(%?)")
CONFIG_KEY = re.compile(r"[a-z][a-z0-9]*(?:\.[a-z0-9]+)+")
_HEALTHY = re.compile(r"keep|aim|healthy|target|should")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?%?$")


def norm(text: str) -> str:
    """Case, CamelCase and separators folded: 'NotEnoughReplicas' == 'not-enough_replicas'."""
    return _SEP.sub(" ", _CAMEL.sub(" ", text.strip())).lower().strip(" ?!.,;:")


@lru_cache(maxsize=8192)
def stem(tok: str) -> str:
    """A light suffix stripper: 'rebalancing', 'rebalances', 'rebalanced' and 'rebalance' meet,
    as do 'filling' and 'fills'. Names with digits or dots (config keys, numbers) stay whole."""
    if len(tok) <= 3 or not tok.isalpha():
        return tok
    if tok.endswith(("ing", "ed")) and len(tok) - (3 if tok.endswith("ing") else 2) >= 3:
        tok = tok[:-3] if tok.endswith("ing") else tok[:-2]
        if tok[-1] == tok[-2] and tok[-1] not in "lsz":
            tok = tok[:-1]
    elif tok.endswith("es") and tok[:-2].endswith(("s", "x", "ch", "sh", "z")):
        tok = tok[:-2]
    elif tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        tok = tok[:-1]
    if tok.endswith("ion") and len(tok) > 6:  # eviction ~ evicted, election ~ elect
        tok = tok[:-3]
    if tok.endswith("e") and len(tok) > 3:
        tok = tok[:-1]
    return tok


def tokens(text: str) -> list[str]:
    """Normalised, lightly stemmed tokens; dotted config keys and decimals stay one token.

    A Java package in front of a class name is dropped, so a pasted log line
    'org.apache.kafka.common.errors.NotEnoughReplicasException: ...' yields the class name's words.
    """
    return list(_tokens(text))


@lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[str, ...]:
    # The checks before each substitution keep the start-up index build fast (most texts need neither).
    if "." in text:
        text = _PACKAGE.sub("", text)
    if "reak" in text:
        text = _BREAKDOWN.sub("breakdown", text)  # "break down latency" is no outage
    return tuple(_SHAPES.get(t, t) for t in (stem(t) for t in _TOKEN.findall(norm(text))))


# How a metric's curve looks is evidence (flat: a broker is gone; fluctuating: a follower struggles),
# and people say it many ways: fold the synonyms onto one word, in questions and in the KB alike.
_SHAPES = {
    **{stem(w): "flat" for w in "stable steady constant unchanged unchanging plateau plateaued".split()},
    **{stem(w): "fluctuat" for w in "fluctuating flapping flaps bouncing bounces oscillating oscillates yoyo".split()},
    # the same folding for a few words that name one thing in several ways
    **{stem(w): "stuck" for w in "frozen hung stalled blocked".split()},
    **{w: "directory" for w in ("dir", "dirs", "directori", "logdir")},
}

_SUFFIXES = tuple(tuple(_tokens(w)) for w in ("exception", "error", "per sec"))


@lru_cache(maxsize=4096)
def variants(key: str) -> set[tuple[str, ...]]:
    toks = tuple(t for t in tokens(PAREN.sub(" ", key)) if not t.endswith("%") or len(t) > 1)
    out = {toks} if toks else set()
    for suffix in _SUFFIXES:
        n = len(suffix)
        # 'TimeoutException' must not make every 'timeout' a key; 'NotEnoughReplicasException' may.
        if len(toks) > n + 1 and toks[-n:] == suffix:
            out.add(toks[:-n])
    return out


def number(tok: str) -> float | None:
    if _NUMBER.match(tok):
        return float(tok.rstrip("%"))
    return None


def comparisons(condition: str) -> list[tuple[str, float, bool]]:
    """'> 0 and flat' -> [('>', 0, False)]; 'above 70%' -> [('>', 70, True)]."""
    out = []
    for m in _COMPARE.finditer(condition):
        op, num, pct = m.groups()
        # "keep it above 0.3", "aim for above 0.4", "(target 0)": the healthy side, not the symptom.
        if _HEALTHY.search(condition[max(0, m.start() - 14) : m.start()]):
            continue
        op = {"above": ">", "below": "<", "=": "=="}.get(op, op)
        out.append((op, float(num), bool(pct)))
    return out


def _holds(value: float, op: str, bound: float) -> bool:
    return {
        ">": value > bound,
        "<": value < bound,
        ">=": value >= bound,
        "<=": value <= bound,
        "==": value == bound,
    }[op]


def condition_holds(value: float, pct: bool, comps: list[tuple[str, float, bool]]) -> bool | None:
    """Whether any comparison of a condition holds for the value; None when it cannot say."""
    if not comps:
        return None
    # "5%" against a 0-1 fraction threshold ("< 0.1") means 0.05.
    if pct and all(not p and abs(b) <= 1 for _o, b, p in comps):
        value = value / 100
    return any(_holds(value, op, b) for op, b, _p in comps)


def identifiers(text: str) -> list[str]:
    return IDENT.findall(PAREN.sub(" ", text))


QUOTED = re.compile(r'"([^"]{6,})"')  # a quoted log line inside a symptom
