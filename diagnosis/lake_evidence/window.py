"""Asking the metric lake (``lake.service.LakeService`` in ``ctx.lake``) for the commands.

* the time window (``--since 30m``; default the last 15 minutes) and how an answer names it;
* the two ways in: the lake's Spark query functions (``lake.queries``: ``q_*``) through
  ``LakeService.query`` (a time limit, and the Spark jobs of a timed-out query cancelled), and the
  incident-window questions (``window_queries``) answered in process by ``LakeService.ask_window``;
  both return plain rows;
* how much the lake holds (``collected``, ``newest_sample``) and how a failed question is told
  (no lake, a young lake: :class:`NotEnoughData`, a timeout).

A missing lake (``ctx.lake is None``) or an unavailable one (Spark down, timeout: the lake's
``lake.errors.LakeUnavailable``) raises :class:`Unavailable`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from framework.context import Context
from framework.errors import Unavailable
from framework.router import BadInput
from framework.spec import CommandRequest, Option
from lake.embedded import PastCrossover, Question, TableNotFound
from lake.errors import LakeTimeout, LakeUnavailable
from lake.errors import missing_table as lake_missing_table
from lake.mapping import LAKE_METRICS
from lake.schema import METRICS
from window_queries.history import HISTORY_QUESTION
from window_queries.trend import gauge_trend

# A row of a lake query (a collected Spark Row as a dict): its values differ by column.
Row = dict[str, Any]
# What a ``lake.queries`` function returns: lists of rows by name, plus scalars such as ``data_end``.
Facts = dict[str, Any]
# A ``spark_queries`` function: DataFrame -> DataFrame (pyspark has no type information).
WindowQuery = Callable[[Any], Any]
T = TypeVar("T")


DEFAULT_SINCE = dt.timedelta(minutes=15)
MIN_SINCE = dt.timedelta(minutes=1)
MAX_SINCE = dt.timedelta(days=31)


def since_option(default: str = "15m") -> Option:
    return Option("since", f"how far back the metric lake looks: 30m, 1h, 2d (default {default})")


SINCE_OPTION = since_option()

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+)\s*(s|sec|m|min|h|hr|d|w)", re.IGNORECASE)


def parse_since(text: str) -> dt.timedelta:
    """``"15m"``, ``"1h30m"``, ``"2d"``, ``"90s"`` -> timedelta (BadInput otherwise)."""
    s = str(text).strip().lower().replace(" ", "")
    if not s or not re.fullmatch(r"(?:\d+(?:s|sec|min|m|hr|h|d|w))+", s):
        raise BadInput(f"--since takes a duration like 15m, 1h, 1h30m or 2d, not '{str(text)[:40]}'.")
    seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(s))
    since = dt.timedelta(seconds=seconds)
    if since < MIN_SINCE or since > MAX_SINCE:
        raise BadInput(f"--since must be between 1m and {MAX_SINCE.days}d.")
    return since


def describe_since(since: dt.timedelta) -> str:
    secs = int(since.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        n, secs = divmod(secs, size)
        if n:
            parts.append(f"{n} {unit}")
    return " ".join(parts) or "0 s"


@dataclass(frozen=True)
class Window:
    start: dt.datetime  # aware UTC
    end: dt.datetime
    since: dt.timedelta

    @property
    def label(self) -> str:
        s, e = self.start, self.end
        same_day = s.date() == e.date()
        span = f"{s:%Y-%m-%d %H:%M} to {e:%H:%M} UTC" if same_day else f"{s:%Y-%m-%d %H:%M} to {e:%Y-%m-%d %H:%M} UTC"
        return f"last {describe_since(self.since)}: {span}"


def window_for(request: CommandRequest, ctx: Context, default: dt.timedelta = DEFAULT_SINCE) -> Window:
    raw = request.options.get("since")
    since = parse_since(str(raw)) if raw is not None else default
    end = dt.datetime.fromtimestamp(ctx.clock(), dt.timezone.utc)
    return Window(end - since, end, since)


def lake_cluster(request: CommandRequest, ctx: Context) -> str | None:
    """The lake's cluster name for a request: --cluster, else the lake's default (None: any)."""
    return request.cluster or getattr(ctx.lake, "cluster", None)


async def run_query(ctx: Context, request: CommandRequest, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(view, *args)`` on the lake; Unavailable when there is none or it fails."""
    lake = ctx.lake
    if lake is None:
        raise _no_lake()
    if not hasattr(lake, "query"):
        raise Unavailable("The configured metric lake does not answer queries (expected a lake.service.LakeService).")
    try:
        result: T = await lake.query(fn, *args, cluster=lake_cluster(request, ctx), **kwargs)
        return result
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


def _no_lake() -> Unavailable:
    return Unavailable(
        "No metric lake is configured."
        "[[terminal: Run `kbot run` (it collects and ingests), or `kbot lake collect` and `kbot lake ingest`, "
        "or set KBOT_LAKE_URI, and start the bot with the lake enabled.]]"
        "[[slack: Whoever runs the bot can enable it (KBOT_LAKE=1 with `kbot run`, or KBOT_LAKE_URI); until "
        "then answers use the live cluster only.]]"
    )


def lake_or_unavailable(ctx: Context) -> Any:
    lake = ctx.lake
    if lake is None:
        raise _no_lake()
    if not hasattr(lake, "ask_window"):
        raise Unavailable("The configured metric lake does not answer queries (expected a lake.service.LakeService).")
    return lake


async def ask_window(
    ctx: Context,
    cluster: str | None,
    question: Question,
    window: Window,
    *args: Any,
    timeout: float | None = None,
) -> Facts:
    """``question(window, *args)`` (``window_queries``), answered in the bot's process
    (``LakeService.ask_window``); Unavailable when the lake cannot answer, and
    :class:`NotEnoughData` on a lake with nothing ingested yet."""
    lake = lake_or_unavailable(ctx)
    try:
        facts: Facts = await lake.ask_window(
            question, window.start, window.end, *args, cluster=cluster, timeout=timeout
        )
        return facts
    except TableNotFound as exc:
        raise NotEnoughData(str(exc)) from exc
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


async def window_trend(ctx: Context, request: CommandRequest, window: Window, metric: str, bucket_s: int) -> Facts:
    """A gauge per broker and bucket over the incident window (``window_queries.trend``): the
    chart beside `why`'s findings, read from the samples they were read from."""
    return await ask_window(ctx, lake_cluster(request, ctx), gauge_trend(metric), window, bucket_s)


async def newest_sample(
    ctx: Context, cluster: str | None, hours: int, timeout: float | None = None
) -> dt.datetime | None:
    """The lake's newest sample of ``cluster`` in the last ``hours`` (read in process), None
    without one or without a lake; Unavailable when the lake cannot be read."""
    if ctx.lake is None:
        return None
    lake = lake_or_unavailable(ctx)
    end = dt.datetime.fromtimestamp(ctx.clock(), dt.timezone.utc)
    try:
        newest: dt.datetime | None = await lake.newest_sample(end, hours, cluster, timeout=timeout)
        return newest
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


class NotEnoughData(Unavailable):
    """The lake has no samples at all yet (nothing ingested): a young lake, not a failure."""


#: Rows of a window asked by name: ``(ctx, cluster, window, timeout, options) -> rows``.


def known_metrics() -> list[str]:
    """Every metric the lake holds (its schema's and the exporter mapping's names)."""

    return list(dict.fromkeys([*METRICS, *LAKE_METRICS]))


def _q(name: str) -> Callable[..., Facts]:
    """A query function of ``lake.queries`` (imported on first use: pyspark loads only with a lake)."""
    from lake import queries

    fn: Callable[..., Facts] = getattr(queries, name)
    return fn


# --------------------------------------------------------------------------- history


async def history(
    ctx: Context,
    request: CommandRequest,
    window: Window,
    metric: str,
    topic: str | None,
    broker: int | None,
    partition: int | None,
    bucket_s: int,
) -> Facts:
    """One metric per bucket and broker over ``window``: read in this process
    (``window_queries.history``) when the files it needs fit what one process reads in about a
    second, else by Spark (``lake.queries.q_history``: the same numbers); ``engine`` in the facts
    says which, ``engine_reason`` why Spark.  Past the crossover with Spark unavailable, a local
    lake is still read in process, without the budget."""
    args = (metric, topic, broker, partition, bucket_s, ctx.clock())
    cluster = lake_cluster(request, ctx)
    try:
        return await ask_window(ctx, cluster, HISTORY_QUESTION, window, *args)
    except PastCrossover as exc:
        past = exc
    try:
        facts: Facts = await run_query(ctx, request, _q("q_history"), window.start, window.end, *args)
    except Unavailable:
        if not past.budget:
            raise
        facts = await ask_window(ctx, cluster, HISTORY_QUESTION, window, *args, None)
        facts["engine_reason"] = f"{past.reason}; Spark is unavailable, so it was read in process all the same"
        return facts
    facts["engine_reason"] = past.reason
    return facts


# --------------------------------------------------------------------------- how much the lake holds


async def collected(ctx: Context, request: CommandRequest, window: Window) -> Facts:
    """``LakeService.collected`` over ``window``: the minutes of it the lake holds and whether it
    holds anything older (``diagnosis.lake_age`` tells a young lake with it), read in process from
    the tables' Delta logs.  Raises Unavailable."""
    lake = lake_or_unavailable(ctx)
    try:
        facts: Facts = await lake.collected(window.start, window.end, lake_cluster(request, ctx))
        return facts
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


def missing_table(exc: BaseException) -> bool:
    """Did a lake question fail because a table of the lake is not there yet (``lake.errors``)?"""

    return lake_missing_table(exc)


def timed_out(exc: BaseException) -> bool:
    """Is ``exc`` (an Unavailable from :func:`run_query`) the lake's query running past its limit?"""

    return isinstance(exc, LakeTimeout) or isinstance(exc.__cause__, LakeTimeout)
