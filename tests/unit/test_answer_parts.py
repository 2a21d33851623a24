"""Answer now, the metric lake's part later (bot/answer_parts.py): one helper for the terminal and Slack."""

from __future__ import annotations

import asyncio

from bot import console
from bot.answer_parts import show_in_parts
from framework.dispatch import Answer
from framework.reply import Evidence, Reply


def _early_and_final() -> tuple[Reply, Reply]:
    live = Evidence("URP", "3 partitions", "live: metadata", "bad")
    early = Reply(title="Why URP", severity="warning", verdict="Broker 102 is down.", evidence=[live])
    final = Reply(
        title="Why URP",
        severity="warning",
        verdict="Broker 102 is down.",
        evidence=[live, Evidence("ISR shrinks", "12 in 30m", "lake: isr_shrinks", "bad")],
    )
    return early, final


async def _later(reply: Reply) -> Reply:
    return reply


async def test_an_answer_without_a_later_part_is_shown_once():
    shown, added = [], []
    result = Answer(Reply(title="t", severity="ok", verdict="v"), "answered")

    async def show(a):
        shown.append(a)

    async def add(r):
        added.append(r)

    assert await show_in_parts(result, show, add) is result
    assert shown == [result] and added == []


async def test_the_lake_part_is_added_after_the_answer_shown():
    early, final = _early_and_final()
    early.later = asyncio.ensure_future(_later(final))
    events: list[tuple[str, Reply]] = []

    async def show(a):
        events.append(("show", a.reply))

    async def add(r):
        events.append(("add", r))

    done = await show_in_parts(Answer(early, "answered"), show, add)
    assert done.reply is final and done.reply.later is None
    assert [kind for kind, _ in events] == ["show", "add"] and events[0][1] is early
    assert [e.label for e in events[1][1].evidence] == ["ISR shrinks"]  # only what the lake added


async def test_the_terminal_prints_the_live_answer_then_the_lake_part(monkeypatch, capsys):
    early, final = _early_and_final()

    async def answer(text, ctx, memory, cluster, session=None):
        early.later = asyncio.ensure_future(_later(final))
        return Answer(early, "answered")

    monkeypatch.setattr(console, "_answer", answer)
    done = await console._answer_and_emit("why URP", ctx=None, as_json=False)
    out = capsys.readouterr().out
    assert done.reply is final
    assert out.index("Broker 102 is down.") < out.index("+ Metric lake") < out.index("ISR shrinks")


async def test_the_terminal_waits_for_the_lake_part_in_json(monkeypatch, capsys):
    early, final = _early_and_final()

    async def answer(text, ctx, memory, cluster, session=None):
        early.later = asyncio.ensure_future(_later(final))
        return Answer(early, "answered")

    monkeypatch.setattr(console, "_answer", answer)
    await console._answer_and_emit("why URP", ctx=None, as_json=True)
    out = capsys.readouterr().out
    assert out.count('"title"') == 1 and "ISR shrinks" in out and "+ Metric lake" not in out
