"""The lake over hours for summaries (the digest, triage): its rows and the end of its data, with a
time limit long enough for a day's scan."""

from __future__ import annotations

import datetime as dt
from typing import Any

from diagnosis.lake_evidence import WindowQuery, newest_sample, window_rows
from framework.context import Context

LAKE_TIMEOUT_S = 120.0


async def lake_rows(
    ctx: Context, cluster: str, hours: int, query: WindowQuery | str, **options: Any
) -> list[dict[str, Any]] | None:
    """Rows of the lake's window query ``query`` over the last ``hours`` of one cluster, through
    LakeService.query (its time limit; a timed-out query's Spark jobs are cancelled); None without
    a lake."""
    return await window_rows(ctx, cluster, hours, query, timeout=LAKE_TIMEOUT_S, **options)


async def lake_data_end(ctx: Context, cluster: str, hours: int) -> dt.datetime | None:
    """The newest sample of ``cluster`` in the lake within ``hours``, None without one."""
    return await newest_sample(ctx, cluster, hours, timeout=LAKE_TIMEOUT_S)
