"""Evidence from the metric lake for the commands: the entry point.

The lake's evidence is split by source:

* ``diagnosis.lake_evidence.window``: the window (``--since``) and the ways into the lake;
* ``diagnosis.lake_evidence.findings``: :class:`LakeFindings` and the freshness of the lake's data;
* ``diagnosis.lake_evidence.urp``: under-replication (URP shape, where it is reported, ISR churn);
* ``diagnosis.lake_evidence.symptoms``: under min ISR, offline, hanging transactions, saturation, controller;
* ``diagnosis.lake_evidence.hot``: write rates per partition;
* ``diagnosis.lake_evidence.lag``: a consumer group's window verdict.

Here: the lake checks by the name the runbook binds them under (:data:`LAKE_CHECKS`,
:func:`for_symptom`) and the window rows the digest and triage ask by name
(:func:`window_rows`).  The names the commands use are re-exported, so that a command imports
one module.
"""

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

from diagnosis.lake_evidence.findings import (
    FRESH_S,
    LakeFindings,
    age,
    apply_freshness,
    data_age,
    hms,
    no_data,
    unavailable,
)
from diagnosis.lake_evidence.hot import ask_hot_partitions, hot, hot_symptom
from diagnosis.lake_evidence.lag import GroupLagFindings, group_lag, group_lag_or_note, partition_lag_lines
from diagnosis.lake_evidence.symptoms import controller, hanging, offline, saturation, under_min_isr
from diagnosis.lake_evidence.urp import urp, urp_findings
from diagnosis.lake_evidence.window import (
    DEFAULT_SINCE,
    SINCE_OPTION,
    Facts,
    NotEnoughData,
    Row,
    Window,
    WindowQuery,
    ask_window,
    collected,
    describe_since,
    history,
    known_metrics,
    lake_cluster,
    missing_table,
    newest_sample,
    parse_since,
    run_query,
    since_option,
    timed_out,
    window_for,
    window_trend,
)
from framework.context import Context
from framework.errors import Unavailable
from framework.spec import CommandRequest
from lake.embedded import Question
from lake.errors import LakeUnavailable
from window_queries.urp import URP_TREND_QUESTION

RowsAsker = Callable[[Context, "str | None", Window, "float | None", dict[str, Any]], Awaitable[list[Row]]]


def _question_rows(question: Question, key: str) -> RowsAsker:
    """The rows under ``key`` of ``question``'s answer."""

    async def rows(
        ctx: Context, cluster: str | None, window: Window, timeout: float | None, options: dict[str, Any]
    ) -> list[Row]:
        facts = await ask_window(ctx, cluster, question, window, timeout=timeout)
        rows_of: list[Row] = facts[key]
        return rows_of

    return rows


async def _hot_rows(
    ctx: Context, cluster: str | None, window: Window, timeout: float | None, options: dict[str, Any]
) -> list[Row]:
    """The hot partitions ranked on the window mean (``options``: topic, top, rank_by)."""
    top = options.get("top")
    facts = await ask_hot_partitions(
        ctx,
        cluster,
        window,
        options.get("topic"),
        None if top is None else int(top),
        str(options.get("rank_by", "mean")),
        timeout=timeout,
    )
    rows_of: list[Row] = facts["rows"]
    return rows_of


#: Window rows the digest and triage ask by name, answered in process.
WINDOW_ROWS: dict[str, RowsAsker] = {
    "urp_trend": _question_rows(URP_TREND_QUESTION, "trend"),
    "hot_partitions": _hot_rows,
}


async def window_rows(
    ctx: Context,
    cluster: str | None,
    hours: int,
    query: WindowQuery | str,
    timeout: float | None = None,
    **options: Any,
) -> list[Row] | None:
    """Rows of ``query(window_df)`` (a pure ``spark_queries`` function, through
    ``LakeService.query``: its time limit, a timed-out query's Spark jobs cancelled), or of the
    window rows named ``query`` in :data:`WINDOW_ROWS` with ``options`` (answered in process),
    over the last ``hours`` of ``cluster``; None without a lake, [] on a lake with nothing
    ingested yet.  Raises :class:`Unavailable`.  For the digest and triage.
    """
    if ctx.lake is None:
        return None
    if isinstance(query, str):
        if query not in WINDOW_ROWS:
            raise ValueError(f"no lake window query named {query!r}")
        end = dt.datetime.fromtimestamp(ctx.clock(), dt.timezone.utc)
        span = Window(end - dt.timedelta(hours=hours), end, dt.timedelta(hours=hours))
        try:
            return await WINDOW_ROWS[query](ctx, cluster, span, timeout, options)
        except NotEnoughData:
            return []
    from lake.queries import q_window_rows

    lake = ctx.lake
    if not hasattr(lake, "query"):
        raise Unavailable("The configured metric lake does not answer queries (expected a lake.service.LakeService).")
    end = dt.datetime.fromtimestamp(ctx.clock(), dt.timezone.utc)
    try:
        rows: list[Row] = await lake.query(
            q_window_rows, end - dt.timedelta(hours=hours), end, query, cluster=cluster, timeout=timeout
        )
        return rows
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


# --------------------------------------------------------------------------- `why`: by runbook entry

LakeCheck = Callable[[Context, CommandRequest, Window, "dt.datetime | None"], Awaitable[LakeFindings]]

# The lake checks by the name the runbook binds them under (an entry's `checks.lake`).
LAKE_CHECKS: dict[str, LakeCheck] = {
    "urp": urp,
    "under_min_isr": under_min_isr,
    "offline": offline,
    "hanging": hanging,
    "saturation": saturation,
    "hot_symptom": hot_symptom,
    "controller": controller,
}


async def for_symptom(
    ctx: Context, request: CommandRequest, entry_id: str, began: dt.datetime | None = None
) -> LakeFindings | None:
    """The lake's evidence for a symptom, or None without a lake or a lake check for it.

    ``began``: when the live symptom began, when the caller knows (aware UTC); the answer then
    says so if the lake's data ends before it (see :func:`apply_freshness`).
    Never raises Unavailable: an unavailable lake comes back as findings with a note,
    so the live part of the answer stands.  A bad ``--since`` is still BadInput.
    """
    entry = ctx.kb.failure_modes.get(entry_id)
    check = LAKE_CHECKS[entry.checks.lake] if entry is not None and entry.checks.lake else None
    window = window_for(request, ctx)  # validates --since even without a lake
    if ctx.lake is None or check is None:
        return None
    try:
        return await check(ctx, request, window, began)
    except Unavailable as exc:
        return unavailable(window, exc)


__all__ = [
    "FRESH_S",
    "age",
    "data_age",
    "LakeFindings",
    "apply_freshness",
    "hms",
    "no_data",
    "unavailable",
    "ask_hot_partitions",
    "hot",
    "hot_symptom",
    "GroupLagFindings",
    "group_lag",
    "group_lag_or_note",
    "partition_lag_lines",
    "controller",
    "hanging",
    "offline",
    "saturation",
    "under_min_isr",
    "urp",
    "urp_findings",
    "DEFAULT_SINCE",
    "SINCE_OPTION",
    "Facts",
    "NotEnoughData",
    "Row",
    "Window",
    "WindowQuery",
    "ask_window",
    "collected",
    "describe_since",
    "history",
    "known_metrics",
    "lake_cluster",
    "missing_table",
    "newest_sample",
    "parse_since",
    "run_query",
    "since_option",
    "timed_out",
    "window_for",
    "window_trend",
    "LAKE_CHECKS",
    "WINDOW_ROWS",
    "for_symptom",
    "window_rows",
]
