"""The lake's write rates per partition (``window_queries.hot``): `hot-partitions`' ranking and
`why`'s hot-partition evidence."""

from __future__ import annotations

import datetime as dt
from typing import Any

from diagnosis.entry_ids import (
    HOT_PARTITION,
)
from diagnosis.lake_evidence.findings import LakeFindings, apply_freshness, num
from diagnosis.lake_evidence.window import (
    Facts,
    NotEnoughData,
    Window,
    ask_window,
    lake_cluster,
    lake_or_unavailable,
)
from diagnosis.thresholds import hot_rule
from framework.context import Context
from framework.reply import Evidence
from framework.spec import CommandRequest
from lake.embedded import Question
from window_queries.hot import ask_hot


async def hot(
    ctx: Context,
    request: CommandRequest,
    window: Window,
    topic: str | None = None,
    top: int = 10,
    rank_by: str = "peak",
    chart: int = 0,
) -> Facts:
    """``{"rows": [...], "series": [...], "data_end": ..., "resolution": ..., "raw_from": ...}``:
    partitions ranked by their per-minute peak rate (``rank_by="peak"``) or their window mean
    (``"mean"``), see ``window_queries.hot``; ``series`` has the per-minute rates of the first
    ``chart`` of them.  Raises :class:`NotEnoughData` on a lake with nothing ingested yet."""
    return await ask_hot_partitions(ctx, lake_cluster(request, ctx), window, topic, top, rank_by, chart)


async def ask_hot_partitions(
    ctx: Context,
    cluster: str | None,
    window: Window,
    topic: str | None,
    top: int | None,
    rank_by: str,
    chart: int = 0,
    timeout: float | None = None,
) -> Facts:
    """``window_queries.hot.ask_hot`` in the bot's process: a long window from the minute rollup
    (with a raw tail) when it has caught up, else from the raw samples (see :func:`hot`)."""
    lake_or_unavailable(ctx)

    async def ask(question: Question, start: dt.datetime, end: dt.datetime, *args: Any) -> Facts:
        return await ask_window(ctx, cluster, question, Window(start, end, end - start), *args, timeout=timeout)

    return await ask_hot(ask, window.start, window.end, topic, top, rank_by, chart)


async def hot_symptom(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await hot(ctx, request, window, None, 3, "peak")
    except NotEnoughData:
        return LakeFindings.young(window, "lake: hot_partitions")
    rows = facts["rows"]
    if not rows:
        return LakeFindings.without_data(window, "lake: hot_partitions", "LogEndOffset samples")
    out = LakeFindings(window)
    rule = hot_rule(ctx.kb)
    for r in rows:
        skew = r["skew"]
        out.evidence.append(
            Evidence(
                f"Write rate {r['topic']}-{r['partition']}",
                f"peak {num(r['peak_records_per_sec'], 1)} records/s (1-minute)"
                + (f", {skew:.1f}x its topic's median peak" if skew is not None else "")
                + f"; window mean {num(r['records_per_sec'], 1)}/s"
                + f"; leader broker {r['leader_broker']}",
                "lake: hot_partitions",
                "bad" if rule.is_hot(r["peak_records_per_sec"], skew) else "neutral",
            )
        )
    if rule.is_hot(rows[0]["peak_records_per_sec"], rows[0]["skew"]):
        out.lead.append(
            (
                HOT_PARTITION,
                f"lake: {rows[0]['topic']}-{rows[0]['partition']} peaked at {rows[0]['skew']:.1f}x its topic's median",
            )
        )
    return apply_freshness(out, facts["data_end"], began)
