"""Follow-ups in plain words: what an on-call engineer types in an incident thread, read as a command.

After `why URP` a thread hears "and broker 102?", "what should I do first?", "is it getting
better?", not command lines. This module reads the common shapes with a small, explicit table of
patterns (no model, no fuzzy guess) and turns each into a command the bot already has, filled from
the thread's memory (framework/followup.py):

    shape        typed                                   answered with
    entity       and broker 102? / what about payments?  at-min-isr --broker 102 / describe payments
                                                         (lag payments when payments is a group named)
    next step    what should I do first? / what now?     runbook that (the thread's leading cause)
    trend        is it getting better? / since when?     history <the cause's metric> (thread's window)
    safety       is it safe to restart 103?              at-min-isr --broker 103 (what would go under min ISR)
    reach        who is affected? / which producers fail? at-min-isr (whole cluster) / lag (consumers)
    chart        show me the graph                       history <the cause's metric>: the lake's chart

A text that matches no shape is not guessed at: ``offer`` gives the two or three questions that fit
the thread (its cause, the broker and group it named), for an "I can answer: ..." reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

SHAPES = ("entity", "next step", "trend", "safety", "reach", "chart")

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
_FILLER = re.compile(r"^(?:(?:ok(?:ay)?|so|hey|hi|and|also|then|well|kafka|bot|please|pls|ok so)[,\s]+)+")
_NAME = r"([A-Za-z0-9][A-Za-z0-9._:@+=/-]*)"
_AND = re.compile(r"^(?:and|also|now|then)\s")
_VERB = r"(?:restart|re-start|bounce|roll|reboot|stop|shut ?down|take down|kill|drain|upgrade|patch|lose)"
_BROKER = r"(?:broker |node |b)?(\d+)"


class Memory(Protocol):
    """What a thread remembers (framework.followup.IncidentMemory), as far as this module reads it."""

    cause: tuple[str, str] | None
    metric: str | None
    current: dict[str, str]
    named: dict[str, list[str]]


@dataclass(frozen=True)
class Reading:
    """A plain-words follow-up read as a command line, to be parsed with the thread's memory.
    ``fill``: whether left-out parameters take the thread's values (reach asks about the whole
    cluster, not only the topic named last)."""

    shape: str
    command: str
    fill: bool = True


def clean(text: str) -> str:
    """Lower case, no mention, no trailing punctuation, single spaces, no leading filler."""
    return " ".join(_FILLER.sub("", _plain(text)).strip(" ?!.,;:").split())


def _plain(text: str) -> str:
    text = _MENTION.sub(" ", text or "").replace("\u2019", "'").lower()
    return " ".join(text.split()).strip(" ?!.,;:")


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("^(?:" + "|".join(patterns) + ")$")


# ---- the table of shapes ----------------------------------------------------------------------

_SAFETY = _any(
    rf"(?:(?:is it |is that |would it be |it's |its )?(?:ok|okay|safe|fine) (?:for me )?)?to {_VERB} {_BROKER}(?: now)?",
    rf"(?:can|could|may|should) (?:i|we) (?:safely )?{_VERB} {_BROKER}(?: now| safely)?",
    rf"what (?:happens|would happen|breaks|would break) if (?:i |we )?{_VERB} {_BROKER}",
    rf"what if {_BROKER} (?:goes down|dies|restarts|is restarted|stops)",
    rf"safe to {_VERB}(?: it| the broker)?",
    rf"(?:is it |would it be )?(?:ok|safe) to {_VERB} (?:it|the broker|that broker)(?: now)?",
    rf"(?:can|could|should) (?:i|we) (?:safely )?{_VERB} (?:it|the broker|that broker)(?: now)?",
)
_BROKER_ENTITY = _any(
    r"(?:what about|how about|how is|how's|same for|and for|and on|now|check)? ?(?:broker|node) (\d+)(?: too)?",
)
_OTHER_ENTITY = _any(
    rf"(?:what about|how about|and for|same for|what of|how is|how's|check) (?:(the )?(topic|group|consumer group) )?{_NAME}(?: too)?",
    rf"(?:the )?(?:(topic|group|consumer group) ){_NAME}(?: too)?",
)
_NEXT = _any(
    r"what (?:should|do|must|can) (?:i|we) do(?: first| now| next| about it| about this)?",
    r"what (?:now|next|first|to do|then)",
    r"now what",
    r"(?:the |any )?next steps?",
    r"(?:how )?(?:do|can|should) (?:i|we) (?:fix|mitigate|solve|resolve) (?:it|this|that)",
    r"how (?:to|do you) (?:fix|mitigate|solve|resolve)(?: it| this| that)?",
    r"what(?:'s| is) the (?:fix|mitigation|first step|next step|plan)",
    r"(?:where do|where should) (?:i|we) start",
    r"(?:any )?(?:fix|mitigation|first steps?)",
)
_TREND = _any(
    r"(?:is it|is this|are things|is that) (?:getting|any) (?:better|worse)",
    r"(?:getting )?better or worse",
    r"(?:is it|is this) (?:improving|recovering|stable|stabilizing|stabilising|still (?:happening|going on|there|growing|bad))",
    r"since when",
    r"when did (?:it|this|that) (?:start|begin)",
    r"how long (?:has (?:it|this) been (?:going on|happening|like this)|ago did it start)",
    r"(?:what(?:'s| is) the |any )?trend",
    r"(?:any )?(?:change|improvement)(?: since)?",
)
_REACH_CONSUMERS = _any(
    r"(?:which|what|who are the|are (?:the )?|any) consumers? (?:are )?(?:affected|behind|lagging|stuck|failing|impacted)",
    r"(?:is|are) (?:any |the )?consumers? (?:affected|behind|lagging|stuck)",
    r"which groups? (?:are|is) (?:affected|behind|lagging|stuck)",
)
_REACH = _any(
    r"(?:who|what|which topics?|which partitions?)(?:'s| is| are)? (?:affected|impacted|hit|broken|failing)",
    r"(?:which|what|who are the|are (?:the )?|any) producers? (?:are )?(?:fail|failing|affected|impacted|broken|erroring|stuck)",
    r"(?:are|do) (?:the )?(?:producers|writes) (?:fail|failing|affected|blocked)",
    r"(?:is|are) (?:anyone|anything|writes|producers) (?:affected|impacted|failing)",
    r"(?:what(?:'s| is) the )?(?:blast radius|impact)",
    r"(?:which|what) writes (?:fail|are failing)",
)
_CHART = _any(
    r"(?:can you |could you |can i see |pls |please )?(?:show|give|send|draw|plot)(?: me| us)? (?:a |the |that )?(?:graph|chart|plot|picture|trend)(?: of it| of this| of that)?",
    r"(?:a |the )?(?:graph|chart|plot)(?: it| this| that| please)?",
    r"(?:can you |could you |please )?(?:plot|graph|chart|draw) (?:it|this|that)",
    r"(?:can|could) (?:i|we) see (?:a |the )?(?:graph|chart|plot)",
)


def read(text: str, memory: Memory) -> Reading | None:
    """The command a plain-words follow-up means, or None (not one of the shapes). Values come from
    the text first, then from the memory; a shape that needs what the thread never named (a
    trend without a metric, a safety question without a broker) is None: ``offer`` says what can
    be asked instead."""
    line = clean(text)
    if not line:
        return None
    m = _SAFETY.match(line)
    if m:
        broker = next((g for g in m.groups() if g), None) or memory.current.get("broker")
        return Reading("safety", f"at-min-isr --broker {broker}", fill=False) if broker else None
    m = _BROKER_ENTITY.match(line)
    if m:
        return Reading("entity", f"at-min-isr --broker {m.group(1)}", fill=False)
    if _NEXT.match(line):
        return Reading("next step", "runbook that")
    if _TREND.match(line):
        return Reading("trend", f"history {memory.metric}") if memory.metric else None
    if _CHART.match(line):
        return Reading("chart", f"history {memory.metric}") if memory.metric else None
    if _REACH_CONSUMERS.match(line):
        return Reading("reach", "lag", fill=False)
    if _REACH.match(line):
        return Reading("reach", "at-min-isr", fill=False)
    m = _OTHER_ENTITY.match(line)
    bare = re.fullmatch(_NAME, line) if _AND.match(_plain(text)) else None
    if m or bare:
        kind, name = next(((k, n) for k, n in _pairs(m) if n), (None, None)) if m else (None, line)
        if bare and not m and not _named(memory, _original_case(text, line)) and not re.search(r"[\d._-]", line):
            return None  # "and thanks": a bare word is a name only when the thread named it or it looks like one
        if name is None or name in ("it", "that", "this", "them", "those", "now"):
            return None
        if name.isdigit():
            return Reading("entity", f"at-min-isr --broker {name}", fill=False)
        original = _widen(memory, _original_case(text, name))
        if kind in ("group", "consumer group") or (kind is None and original in memory.named.get("group", [])):
            return Reading("entity", f"lag {original}")
        return Reading("entity", f"describe {original}")
    return None


def _widen(memory: Memory, name: str) -> str:
    """ "payments" for the one topic or group the thread named that starts with it (payments-eu)."""
    if _named(memory, name):
        return name
    found = {v for kind in ("topic", "group") for v in memory.named.get(kind, []) if v.startswith(name)}
    return found.pop() if len(found) == 1 else name


def _named(memory: Memory, name: str) -> bool:
    return any(name in values for values in memory.named.values())


def _pairs(m: re.Match[str]) -> list[tuple[str | None, str | None]]:
    """(kind word, name) of whichever alternative of _OTHER_ENTITY matched."""
    g = m.groups()  # (the, kind, name) for the first alternative, (kind, name) for the second
    return [(g[1], g[2]), (g[3], g[4])]


def _original_case(text: str, name: str) -> str:
    """Topic names are case-sensitive: the name as the user typed it."""
    found = re.search(re.escape(name), text, flags=re.IGNORECASE)
    return found.group(0) if found else name


def offer(memory: Memory) -> list[str]:
    """Two or three follow-ups that fit the thread: the next step when it has a cause, a safety
    question about the broker it named, the trend of its metric, who is affected."""
    out: list[str] = []
    if memory.cause:
        out.append("what should I do first?")
    broker = memory.current.get("broker")
    if broker:
        out.append(f"is it safe to restart {broker}?")
    if memory.metric:
        out.append("is it getting better?")
    if memory.current.get("group") or memory.named.get("group"):
        out.append("which consumers are behind?")
    out.append("who is affected?")
    return out[:3]


_QUESTION_WORDS = frozenset(
    "and also now then so ok okay hey hi what what's whats who who's which how how's is are was were do "
    "does did can could should would will may when where why it its it's the any please pls show give "
    "since still i we our my is_it".split()
)


def plain(text: str) -> bool:
    """Whether ``text`` reads as words to the bot (a question, "and ...?") rather than a mistyped
    command (`descibe orders`): those get "I can answer", a mistyped command its suggestions."""
    line = _plain(text)
    words = line.split()
    return bool(words) and (words[0] in _QUESTION_WORDS or (text or "").rstrip().endswith("?"))


def not_understood(text: str, memory: Memory) -> str:
    """The answer to a follow-up none of the shapes fits: what can be asked instead."""
    said = " ".join((_MENTION.sub(" ", text or "")).split())
    said = said if len(said) <= 60 else said[:59] + "…"
    questions = ", ".join(f"“{q}”" for q in offer(memory))
    return (
        f"I did not understand '{said}' as a question about this incident. I can answer: {questions} "
        "- or any command (`help` lists them)."
    )
