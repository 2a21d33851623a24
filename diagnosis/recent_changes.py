"""'Changed recently': the cluster's recorded changes (the collector's metadata snapshots, lake
table of change events) that touch what an answer implicates, as one evidence line, and the few
changes that are a cause in themselves, as evidence the ranking uses.

What an answer implicates is what it names: a topic (or one of its partitions), a broker, a group,
a client. A change matches when the thing it changed is named in the answer's verdict, evidence or
tables, so `why`, `status`, `lag` and `triage` share one rule and none has to list its entities.

Three changes decide a cause by themselves (issue 38): a client quota set or lowered (the client's
requests are throttled: the client-quota-throttling entry, never the broker's handler threads),
min.insync.replicas raised on an implicated topic (acks=all writes need more replicas than before:
a lost broker that was harmless now blocks them), and retention lowered on a topic a lagging group
reads (the group's next offsets may be deleted: lag-beyond-retention).

The read is the change table's Delta snapshot in this process (no Spark, milliseconds); an answer
without a metric lake has no such line, and a failed read says so in a note."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from diagnosis.entries import diagnosis
from diagnosis.entry_ids import CLIENT_QUOTA_THROTTLING, LAG_BEYOND_RETENTION, SLOW_CONSUMERS, UNDER_MIN_ISR
from diagnosis.lake_evidence import parse_since
from framework.context import Context
from framework.reply import Diagnosis, Evidence, Reply
from framework.spec import CommandRequest, Runner
from live.change_events import RecordedChange

DEFAULT_WINDOW_S = 3600.0  # without --since: the hour before the question
SHOWN = 4  # changes in the line; the rest are counted, `changes` lists them
SOURCE = "lake: change events"
RETENTION_KEYS = ("retention.ms", "retention.bytes")


@dataclass(frozen=True)
class CauseChange:
    """A change that names a cause: the entry it points at and the sentence that says why."""

    entry: str | None  # the runbook entry it leads to (None: a sentence for the verdict only)
    sentence: str
    # what an answer must be about for this change to explain it: words of its text, or entries it ranks
    about: tuple[str, ...] = ()

    def explains(self, reply: Reply) -> bool:
        text = _answer_text(reply).lower()
        return any(w in text for w in self.about) or any(d.entry_id in self.about for d in reply.diagnoses)


def _answer_text(reply: Reply) -> str:
    parts = [reply.verdict]
    for e in reply.evidence:
        parts += [e.label, e.value]
    for t in reply.tables:
        parts += [" ".join(str(c) for c in row if c is not None) for row in t.rows]
    return "\n".join(parts)


def _whole(token: str, text: str) -> bool:
    """``token`` in ``text`` as a name: not inside a longer name (a partition suffix -N is fine)."""
    # a name may hold dots and dashes: a sentence's full stop ends it, "orders.eu" or "orders-eu" does not
    return re.search(rf"(?<![\w.-]){re.escape(token)}(?:-\d+)?(?![\w-]|\.\w)", text) is not None


def _brokers_named(text: str) -> set[str]:
    """Broker ids the text names: "broker 102", "Broker(s) 102, 103", "brokers 101 and 103"."""
    out: set[str] = set()
    for m in re.finditer(r"[Bb]rokers?(?:\(s\))?\s+((?:\d+(?:\s*,\s*|\s+and\s+|/)?)+)", text):
        out.update(re.findall(r"\d+", m.group(1)))
    return out


def _subject(change: RecordedChange) -> tuple[str, str] | None:
    """What a change is about: (kind of thing, its name), or None for a summary of many partitions."""
    res = change.resource
    for prefix, kind in (("topic ", "topic"), ("broker ", "broker"), ("group ", "group")):
        if res.startswith(prefix):
            return kind, res[len(prefix) :]
    if change.kind == "quota":
        return "client", res.split("=", 1)[-1].split(",")[0]
    m = re.fullmatch(r"(.+)-(\d+)", res)
    if m and change.kind in ("leadership", "replicas", "reassignment"):
        return "topic", m.group(1)
    return None


def touching(changes: Iterable[RecordedChange], reply: Reply, also: Sequence[str] = ()) -> list[RecordedChange]:
    """The changes about something the answer names (``also``: names the question gave, e.g. the
    group of `lag billing`). A quota change touches any answer whose causes include a client quota."""
    text = _answer_text(reply) + "\n" + "\n".join(also)
    brokers = _brokers_named(text)
    quota_in_play = any(d.entry_id == CLIENT_QUOTA_THROTTLING for d in reply.diagnoses)
    out = []
    for c in changes:
        subject = _subject(c)
        if c.kind == "quota" and quota_in_play:
            out.append(c)
        elif subject is None:  # "1,204 partitions: leaderships moved from 102 to 101/103"
            if any(_whole(b, c.change) for b in brokers):
                out.append(c)
        elif subject[0] == "broker":
            if subject[1] in brokers:
                out.append(c)
        elif _whole(subject[1], text):
            out.append(c)
    return out


def _ago(ts_ms: int, now_s: float) -> str:
    minutes = max(0, round(now_s - ts_ms / 1000) // 60)
    return "just now" if minutes < 1 else f"{minutes} min ago" if minutes < 120 else f"{minutes // 60} h ago"


def changed_recently(changes: Sequence[RecordedChange], now_s: float) -> Evidence:
    """One line, newest first: "12 min ago: topic orders min.insync.replicas 2 -> 3; ..."."""
    newest = sorted(changes, key=lambda c: -c.ts_ms)
    said = "; ".join(f"{_ago(c.ts_ms, now_s)}: {c.resource} {c.change}" for c in newest[:SHOWN])
    more = len(newest) - SHOWN
    if more > 0:
        said += f"; and {more} more (`changes --since 1h`)"
    return Evidence("Changed recently", said, SOURCE, "neutral")


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def causes(changes: Iterable[RecordedChange], now_s: float) -> list[CauseChange]:
    """The changes among ``changes`` that name a cause, newest first."""
    out = []
    for c in sorted(changes, key=lambda c: -c.ts_ms):
        before, after = _number(c.before), _number(c.after)
        when = _ago(c.ts_ms, now_s)
        if c.kind == "quota" and after is not None and (before is None or after < before):
            out.append(
                CauseChange(
                    CLIENT_QUOTA_THROTTLING,
                    f"A client quota was set {when} ({c.resource} {c.change}): the broker delays that client's "
                    "requests by design, so its latency is the quota's, not the brokers'.",
                    (CLIENT_QUOTA_THROTTLING, "throttl", "latency", "slow"),
                )
            )
        elif c.kind == "config" and c.change.startswith("min.insync.replicas") and after is not None:
            if before is None or after > before:
                out.append(
                    CauseChange(
                        None,
                        f"min.insync.replicas of {c.resource} was raised {when} ({c.change}): acks=all writes there "
                        f"now need {after:g} in-sync replicas, so a replica lost that was harmless before blocks them.",
                        ("min isr", "min.insync", "notenoughreplicas", UNDER_MIN_ISR),
                    )
                )
        elif c.kind == "config" and c.change.startswith(RETENTION_KEYS) and after is not None and after >= 0:
            if before is None or before < 0 or after < before:
                out.append(
                    CauseChange(
                        LAG_BEYOND_RETENTION,
                        f"Retention of {c.resource} was lowered {when} ({c.change}): a group behind it can find its "
                        "next offsets deleted and jump by auto.offset.reset.",
                        ("lag", LAG_BEYOND_RETENTION, SLOW_CONSUMERS),
                    )
                )
    return out


def _shown(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _action_resource(args: dict[str, Any]) -> str:
    """What a confirmed action changed, named as the lake's events name it."""
    for key, noun in (("topic", "topic"), ("group", "group")):
        if isinstance(args.get(key), str):
            return f"{noun} {args[key]}"
    brokers = args.get("brokers") or args.get("broker")
    if brokers:
        return "broker " + ", ".join(str(b) for b in (brokers if isinstance(brokers, list) else [brokers]))
    return "cluster"


def bot_actions(ctx: Context, since_ms: int, cluster: str | None) -> list[RecordedChange]:
    """The bot's own actions executed since ``since_ms`` (its audit log: who confirmed, before and
    after), as change events of kind "action"; none when the bot has no audit log here."""
    audit = getattr(ctx.gate, "audit", None)
    if audit is None:
        return []
    out = []
    for r in audit.read():
        if r.get("event") != "execution" or r.get("state") != "executed":
            continue
        ts_ms = int(float(r.get("ts") or 0) * 1000)
        if ts_ms < since_ms or (cluster and r.get("cluster") not in (None, cluster)):
            continue
        args = r.get("args") if isinstance(r.get("args"), dict) else {}
        change = f"`{r.get('command') or r.get('kind')}` run by the bot, confirmed by {r.get('user') or 'unknown'}"
        before, after = _shown(r.get("before")), _shown(r.get("after"))
        out.append(
            RecordedChange(ts_ms, str(r.get("cluster") or ""), "action", _action_resource(args), change, before, after)
        )
    return out


def _lead(ctx: Context, reply: Reply, cause: CauseChange) -> list[Diagnosis]:
    """The answer's diagnoses with the change's entry first (taken from the runbook when the answer
    did not rank it), the reason saying it is the recorded change."""
    if cause.entry is None or cause.entry not in ctx.kb.failure_modes:
        return reply.diagnoses
    reason = "changed recently: " + cause.sentence.split(":")[0]
    found = next((d for d in reply.diagnoses if d.entry_id == cause.entry), None)
    first = (
        replace(found, why_ranked=reason)
        if found is not None
        else diagnosis(ctx.kb, ctx.kb.failure_modes[cause.entry], reason=reason)
    )
    return [first, *(d for d in reply.diagnoses if d.entry_id != cause.entry)][: max(len(reply.diagnoses), 1)]


async def read(ctx: Context, cluster: str | None, window_s: float = DEFAULT_WINDOW_S) -> list[Any] | None:
    """The cluster's changes in the window, the bot's own confirmed actions among them (None: no
    metric lake here). Raises what the read raises."""
    if ctx.lake is None:
        return None
    since_ms = int((ctx.clock() - window_s) * 1000)
    recorded = list(await ctx.lake.changes(since_ms, (), None, cluster))
    return [
        *recorded,
        *await asyncio.to_thread(bot_actions, ctx, since_ms, cluster or getattr(ctx.lake, "cluster", None)),
    ]


async def recorded_between(ctx: Context, cluster: str | None, start_s: float, end_s: float) -> list[Any] | None:
    """The cluster's recorded changes between two times, oldest first (None: no metric lake here)."""
    if ctx.lake is None:
        return None
    rows = await ctx.lake.changes(int(start_s * 1000), (), None, cluster)
    return sorted((r for r in rows if r.ts_ms <= end_s * 1000), key=lambda r: r.ts_ms)


async def annotate(
    ctx: Context, reply: Reply, cluster: str | None, also: Sequence[str] = (), window_s: float = DEFAULT_WINDOW_S
) -> Reply:
    """``reply`` with a "Changed recently" line when a recorded change touches what it names, and a
    change that names a cause leading the ranking and said in the verdict. Unchanged without a lake
    or without such a change; a failed read is a note (what changed is then unknown, not "nothing")."""
    try:
        changes = await read(ctx, cluster, window_s)
    except Exception as exc:  # the Delta read: a broken table must not cost the answer
        reply.notes.append(f"Recent changes not read ({' '.join(str(exc).split())[:160]}): `changes` retries.")
        return reply
    if not changes:
        return reply
    relevant = touching(changes, reply, also)
    if not relevant:
        return reply
    now = ctx.clock()
    reply.evidence.insert(min(1, len(reply.evidence)), changed_recently(relevant, now))
    # a change is a cause only of a problem the answer found: min ISR raised on a healthy topic is
    # a setting, not an incident (and the line above still shows it)
    problem = reply.severity in ("warning", "critical", "unknown")
    found = [c for c in causes(relevant, now) if c.explains(reply)] if problem else []
    if found:
        reply.verdict = f"{reply.verdict} {found[0].sentence}"
        reply.diagnoses = _lead(ctx, reply, found[0])
    return reply


def with_recent_changes(run: Runner) -> Runner:
    """A read command's run whose answer gets :func:`annotate`: the window is its --since (when it
    has one and it is longer than the default), the names its question gave count as named."""

    async def run_with_changes(request: CommandRequest, ctx: Context) -> Reply:
        reply = await run(request, ctx)
        if reply.outcome != "answered" or reply.severity == "error":
            return reply
        since = request.options.get("since")
        window_s = max(DEFAULT_WINDOW_S, parse_since(str(since)).total_seconds()) if since else DEFAULT_WINDOW_S
        asked = [str(v) for v in request.args.values() if v]
        reply = await annotate(ctx, reply, request.cluster, asked, window_s)
        if reply.later is not None:  # the lake's part, when it comes, is annotated the same way
            later = reply.later

            async def annotated_later() -> Reply:
                return await annotate(ctx, await later, request.cluster, asked, window_s)

            reply.later = asyncio.ensure_future(annotated_later())
        return reply

    return run_with_changes
