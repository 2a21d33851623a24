"""Evidence from the metric lake (``lake.service.LakeService`` in ``ctx.lake``) for the commands.

Everything a command asks the lake goes through here:

* the time window (``--since 30m``; default the last 15 minutes) and how an answer names it;
* the lake's query functions (``lake.queries``: ``q_*``), run through ``LakeService.query``
  (the one way into the lake: a time limit, and the Spark jobs of a timed-out query cancelled);
  they return plain rows;
* turning those rows into :class:`Evidence` items whose source names the query
  (``lake: urp_trend``), plus, where the lake's data points at a runbook entry, the
  entry it points at.

A missing lake (``ctx.lake is None``) or an unavailable one (Spark down, timeout: the lake's
``lake.errors.LakeUnavailable``) raises or reports :class:`Unavailable`; commands that also have
live evidence keep it and add a note.

Freshness: a lake that stopped receiving samples (collector or ingest down) shows an old,
possibly healthy trend.  When its newest sample in the window is older than the symptom (or,
when the caller does not know when the symptom began, older than :data:`FRESH_S` before the
end of the window), the answer says "lake data ends 22:39:40, before this began" instead.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from diagnosis.entry_ids import (
    BROKER_LOSS,
    HANDLER_SATURATION,
    HANGING_TRANSACTION,
    HOT_PARTITION,
    SLOW_FOLLOWER,
    UNDER_MIN_ISR,
)
from diagnosis.thresholds import handler_idle_saturated_below, hot_rule
from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Evidence, Series, Severity
from framework.router import BadInput
from framework.spec import CommandRequest, Option
from lake.embedded import PastCrossover, Question, TableNotFound
from lake.errors import LakeTimeout, LakeUnavailable
from lake.errors import missing_table as lake_missing_table
from lake.mapping import LAKE_METRICS
from lake.schema import METRICS
from window_queries.availability import CONTROLLER_QUESTION, OFFLINE_QUESTION, UNDER_MIN_ISR_QUESTION
from window_queries.history import HISTORY_QUESTION
from window_queries.hot import ask_hot
from window_queries.lag import GROUP_LAG_QUESTION
from window_queries.saturation import SATURATION_QUESTION
from window_queries.trend import gauge_trend
from window_queries.txn import HANGING_QUESTION
from window_queries.urp import URP_QUESTION, URP_TREND_QUESTION

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


def _lake_or_unavailable(ctx: Context) -> Any:
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
    lake = _lake_or_unavailable(ctx)
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
    lake = _lake_or_unavailable(ctx)
    end = dt.datetime.fromtimestamp(ctx.clock(), dt.timezone.utc)
    try:
        newest: dt.datetime | None = await lake.newest_sample(end, hours, cluster, timeout=timeout)
        return newest
    except LakeUnavailable as exc:
        raise Unavailable(str(exc)) from exc


class NotEnoughData(Unavailable):
    """The lake has no samples at all yet (nothing ingested): a young lake, not a failure."""


#: Rows of a window asked by name: ``(ctx, cluster, window, timeout, options) -> rows``.
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


def known_metrics() -> list[str]:
    """Every metric the lake holds (its schema's and the exporter mapping's names)."""

    return list(dict.fromkeys([*METRICS, *LAKE_METRICS]))


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


def _n(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "?"
    if digits == 0 and float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.{digits or 1}f}"


def _who(row: Row, many_clusters: bool) -> str:
    return f"broker {row['broker']}" + (f" ({row['cluster']})" if many_clusters else "")


def _many(rows: list[Row]) -> bool:
    return len({r.get("cluster") for r in rows}) > 1


@dataclass
class LakeFindings:
    window: Window
    evidence: list[Evidence] = field(default_factory=list)
    lead: list[tuple[str, str]] = field(default_factory=list)  # (runbook entry, what the lake showed)
    verdict: str | None = None  # used when there is no live verdict
    severity: Severity = "info"
    notes: list[str] = field(default_factory=list)
    has_data: bool = True
    available: bool = True
    details: list[str] = field(default_factory=list)  # per-item lines, for a Section
    data_end: float | None = None  # set when the lake's data ends before the symptom (stale)
    newest: float | None = None  # the window's newest sample (epoch s), whenever the lake had one
    series: list[Series] = field(default_factory=list)  # the symptom's trend, for a chart

    @classmethod
    def young(cls, window: Window, source: str) -> "LakeFindings":
        """The answer on a lake with nothing ingested yet: not enough data, not an error."""
        return cls(
            window,
            evidence=[Evidence("Metric lake", "not enough data yet (0 min collected)", source, "neutral")],
            has_data=False,
        )

    @classmethod
    def without_data(cls, window: Window, source: str, what: str) -> "LakeFindings":
        """The answer when the lake has nothing for the window: say so, point nowhere."""
        return cls(window, evidence=[no_data(window, source, what)], has_data=False)


def _q(name: str) -> Callable[..., Facts]:
    """A query function of ``lake.queries`` (imported on first use: pyspark loads only with a lake)."""
    from lake import queries

    fn: Callable[..., Facts] = getattr(queries, name)
    return fn


#: With no known start of the symptom, the lake counts as stale when its newest sample in the
#: window is older than this before the window's end (the collector scrapes every 10 s and the
#: ingest commits every minute or so: a lake that is 3 minutes behind has stopped).
FRESH_S = 180.0


def hms(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.timezone.utc):%H:%M:%S}"


def apply_freshness(out: "LakeFindings", data_end: float | None, began: dt.datetime | None = None) -> "LakeFindings":
    """Say so when the lake's data ends before the symptom began (or, without a start time,
    :data:`FRESH_S` before the window's end): a healthy trend from before the symptom is no
    evidence against it.  Healthy items are replaced; problems the lake did see are kept."""
    out.newest = data_end
    if not out.has_data or data_end is None:
        return out
    limit = began.timestamp() if began is not None else out.window.end.timestamp() - FRESH_S
    if data_end >= limit:
        return out
    out.data_end = data_end
    line = f"lake data ends {hms(data_end)} UTC, before this began"
    if not out.lead:
        out.evidence = [e for e in out.evidence if e.status == "bad"]
        out.evidence.insert(
            0,
            Evidence(
                "Metric lake",
                line
                + ": it cannot show this symptom"
                + "[[terminal: (is `kbot lake collect` / ingest running?)]][[slack: (its collector may be stopped)]]",
                "lake: freshness",
                "neutral",
            ),
        )
        out.verdict = f"The metric lake cannot say: {line}."
        out.severity = "info"
    else:
        out.notes.append(f"Metric lake: {line}; what it shows is from before that.")
    return out


def no_data(window: Window, source: str, what: str = "samples") -> Evidence:
    return Evidence(
        "Metric lake", f"no data for this window ({window.label}): no {what} in the lake", source, "neutral"
    )


# --------------------------------------------------------------------------- URP family


def urp_findings(facts: Facts, window: Window, ctx: Context) -> LakeFindings:
    """Evidence from q_urp's rows: the URP shape per broker, where it concentrates, ISR churn."""
    trend, conc, churn = facts["trend"], facts["concentration"], facts["churn"]
    if not trend and not churn:
        return LakeFindings.without_data(window, "lake: urp_trend", "UnderReplicatedPartitions samples")
    out = LakeFindings(window)
    many = _many(trend + churn)
    shaped = sorted((r for r in trend if r["shape"] != "zero"), key=lambda r: (-(r["max"] or 0), r["broker"]))
    for r in shaped:
        if r["shape"] == "flat":
            desc = (
                f"flat: level at {_n(r['modal_value'])} for {r['modal_share']:.0%} of its non-zero samples "
                f"({r['nonzero_samples']} of {r['samples']} samples > 0, last {_n(r['last'])})"
            )
        else:
            desc = (
                f"fluctuating: between {_n(r['min'])} and {_n(r['max'])}, {r['changes']} changes in "
                f"{r['samples']} samples, last {_n(r['last'])}"
            )
        out.evidence.append(Evidence(f"URP trend, {_who(r, many)}", desc, "lake: urp_trend", "bad"))
    if trend and not shaped:
        samples = max(r["samples"] for r in trend)
        out.evidence.append(
            Evidence(
                "URP trend",
                f"0 on all {len(trend)} reporting broker(s) (up to {samples} samples each)",
                "lake: urp_trend",
                "ok",
            )
        )
    top = [r for r in conc if r["rank"] == 1 and r["share"] is not None]
    if shaped and len(top) == 1:
        r = top[0]
        out.evidence.append(
            Evidence(
                "URP concentrates on",
                f"{_who(r, many)}: {r['share']:.0%} of the cluster's URP "
                f"(mean {_n(r['mean_urp'], 1)}, max {_n(r['max_urp'])})",
                "lake: urp_concentration",
                "bad",
            )
        )
    elif shaped and top:
        out.evidence.append(
            Evidence(
                "URP spread evenly over",
                ", ".join(_who(r, many) for r in sorted(top, key=lambda r: r["broker"]))
                + f" ({top[0]['share']:.0%} each)",
                "lake: urp_concentration",
                "bad",
            )
        )
    moving = sorted((r for r in churn if (r["shrinks"] or 0) > 0 or (r["expands"] or 0) > 0), key=lambda r: r["broker"])
    for r in moving:
        text = f"{_n(r['shrinks'])} ISR shrinks, {_n(r['expands'])} expands"
        if r["shrinks_without_expands"]:
            text += " (shrinks without expands)"
        if r["resets"]:
            text += f"; counters reset {r['resets']}x (the broker restarted)"
        out.evidence.append(
            Evidence(
                f"ISR churn, {_who(r, many)}",
                text,
                "lake: isr_churn",
                "bad" if r["shrinks_without_expands"] else "neutral",
            )
        )
    if churn and not moving:
        out.evidence.append(Evidence("ISR churn", "no ISR shrinks or expands", "lake: isr_churn", "ok"))
    if not shaped:
        out.verdict = (
            f"The metric lake shows no under-replicated partitions in the last {describe_since(window.since)}."
        )
        out.severity = "ok"
        return out
    shapes = {r["shape"] for r in shaped}
    brokers = ", ".join(str(r["broker"]) for r in shaped)
    # the broker carrying most of the URP decides the signature when both shapes appear
    lead_shape = None
    if top:
        lead_shape = next(
            (r["shape"] for r in shaped if (r["cluster"], r["broker"]) == (top[0]["cluster"], top[0]["broker"])), None
        )
    shape = lead_shape or ("flat" if shapes == {"flat"} else "fluctuating")
    entry = BROKER_LOSS if shape == "flat" else SLOW_FOLLOWER
    title = ctx.kb.failure_modes[entry].title if entry in ctx.kb.failure_modes else entry
    out.lead.append((entry, f"lake: URP {shape} on broker(s) {brokers} over the last {describe_since(window.since)}"))
    out.verdict = (
        f"The metric lake shows URP {shape} on broker(s) {brokers} over the "
        f"{describe_since(window.since)}: the pattern of '{title}'."
    )
    out.severity = "warning"
    return out


async def urp(ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), URP_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: urp_trend")
    return apply_freshness(urp_findings(facts, window, ctx), facts["data_end"], began)


# --------------------------------------------------------------------------- other symptoms


async def under_min_isr(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), UNDER_MIN_ISR_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: under_min_isr_timeline")
    rows = facts["rows"]
    if not rows:
        return LakeFindings.without_data(window, "lake: under_min_isr_timeline", "UnderMinIsrPartitionCount samples")
    out = LakeFindings(window)
    many = _many(rows)
    bad = [r for r in rows if (r["max_under"] or 0) > 0]
    for r in sorted(bad, key=lambda r: r["broker"]):
        out.evidence.append(
            Evidence(
                f"Under min ISR, {_who(r, many)}",
                f"up to {_n(r['max_under'])} partition(s), in {r['minutes_under']} of {r['minutes']} minute(s)",
                "lake: under_min_isr_timeline",
                "bad",
            )
        )
    if not bad:
        at = max((r["max_at"] or 0) for r in rows)
        out.evidence.append(
            Evidence(
                "Under min ISR",
                "0 on every broker" + (f" (up to {_n(at)} at min ISR)" if at else ""),
                "lake: under_min_isr_timeline",
                "ok",
            )
        )
    else:
        out.lead.append(
            (UNDER_MIN_ISR, "lake: partitions under min ISR on broker(s) " + ", ".join(str(r["broker"]) for r in bad))
        )
    return apply_freshness(out, facts["data_end"], began)


async def offline(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), OFFLINE_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: offline_timeline")
    rows = facts["rows"]
    if not rows:
        return LakeFindings.without_data(window, "lake: offline_timeline", "OfflinePartitionsCount samples")
    out = LakeFindings(window)
    for r in rows:
        if (r["max_offline"] or 0) > 0:
            first = dt.datetime.fromtimestamp(r["first_offline"], dt.timezone.utc)
            out.evidence.append(
                Evidence(
                    "Offline partitions over the window",
                    f"up to {_n(r['max_offline'])}, in {r['minutes_offline']} of {r['minutes']} minute(s), "
                    f"first at {first:%H:%M} UTC",
                    "lake: offline_timeline",
                    "bad",
                )
            )
        else:
            out.evidence.append(Evidence("Offline partitions over the window", "0", "lake: offline_timeline", "ok"))
    return apply_freshness(out, facts["data_end"], began)


async def hanging(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), HANGING_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: last_stable_offset_lag")
    out = LakeFindings(window)
    for r in facts["growing"]:
        out.evidence.append(
            Evidence(
                f"LastStableOffsetLag {r['topic']}-{r['partition']}",
                f"growing: {_n(r['first_lag'])} -> {_n(r['last_lag'])} records "
                f"({_n(r['growth_per_sec'], 1)}/s), leader broker {r['leader_broker']}",
                "lake: last_stable_offset_lag",
                "bad",
            )
        )
    for r in facts["late"]:
        out.evidence.append(
            Evidence(
                f"Late transactions, broker {r['broker']}",
                f"up to {_n(r['max'])} partition(s) past transaction.max.timeout.ms",
                "lake: late_transactions",
                "bad",
            )
        )
    if facts["growing"] or facts["late"]:
        out.lead.append((HANGING_TRANSACTION, "lake: LastStableOffsetLag growing without coming down"))
    else:
        out.evidence.append(
            Evidence("LastStableOffsetLag", "no partition's LSO lag kept growing", "lake: last_stable_offset_lag", "ok")
        )
    return apply_freshness(out, facts["data_end"], began)


async def saturation(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    # the same bound the live check alerts on (the runbook's alert table): mean idle under it
    idle_below = handler_idle_saturated_below(ctx.kb)
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), SATURATION_QUESTION, window, idle_below)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: request_handler_idle")
    if not facts["idle"]:
        return LakeFindings.without_data(window, "lake: request_handler_idle", "RequestHandlerAvgIdlePercent samples")
    out = LakeFindings(window)
    many = _many(facts["idle"])
    for r in sorted(facts["idle"], key=lambda r: r["avg_idle"]):
        out.evidence.append(
            Evidence(
                f"Handler idle, {_who(r, many)}",
                f"avg {r['avg_idle']:.0%}, min {r['min_idle']:.0%}, last {r['last_idle']:.0%}",
                "lake: request_handler_idle",
                "bad" if r["saturated"] else "ok",
            )
        )
    worst = sorted(facts["queue"], key=lambda r: -(r["max_ms"] or 0))[:3]
    for r in worst:
        out.evidence.append(
            Evidence(
                f"Request queue time p99, {r['request']}",
                f"max {_n(r['max_ms'], 1)} ms (broker {r['worst_broker']}), avg {_n(r['avg_ms'], 1)} ms",
                "lake: request_queue_time",
                "neutral",
            )
        )
    sat = [r for r in facts["idle"] if r["saturated"]]
    if sat:
        out.lead.append(
            (
                HANDLER_SATURATION,
                f"lake: request handler idle below {idle_below:.0%} on broker(s) "
                + ", ".join(str(r["broker"]) for r in sat),
            )
        )
    return apply_freshness(out, facts["data_end"], began)


async def controller(
    ctx: Context, request: CommandRequest, window: Window, began: dt.datetime | None = None
) -> LakeFindings:
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), CONTROLLER_QUESTION, window)
    except NotEnoughData:
        return LakeFindings.young(window, "lake: controller_anomalies")
    rows = facts["rows"]
    out = LakeFindings(window)
    for r in rows:
        out.evidence.append(
            Evidence(
                "Active controller count != 1",
                f"{r['buckets']} minute(s) from {r['start']:%H:%M} UTC "
                f"(between {_n(r['min_active'])} and {_n(r['max_active'])} active)",
                "lake: controller_anomalies",
                "bad",
            )
        )
    if not rows:
        out.evidence.append(
            Evidence(
                "Active controller", "exactly one in every minute with samples", "lake: controller_anomalies", "ok"
            )
        )
    return apply_freshness(out, facts["data_end"], began)


# --------------------------------------------------------------------------- hot partitions


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
    _lake_or_unavailable(ctx)

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
                f"peak {_n(r['peak_records_per_sec'], 1)} records/s (1-minute)"
                + (f", {skew:.1f}x its topic's median peak" if skew is not None else "")
                + f"; window mean {_n(r['records_per_sec'], 1)}/s"
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


# --------------------------------------------------------------------------- consumer lag


@dataclass
class GroupLagFindings(LakeFindings):
    """The lake's findings on one group, plus the figures `lag` ranks causes with."""

    status: str | None = None  # Burrow's group status: OK, WARN, ERR
    worst_status: str | None = None  # the worst partition status: OK, WARN, STOP, STALL, REWIND
    total_lag: float | None = None  # sum of the partitions' current lag (latest log end - last commit)
    last_commit: float | None = None  # epoch seconds of the last commit the lake saw
    first_commit: float | None = None


def _epoch(value: dt.datetime | None) -> float | None:
    """Epoch seconds of a row's timestamp (``lake.queries`` hands them out aware, in UTC)."""
    return None if value is None else value.timestamp()


async def group_lag(ctx: Context, request: CommandRequest, group: str, window: Window) -> LakeFindings:
    """Burrow's verdict on ``group`` over the window (``window_queries.lag``, answered in the bot's
    process), its partitions' lines and its lag per minute; on a lake with nothing ingested yet,
    not enough data.  Raises Unavailable."""
    try:
        facts = await ask_window(ctx, lake_cluster(request, ctx), GROUP_LAG_QUESTION, window, group)
    except NotEnoughData:
        return GroupLagFindings.young(window, "lake: partition_lag_status")
    if not facts["group"]:
        return GroupLagFindings.without_data(window, "lake: partition_lag_status", f"commits of group {group}")
    out = GroupLagFindings(window)
    for g in facts["group"]:
        status = g["status"]
        text = (
            f"{status} (worst partition: {g['worst_status']}); {g['partitions_not_ok']} of {g['partitions']} "
            f"partition(s) not OK; lag now {_n(g['total_lag'])}"
        )
        out.evidence.append(
            Evidence("Window verdict (Burrow rules)", text, "lake: group_lag_status", "ok" if status == "OK" else "bad")
        )
        out.severity = "ok" if status == "OK" else ("warning" if status == "WARN" else "critical")
        out.status, out.worst_status, out.total_lag = status, g["worst_status"], g["total_lag"]
    parts = facts["partitions"]
    commits = [t for r in parts if (t := _epoch(r.get("last_commit"))) is not None]
    firsts = [t for r in parts if (t := _epoch(r.get("first_commit"))) is not None]
    out.last_commit = max(commits) if commits else None
    out.first_commit = min(firsts) if firsts else None
    out.details = partition_lag_lines(parts)
    clusters = {r["cluster"] for r in facts.get("trend", [])}
    out.series = [
        Series(
            f"Lag of {group}",
            "records",
            [(r["minute"].isoformat(), float(r["lag"])) for r in facts["trend"] if r["cluster"] == c],
            label=f"total lag [{c}]" if len(clusters) > 1 else "total lag",
        )
        for c in sorted(clusters)
    ]
    return out


async def group_lag_or_note(ctx: Context, request: CommandRequest, group: str, window: Window) -> LakeFindings | None:
    """Like :func:`group_lag`, but None without a lake and a note when it is unavailable."""
    if ctx.lake is None:
        return None
    try:
        return await group_lag(ctx, request, group, window)
    except Unavailable as exc:
        return unavailable(window, exc)


def partition_lag_lines(rows: list[Row]) -> list[str]:
    return [
        f"{r['topic']}-{r['partition']}: {r['status']} (lag {_n(r['current_lag'])}, max {_n(r['max_lag'])}, "
        f"{r['commits']} commit(s) seen)"
        for r in rows
    ]


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
    lake = _lake_or_unavailable(ctx)
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


def unavailable(window: Window, exc: Exception) -> LakeFindings:
    return LakeFindings(
        window, notes=[f"Metric lake: {exc} This answer has no lake evidence."], has_data=False, available=False
    )
