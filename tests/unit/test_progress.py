"""Long waits say what they wait on (issue 28: `lag`, `history` and `hot-partitions` showed no
spinner for 17-30 s): each reports its step through Context.progress, which the terminal draws as
a spinner and Slack as an edit of the working message."""

from __future__ import annotations

from commands.registry import answer
from framework.context import Context


def _recording() -> tuple[Context, list[str]]:
    seen: list[str] = []

    async def progress(message: str) -> None:
        seen.append(message)

    return Context(progress=progress), seen


async def test_history_says_it_reads_the_lake():
    ctx, seen = _recording()
    await answer("history URP --since 30m", ctx)
    assert any("from the metric lake" in m and "30 min" in m for m in seen), seen


async def test_hot_partitions_says_it_ranks_from_the_lake():
    ctx, seen = _recording()
    await answer("hot-partitions", ctx)
    assert any(m.startswith("ranking partitions over the") for m in seen), seen
