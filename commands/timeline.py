"""timeline [thread]: an incident thread as its postmortem timeline (issue 28).

The timeline is read from what the bot already keeps durably, so it survives a restart:

* the audit log (gate/audit.py, one JSON line per event): the Alertmanager notifications that
  opened and resolved the thread (``alert``), each question asked there (``request``) and its
  answer (``answer``: verdict, severity, leading cause, an evidence snapshot), and every gated
  action proposed from it (the gate's ``preview`` / ``approval`` / ``refusal`` / ``execution`` /
  ``cancel`` / ``expiry`` / ``reconciled`` records, found by the preview's ``token_id``);
* the thread's memory (framework/followup.py, table ``incident_threads``): its cluster, the
  entities its answers named and the leading cause.

A thread is named ``<channel>/<root ts>`` (``C0INC/1700000000.000100``), or by a Slack link to
its first message (``https://x.slack.com/archives/C0INC/p1700000000000100``; a reply's link
carries ``thread_ts``). In a Slack thread ``timeline`` alone means that thread.

Records are selected as: those of the thread (``channel`` and ``thread_root``; a request asked in
the thread by its ``thread_ts``), those sharing a ``request_id`` with them (the slash command
that started the thread), and the gate's records of the actions previewed in it (``token_id``).

Durations run from the incident's start (the alert's ``startsAt``, else the first event): time to
first answer, time to mitigation (the first action executed), time to resolution (the alert
resolved; without one, the last answer or the last event, whichever came later: never before the
mitigation). ``build`` is pure (records in, a JSON document out);
``render_markdown`` turns that document into Markdown for a postmortem.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from diagnosis import lake_evidence as lake
from diagnosis.recent_changes import recorded_between
from diagnosis.trends import broker_series, bucket_for, by_bucket
from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Reply, Section, Series, Table
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param
from runbook_kb.lookup import norm

SCHEMA = 1
EVIDENCE_KEPT = 12  # evidence lines an answer's audit record keeps
VERDICT_CHARS = 400
VALUE_CHARS = 200
# The gate's records (gate/confirmation.py), selected by the token_id of a preview in the thread.
GATE_EVENTS = frozenset({"preview", "approval", "refusal", "execution", "cancel", "expiry", "reconciled"})
# Answers that are not questions: the gate's own commands and the timeline itself.
NOT_QUESTIONS = frozenset({"confirm", "cancel", "break-glass", "timeline"})
EXAMPLE = "C0INC/1700000000.000100"

_CHANNEL = r"[CDGZ][A-Z0-9]{2,}"
_TS = r"\d{9,11}\.\d{6}"
_PLAIN = re.compile(rf"^({_CHANNEL})[/:]({_TS})$")
_ARCHIVES = re.compile(rf"/archives/({_CHANNEL})/p(\d{{10}})(\d{{6}})$")

ThreadRef = tuple[str, str]  # (channel id, the thread's root ts)
JsonDict = dict[str, Any]


def parse_thread(text: str) -> ThreadRef:
    """``C0INC/1700000000.000100`` (or ``:``) or a Slack message link -> (channel, root ts)."""
    raw = text.strip().strip("<>").split("|", 1)[0].strip()
    m = _PLAIN.match(raw)
    if m:
        return m.group(1), m.group(2)
    if raw.startswith(("http://", "https://")):
        url = urlparse(raw)
        found = _ARCHIVES.search(url.path)
        if found:
            query = parse_qs(url.query)
            root = (query.get("thread_ts") or [""])[0]  # a reply's link names its thread's root
            if root and re.fullmatch(_TS, root):
                return found.group(1), root
            return found.group(1), f"{found.group(2)}.{found.group(3)}"
    raise BadInput(
        f"'{raw[:80]}' is not a thread: give its channel and root ts as `{EXAMPLE}`, or the link of "
        "the thread's first message (Copy link in Slack).",
        [f"timeline {EXAMPLE}"],
    )


def thread_name(ref: ThreadRef) -> str:
    return f"{ref[0]}/{ref[1]}"


# ---- what an answer's audit record keeps ----------------------------------------------------------


def _clip(text: object, n: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def answer_summary(reply: Reply) -> JsonDict:
    """The fields of an answer the timeline shows, for its audit record: title, severity, verdict,
    leading cause and an evidence snapshot (what the bot saw then: counts, brokers, partitions)."""
    out: JsonDict = {"title": _clip(reply.title, 200), "severity": reply.severity}
    if reply.verdict:
        out["verdict"] = _clip(reply.verdict, VERDICT_CHARS)
    if reply.diagnoses:
        first = reply.diagnoses[0]
        out["cause"] = {"entry_id": first.entry_id, "title": first.title}
    if reply.evidence:
        out["evidence"] = [
            {"label": _clip(e.label, 80), "value": _clip(e.value, VALUE_CHARS), "status": e.status, "source": e.source}
            for e in reply.evidence[:EVIDENCE_KEPT]
        ]
    return out


# ---- selecting a thread's records ---------------------------------------------------------------------


def _tokens(rec: Mapping[str, Any]) -> set[str]:
    found = {rec.get("action_token_id")}
    args = rec.get("args")
    if isinstance(args, dict):
        found.add(args.get("token_id"))  # a confirm / cancel: its token, hashed by the audit log
    return {t for t in found if isinstance(t, str) and t}


def select(records: Iterable[Mapping[str, Any]], ref: ThreadRef) -> list[Mapping[str, Any]]:
    """The records of one thread, in the log's order."""
    channel, root = ref
    records = list(records)
    mine: list[int] = []
    request_ids: set[str] = set()
    tokens: set[str] = set()
    for i, r in enumerate(records):
        if r.get("channel") != channel:
            continue
        if r.get("thread_root") == root or (r.get("event") == "request" and r.get("thread_ts") == root):
            mine.append(i)
            if isinstance(r.get("request_id"), str):
                request_ids.add(r["request_id"])
            tokens |= _tokens(r)
    chosen = set(mine)
    for i, r in enumerate(records):
        if i in chosen:
            continue
        if r.get("request_id") in request_ids:
            chosen.add(i)
            tokens |= _tokens(r)
        elif r.get("event") in GATE_EVENTS and r.get("token_id") in tokens:
            chosen.add(i)
    return [records[i] for i in sorted(chosen)]


# ---- building the timeline --------------------------------------------------------------------------


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _parse_time(value: object) -> float | None:
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", value)
        if not m:
            return None
        base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
        return base.timestamp() + float(m.group(2) or 0)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)).timestamp()


def duration(seconds: float | None) -> str:
    """12s, 3m05s, 1h02m; -5m00s before the start (a change that came before the incident)."""
    if seconds is None:
        return "-"
    if seconds <= -0.5:
        return "-" + duration(-seconds)
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


@dataclass
class _Event:
    ts: float
    kind: str
    who: str
    summary: str
    data: JsonDict = field(default_factory=dict)


@dataclass
class _Action:
    token_id: str
    command: str = ""
    kind: str = ""
    summary: str = ""
    cluster: str | None = None
    requester: str | None = None
    proposed_at: float | None = None
    needs_second_approver: bool | None = None
    approvals: list[JsonDict] = field(default_factory=list)
    refusals: list[JsonDict] = field(default_factory=list)
    outcome: str = "pending"
    confirmed_by: str | None = None
    finished_at: float | None = None
    ok: bool | None = None
    detail: str | None = None
    before: Any = None
    after: Any = None
    break_glass: Any = None
    reason: str | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "token_id": self.token_id,
            "command": self.command,
            "kind": self.kind,
            "summary": self.summary,
            "cluster": self.cluster,
            "requester": self.requester,
            "proposed_at": _iso(self.proposed_at) if self.proposed_at else None,
            "needs_second_approver": self.needs_second_approver,
            "approvers": [a["user"] for a in self.approvals if a.get("user") and a["user"] != self.requester],
            "approvals": self.approvals,
            "refusals": self.refusals,
            "confirmed_by": self.confirmed_by,
            "outcome": self.outcome,
            "ok": self.ok,
            "finished_at": _iso(self.finished_at) if self.finished_at else None,
            "detail": self.detail,
            "before": self.before,
            "after": self.after,
        }
        if self.break_glass is not None or self.reason:
            out["break_glass"] = self.break_glass
            out["reason"] = self.reason
        return out


# The gate's own words for an ordinary confirm (gate/confirmation.decide): not worth repeating.
_STANDARD_REASON = re.compile(r"^(Approved by \S+ \(requested by \S+\)\.|Confirmed by the requester\.)$")


def _question_event(rec: Mapping[str, Any], asked: Mapping[str, Any] | None) -> _Event:
    answered_at = float(rec["ts"])
    latency = rec.get("latency_ms")
    asked_at = float(asked["ts"]) if asked else (answered_at - float(latency) / 1000 if latency else answered_at)
    command = str(rec.get("command") or "?")
    text = str(asked.get("text")) if asked and asked.get("text") else _command_text(rec)
    severity = str(rec.get("severity") or "")
    verdict = str(rec.get("verdict") or rec.get("title") or "")
    outcome = str(rec.get("outcome") or "")
    summary = f"`{text}`"
    if outcome and outcome not in ("answered", "partial"):
        summary += f" ({outcome})"
    if verdict:
        summary += f" → {('[' + severity.upper() + '] ') if severity else ''}{verdict}"
    data: JsonDict = {
        "command": command,
        "text": text,
        "asked_at": _iso(asked_at),
        "answered_at": _iso(answered_at),
        "answered_ts": round(answered_at, 3),
        "answer_s": round(answered_at - asked_at, 1),
        "outcome": outcome or None,
        "severity": severity or None,
        "title": rec.get("title"),
        "verdict": rec.get("verdict"),
        "cause": rec.get("cause"),
        "evidence": rec.get("evidence") or [],
        "transport": rec.get("transport"),
    }
    return _Event(asked_at, "question", str(rec.get("user") or "?"), summary, data)


def _command_text(rec: Mapping[str, Any]) -> str:
    words = [str(rec.get("command") or "?")]
    args = rec.get("args")
    if isinstance(args, dict):
        words += [str(v) for v in args.values() if v is not None]
    return " ".join(words)


def _alert_event(rec: Mapping[str, Any]) -> _Event | None:
    status, result = rec.get("status"), rec.get("result")
    name = str(rec.get("alertname") or "alert")
    entities = rec.get("entities") or []
    on = f" on {'; '.join(map(str, entities[:6]))}" if entities else ""
    severity = f" ({rec['severity']})" if rec.get("severity") else ""
    data: JsonDict = {
        "alertname": name,
        "status": status,
        "result": result,
        "severity": rec.get("severity"),
        "summary": rec.get("summary"),
        "entities": entities,
        "starts_at": rec.get("starts_at"),
        "ends_at": rec.get("ends_at"),
        "alerts": rec.get("alerts"),
    }
    notified = float(rec["ts"])
    data["notified_at"] = _iso(notified)
    # At the alert's own times (Alertmanager's startsAt / endsAt), when it gives them.
    if result == "opened":
        at = min(_parse_time(rec.get("starts_at")) or notified, notified)
        return _Event(at, "alert", "Alertmanager", f"Alert {name}{severity} firing{on}", data)
    if result == "resolved":
        at = min(_parse_time(rec.get("ends_at")) or notified, notified)
        return _Event(at, "resolved", "Alertmanager", f"Alert {name} resolved{on}", data)
    return None


def _gate_event(rec: Mapping[str, Any], action: _Action) -> _Event | None:
    ev, ts, user = rec.get("event"), float(rec["ts"]), str(rec.get("user") or "?")
    kind = action.kind or str(rec.get("kind") or rec.get("command") or "action")
    if ev == "preview":
        action.command, action.kind = str(rec.get("command") or ""), str(rec.get("kind") or "")
        action.summary, action.cluster = str(rec.get("summary") or ""), rec.get("cluster")
        action.requester, action.proposed_at = rec.get("requester"), ts
        action.needs_second_approver = rec.get("needs_second_approver")
        second = " (needs a second approver)" if action.needs_second_approver else ""
        ready = "" if rec.get("ready", True) else " (a precondition fails: cannot be confirmed)"
        return _Event(ts, "action proposed", user, f"{action.kind}: {action.summary}{second}{ready}", _gate_data(rec))
    if ev == "approval":
        entry: JsonDict = {"user": rec.get("user"), "at": _iso(ts), "complete": rec.get("complete")}
        # A break-glass confirm (one person, a reason; gate/confirmation.py) under whatever its
        # fields are called: break_glass (the rule), break_glass_reason or reason (the person's words).
        glass = rec.get("break_glass")
        reason = rec.get("break_glass_reason") or rec.get("reason")
        if glass is not None:
            entry["break_glass"] = action.break_glass = glass
        if reason:
            entry["reason"] = reason
            if glass or rec.get("break_glass_reason") or not _STANDARD_REASON.match(str(reason)):
                action.reason = str(reason)
        action.approvals.append(entry)
        if rec.get("complete"):
            action.confirmed_by = rec.get("user")
        text = "confirmed" if rec.get("complete") else "approved (more approvers needed)"
        if user == action.requester:
            text += " by the requester"
        if rec.get("break_glass"):
            text = "BREAK-GLASS " + text
        if action.reason:
            text += f"; reason: {action.reason}"
        return _Event(ts, "approval", user, f"{kind} {text}", _gate_data(rec))
    if ev == "refusal":
        action.refusals.append({"user": rec.get("user"), "at": _iso(ts), "code": rec.get("code")})
        if rec.get("state"):  # refused after the confirm: aborted (a precondition, a missing command)
            action.outcome, action.finished_at, action.detail = str(rec["state"]), ts, rec.get("detail")
        text = str(rec.get("reason") or rec.get("detail") or rec.get("code") or "refused")
        return _Event(ts, "refusal", user, f"{kind} {rec.get('step') or 'confirm'} refused: {text}", _gate_data(rec))
    if ev == "execution":
        action.outcome, action.finished_at = str(rec.get("state") or "?"), ts
        action.ok, action.detail = rec.get("ok"), rec.get("detail")
        action.before, action.after = rec.get("before"), rec.get("after")
        action.confirmed_by = action.confirmed_by or rec.get("user")
        after = f"; read back: {_state_text(action.after)}" if action.after else ""
        detail = f" — {rec['detail']}" if rec.get("detail") else ""
        return _Event(ts, "action executed", user, f"{kind} {action.outcome}{detail}{after}", _gate_data(rec))
    if ev == "cancel":
        action.outcome, action.finished_at = "cancelled", ts
        return _Event(ts, "action cancelled", user, f"{kind} cancelled", _gate_data(rec))
    if ev == "expiry":
        action.outcome, action.finished_at = "expired", ts
        return _Event(ts, "action expired", "gate", f"{kind} expired unconfirmed", _gate_data(rec))
    if ev == "reconciled":
        action.outcome, action.finished_at = str(rec.get("outcome") or "unknown"), ts
        return _Event(ts, "action reconciled", "gate", f"{kind} reconciled after a restart: {action.outcome}", {})
    return None


def _gate_data(rec: Mapping[str, Any]) -> JsonDict:
    keep = (
        "token_id",
        "command",
        "kind",
        "cluster",
        "args",
        "requester",
        "approvals",
        "complete",
        "code",
        "step",
        "state",
        "ok",
        "detail",
        "before",
        "after",
        "reason",
        "break_glass",
        "break_glass_reason",
        "transport",
    )
    data = {k: rec[k] for k in keep if k in rec}
    if "kind" in data:
        data["action_kind"] = data.pop("kind")  # "kind" is the event's
    return data


def _state_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} = {_state_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_state_text(v) for v in value) + "]"
    return str(value)


def build(records: Sequence[Mapping[str, Any]], ref: ThreadRef, memory: Mapping[str, Any] | None = None) -> JsonDict:
    """The timeline of thread ``ref`` from the whole audit log (``records``) and the thread's memory
    (IncidentMemory.to_dict()). The events are in time order; ``durations`` in seconds."""
    chosen = select(records, ref)
    requests = {r["request_id"]: r for r in chosen if r.get("event") == "request" and r.get("request_id")}
    actions: dict[str, _Action] = {}
    events: list[_Event] = []
    alert_start: float | None = None
    resolved_at: float | None = None
    for r in chosen:
        ev = r.get("event")
        if ev == "alert":
            e = _alert_event(r)
            start = _parse_time(r.get("starts_at"))
            if start is not None and r.get("status") == "firing":
                alert_start = start if alert_start is None else min(alert_start, start)
            if e is not None:
                events.append(e)
                if e.kind == "resolved" and resolved_at is None:
                    resolved_at = e.ts
        elif ev == "answer":
            command = r.get("command")
            if command in NOT_QUESTIONS or r.get("action_token_id") or command is None:
                continue  # the gate's records tell the actions' story
            events.append(_question_event(r, requests.get(r.get("request_id") or "")))
        elif ev in GATE_EVENTS and r.get("token_id"):
            token = str(r["token_id"])
            action = actions.setdefault(token, _Action(token))
            e = _gate_event(r, action)
            if e is not None:
                e.data.setdefault("action_kind", action.kind)
                events.append(e)
    events.sort(key=lambda e: e.ts)  # stable: the log's order for equal times
    if not events:
        started = None
    else:
        started = min(events[0].ts, alert_start) if alert_start is not None else events[0].ts
    questions = [e for e in events if e.kind == "question"]
    first_answer = min((float(e.data["answered_ts"]) for e in questions), default=None)
    executed = [e for e in events if e.kind == "action executed" and e.data.get("ok") is True]
    mitigated = executed[0].ts if executed else None
    answered = [float(e.data["answered_ts"]) for e in questions]
    if resolved_at is not None:
        resolution, resolved_by = resolved_at, "alert resolved"
    elif questions or executed:
        # No alert resolved it: the incident ran at least until the last thing done in the thread -
        # never before its mitigation, its last answer or the last action's end (a preview, a
        # confirm and its execution answer too, though they are not questions).
        last_answer = max(answered, default=None)
        last_event = max((e.ts for e in events if e.kind != "alert"), default=None)
        resolution = max(t for t in (last_answer, last_event, mitigated) if t is not None)
        resolved_by = "last answer" if last_answer is not None and resolution == last_answer else "last event"
    else:
        resolution, resolved_by = None, None

    def since(ts: float | None) -> float | None:
        return None if ts is None or started is None else round(ts - started, 1)

    mem = dict(memory or {})
    cause = mem.get("cause")
    first_alert = next((e for e in events if e.kind == "alert"), None)
    doc: JsonDict = {
        "schema": SCHEMA,
        "thread": thread_name(ref),
        "channel": ref[0],
        "thread_ts": ref[1],
        "title": _title(first_alert, questions),
        "cluster": mem.get("cluster") or next((a.cluster for a in actions.values() if a.cluster), None),
        "leading_cause": {"entry_id": cause[0], "title": cause[1]} if isinstance(cause, list) and cause else None,
        "named": mem.get("named") or {},
        "started_at": _iso(started) if started is not None else None,
        "started_by": ("alert fired" if alert_start is not None and alert_start <= (started or 0) else "first event")
        if started is not None
        else None,
        "durations": {
            "time_to_first_answer_s": since(first_answer),
            "time_to_mitigation_s": since(mitigated),
            "time_to_resolution_s": since(resolution),
            "resolution": resolved_by,
            "mitigation": f"{executed[0].data.get('action_kind') or 'action'} executed, confirmed by {executed[0].who}"
            if executed
            else None,
        },
        "events": [
            {
                **e.data,
                "at": _iso(e.ts),
                "ts": round(e.ts, 3),
                "offset_s": since(e.ts),
                "kind": e.kind,
                "who": e.who,
                "summary": e.summary,
            }
            for e in events
        ],
        "actions": [a.to_json() for a in actions.values()],
        "questions": len(questions),
    }
    return doc


def _title(alert: _Event | None, questions: list[_Event]) -> str:
    if alert is not None:
        return f"{alert.data.get('alertname')}" + (f" ({alert.data['severity']})" if alert.data.get("severity") else "")
    if questions:
        return str(questions[0].data.get("text") or "incident")
    return "incident"


# ---- Markdown --------------------------------------------------------------------------------------


def _glass(value: object) -> str:
    """A break-glass field: the rule it ran under (a name), or just that it was one."""
    if value is None or value is False:
        return "no"
    return "confirmed alone" if value is True else f"confirmed alone under {value}"


def _cell(value: object) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _hms(iso: str | None) -> str:
    return iso[11:19] if iso and len(iso) >= 19 else "-"


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The timeline as Markdown for a postmortem document: summary, events, actions, evidence."""
    d = doc["durations"]
    lines = [f"# Incident timeline: {doc['title']}", ""]
    facts = [f"Thread `{doc['thread']}`"]
    if doc.get("cluster"):
        facts.append(f"cluster `{doc['cluster']}`")
    if doc.get("leading_cause"):
        facts.append(f"leading cause: {doc['leading_cause']['title']} (`{doc['leading_cause']['entry_id']}`)")
    lines += ["; ".join(facts), ""]
    lines += ["| | |", "|---|---|"]
    started = doc.get("started_at") or "-"
    lines.append(f"| Started | {started.replace('T', ' ').replace('Z', ' UTC')} ({doc.get('started_by') or '-'}) |")
    lines.append(f"| Time to first answer | {duration(d['time_to_first_answer_s'])} |")
    mitigation = f" ({_cell(d['mitigation'])})" if d.get("mitigation") else " (no action executed)"
    lines.append(f"| Time to mitigation | {duration(d['time_to_mitigation_s'])}{mitigation} |")
    resolution = f" ({d['resolution']})" if d.get("resolution") else ""
    lines.append(f"| Time to resolution | {duration(d['time_to_resolution_s'])}{resolution} |")
    lines += ["", "## Timeline", "", "| Time (UTC) | +t | Event | Who | What |", "|---|---|---|---|---|"]
    for e in doc["events"]:
        lines.append(
            f"| {_hms(e['at'])} | {duration(e['offset_s'])} | {e['kind']} | {_cell(e['who'])} | {_cell(e['summary'])} |"
        )
    if doc["actions"]:
        lines += ["", "## Actions"]
        for a in doc["actions"]:
            lines += ["", f"### {a['kind'] or a['command']}: {_cell(a['summary'])}", ""]
            lines.append(f"- Requested by {a['requester'] or '?'} at {_hms(a['proposed_at'])} UTC")
            approvers = ", ".join(a["approvers"]) or "none besides the requester"
            lines.append(
                f"- Approved by: {approvers}"
                + (" (a second approver was required)" if a.get("needs_second_approver") else "")
            )
            if a.get("reason") or a.get("break_glass"):
                lines.append(f"- Break-glass: {_glass(a.get('break_glass'))}; reason: {_cell(a.get('reason') or '-')}")
            refused = [f"{r['user']} ({r['code']})" for r in a["refusals"]]
            if refused:
                lines.append(f"- Refused: {', '.join(refused)}")
            lines.append(
                f"- Outcome: {a['outcome']}"
                + (f" at {_hms(a['finished_at'])} UTC" if a.get("finished_at") else "")
                + (f", confirmed by {a['confirmed_by']}" if a.get("confirmed_by") else "")
                + (f": {_cell(a['detail'])}" if a.get("detail") else "")
            )
            if a.get("before"):
                lines.append(f"- Before: {_cell(_state_text(a['before']))}")
            if a.get("after"):
                lines.append(f"- After (read back from the cluster): {_cell(_state_text(a['after']))}")
    snapshots = [e for e in doc["events"] if e["kind"] == "question" and e.get("evidence")]
    if snapshots:
        lines += ["", "## Evidence snapshots"]
        for e in snapshots:
            lines += ["", f"### {_hms(e['at'])} `{_cell(e['text'])}` ({e['who']})", ""]
            if e.get("verdict"):
                lines.append(
                    f"{('**' + str(e['severity']).upper() + '** ') if e.get('severity') else ''}{e['verdict']}"
                )
                lines.append("")
            for ev in e["evidence"]:
                mark = {"bad": "!", "ok": "ok"}.get(str(ev.get("status")), "-")
                lines.append(f"- {mark} {_cell(ev['label'])}: {_cell(ev['value'])} ({_cell(ev.get('source') or '')})")
    return "\n".join(lines) + "\n"


# ---- the command ---------------------------------------------------------------------------------


@dataclass
class TimelineReply(Reply):
    """A Reply whose JSON also carries the timeline document (``timeline``); ``attachments()`` gives
    the Markdown and JSON exports a transport may attach as files (Slack uploads them)."""

    timeline: JsonDict = field(default_factory=dict)  # JSON: the document ``build`` returns

    def markdown(self) -> str:
        return render_markdown(self.timeline)

    def attachments(self) -> list[tuple[str, str, str]]:
        """(filename, title, content) of each export."""
        stem = "incident-timeline-" + str(self.timeline.get("thread_ts", "")).replace(".", "-")
        return [
            (f"{stem}.md", f"Incident timeline {self.timeline.get('thread')} (Markdown)", self.markdown()),
            (
                f"{stem}.json",
                f"Incident timeline {self.timeline.get('thread')} (JSON)",
                json.dumps(self.timeline, indent=2),
            ),
        ]


SPEC = CommandSpec(
    words=("timeline",),
    summary="An incident thread as its postmortem timeline: alert, questions and verdicts, actions, resolution, durations.",
    params=(
        Param(
            "thread",
            f"the thread: its channel and root ts ({EXAMPLE}) or the link of its first message; in a Slack thread, that thread",
            required=False,
        ),
    ),
    examples=("timeline", f"timeline {EXAMPLE}"),
    details="Read from the audit log and the thread store, so it survives a restart of the bot. In Slack the "
    "Markdown and JSON exports are attached to the answer; in the terminal `kbot incident timeline "
    "<thread> --markdown` prints the Markdown.",
)


def _read(ctx: Context, ref: ThreadRef) -> tuple[list[JsonDict], JsonDict | None]:
    gate = ctx.gate
    audit = getattr(gate, "audit", None)
    if audit is None:
        raise Unavailable("The timeline reads the bot's audit log, which is not set up here.")
    records: list[JsonDict] = audit.read()
    db = getattr(gate, "state_db", None)
    return records, (_memory(db.connect, ref) if db is not None else None)


def _memory(connect: Callable[[], sqlite3.Connection], ref: ThreadRef) -> JsonDict | None:
    """The thread's memory as commands/followup.ThreadMemories stores it (table incident_threads,
    key "<channel>/<ts>", IncidentMemory.to_dict() as JSON); read here without its 24 h expiry: a
    postmortem is often written later. None when the thread has none (or the table is not there yet)."""
    with closing(connect()) as conn:
        try:
            row = conn.execute(
                "SELECT memory FROM incident_threads WHERE thread_key = ?", (thread_name(ref),)
            ).fetchone()
        except sqlite3.OperationalError:  # no table: no thread was ever remembered in this state folder
            return None
    if row is None:
        return None
    found = json.loads(row[0])
    return found if isinstance(found, dict) else None


async def run(request: CommandRequest, ctx: Context) -> Reply:
    given = request.arg_text("thread")
    if not given:
        raise BadInput(
            "Which thread? Ask `timeline` inside the incident's thread (a mention or a plain message "
            f"there), or name it: `timeline {EXAMPLE}` or the link of the thread's first message.",
            [f"timeline {EXAMPLE}"],
        )
    ref = parse_thread(given)
    records, memory = await asyncio.to_thread(_read, ctx, ref)
    doc = await with_cluster_changes(ctx, build(records, ref, memory))
    return await _with_chart(request, ctx, doc, memory)


CHANGES_BEFORE_S = 1800  # "what changed just before?": the half hour before the incident started


async def with_cluster_changes(ctx: Context, doc: JsonDict) -> JsonDict:
    """The timeline with the cluster's recorded changes (the metric lake's change table) from half an
    hour before the incident started to its resolution, as events of kind "cluster change" (before
    the start: a negative +t). The bot's own actions are there already, from the audit log. A table
    that cannot be read is said in ``changes_note``; with no lake nothing is added."""
    started = _parse_time(doc.get("started_at"))
    if started is None:
        return doc
    resolved = doc["durations"].get("time_to_resolution_s")
    end = started + float(resolved) if resolved is not None else ctx.clock()
    try:
        rows = await recorded_between(ctx, doc.get("cluster"), started - CHANGES_BEFORE_S, end)
    except Exception as exc:  # the Delta read: the timeline stands without it
        doc["changes_note"] = (
            f"The cluster's recorded changes were not read ({_clip(' '.join(str(exc).split()), 160)})."
        )
        return doc
    changes = [
        {
            "at": _iso(r.ts_ms / 1000),
            "ts": round(r.ts_ms / 1000, 3),
            "offset_s": round(r.ts_ms / 1000 - started, 1),
            "kind": "cluster change",
            "who": "cluster",
            "summary": f"{r.resource} {r.change}",
            "before": r.before,
            "after": r.after,
        }
        for r in rows or []
    ]
    doc["events"] = sorted([*doc["events"], *changes], key=lambda e: e["ts"])
    doc["cluster_changes"] = len(changes)
    return doc


async def _with_chart(request: CommandRequest, ctx: Context, doc: JsonDict, memory: JsonDict | None) -> Reply:
    """The timeline's answer, with the chart of the thread's metric over the incident window."""
    ref = (str(doc["channel"]), str(doc["thread_ts"]))
    if not doc["events"]:
        if memory is None:
            raise BadInput(
                f"The bot knows no incident thread {thread_name(ref)}: its audit log has no event of it. "
                "Check the channel id and the root ts (copy the link of the thread's first message), "
                "or ask `timeline` inside the thread.",
                [f"timeline {EXAMPLE}"],
            )
        raise BadInput(
            f"Thread {thread_name(ref)} has no recorded events yet (no alert, question or action in the "
            "audit log): ask something there first.",
        )
    reply = timeline_reply(doc)
    series, said = await incident_chart(request, ctx, doc, (memory or {}).get("metric"))
    reply.series = series
    reply.notes.append(said)
    return reply


def _metric_name(ctx: Context, text: str) -> str:
    """The lake's name of a metric as a thread said it (URP -> UnderReplicatedPartitions), as
    `history` reads it (commands/history.resolve_metric; commands do not import each other)."""
    by_lower = {n.lower(): n for n in lake.known_metrics()}
    if text.lower() in by_lower:
        return by_lower[text.lower()]
    target = ctx.kb.vocabulary.get(text) or next(
        (v for k, v in ctx.kb.vocabulary.items() if norm(k) == norm(text)), None
    )
    return by_lower.get(str(target).lower(), text) if target else text


CHART_MARGIN_S = 300  # the chart shows five minutes either side of the incident


async def incident_chart(
    request: CommandRequest, ctx: Context, doc: JsonDict, metric: object
) -> tuple[list[Series], str]:
    """The metric lake's history of the thread's metric (the symptom its `why` was about) over the
    incident window, as chart series, and one line saying what the chart is - or why there is
    none: no metric named in the thread, no lake, a lake that did not answer or holds no sample."""
    if not isinstance(metric, str) or not metric or not doc.get("started_at"):
        return [], "No chart: no `why` in this thread named a metric to chart."
    name = _metric_name(ctx, metric)
    started = _parse_time(doc["started_at"]) or ctx.clock()
    resolved = doc["durations"].get("time_to_resolution_s")
    ended = started + float(resolved) if resolved is not None else ctx.clock()
    now = ctx.clock()
    start = dt.datetime.fromtimestamp(started - CHART_MARGIN_S, dt.timezone.utc)
    end = dt.datetime.fromtimestamp(min(now, ended + CHART_MARGIN_S), dt.timezone.utc)
    window = lake.Window(start, end, max(end - start, dt.timedelta(minutes=1)))
    bucket_s = bucket_for(window.since)
    if ctx.lake is None:
        return (
            [],
            f"No chart of {name}: no metric lake is configured here, so its history over the incident is not known.",
        )
    try:
        facts = await lake.history(ctx, request, window, name, None, None, None, bucket_s)
    except Unavailable as exc:
        return [], f"No chart of {name}: the metric lake did not answer ({_clip(str(exc).split('[[')[0], 200)})."
    rows = facts.get("rows") or []
    if not rows:
        return (
            [],
            f"No chart of {name}: the metric lake holds no sample of it over the incident window ({window.label}).",
        )
    counter = name.endswith("PerSec")
    unit = ("events per bucket" if counter else "largest sample per bucket") + f" ({bucket_s}s)"
    mark = (_iso(started), _iso(min(ended, now)))
    brokers = sorted({r["broker"] for r in rows})
    series = broker_series(name, "", unit, by_bucket(rows), brokers, mark, scale=bucket_s if counter else 1)
    return series, f"Chart: {name} from the metric lake over the incident window ({window.label}), incident shaded."


def timeline_reply(doc: JsonDict) -> TimelineReply:
    d = doc["durations"]
    parts = [f"Started {_hms(doc['started_at'])} UTC ({doc['started_by']})"]
    parts.append(f"first answer after {duration(d['time_to_first_answer_s'])}")
    if d["time_to_mitigation_s"] is not None:
        parts.append(f"mitigated after {duration(d['time_to_mitigation_s'])}")
    else:
        parts.append("no action executed")
    if d["resolution"]:
        parts.append(
            f"{'resolved' if d['resolution'] == 'alert resolved' else d['resolution']} after "
            f"{duration(d['time_to_resolution_s'])}"
        )
    events = doc["events"]
    table = Table(
        "Timeline",
        ["time (UTC)", "+t", "event", "who", "what"],
        [[_hms(e["at"]), duration(e["offset_s"]), e["kind"], e["who"], _clip(e["summary"], 300)] for e in events[:80]],
        more=max(0, len(events) - 80),
    )
    sections = []
    for a in doc["actions"]:
        lines = [
            f"Requested by {a['requester'] or '?'}; approved by {', '.join(a['approvers']) or 'the requester alone'}; "
            f"outcome {a['outcome']}" + (f", confirmed by {a['confirmed_by']}" if a.get("confirmed_by") else "")
        ]
        if a.get("reason") or a.get("break_glass"):
            lines.append(f"Break-glass: {_glass(a.get('break_glass'))}; reason: {a.get('reason') or '-'}")
        if a.get("after"):
            lines.append(f"Read back: {_state_text(a['after'])}")
        sections.append(Section(f"Action: {a['kind'] or a['command']}: {a['summary']}", lines))
    changed = int(doc.get("cluster_changes") or 0)
    notes = [
        f"{len(events) - changed} events from the audit log"
        + (f" and {changed} recorded change(s) of the cluster" if changed else "")
        + "; the Markdown and JSON exports are attached where the transport can attach files."
    ]
    if doc.get("changes_note"):
        notes.append(str(doc["changes_note"]))
    if doc.get("cluster"):
        notes.insert(0, f"Cluster {doc['cluster']}.")
    return TimelineReply(
        title=f"Incident timeline: {doc['title']}",
        severity="info",
        verdict="; ".join(parts) + ".",
        tables=[table],
        sections=sections,
        notes=notes,
        timeline=doc,
    )


COMMAND = Command(SPEC, run)
