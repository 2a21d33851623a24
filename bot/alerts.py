"""Alertmanager opens triage threads: POST /alerts/alertmanager on the bot's HTTP server.

Alertmanager's webhook receiver (payload version 4) posts one notification per alert group
(``groupKey``) whenever the group changes or repeats. Each group gets ONE thread:

    first firing notification   a parent message in the channel its labels route to, then in its
                                thread the diagnosis: the same `why <symptom>` a person would ask
                                (framework.dispatch), scoped by the labels (a topic gets `describe`,
                                a consumer group `lag`), posted through the channel's delivery queue
    same fingerprints again     the parent message is updated (count, last notified); nothing new
                                is posted
    a new alert in the group    the parent is updated; a diagnosis is posted only for a symptom or
                                scope the thread has not diagnosed yet
    resolved                    the parent says resolved and how long it fired; a short closing
                                summary goes into the thread
    unknown alert               a thread with its labels and "no runbook entry"

The symptom of an alert is its ``kbot_symptom`` annotation (deploy/prometheus/kafka-rules.yaml sets
it on every rule), else a ``kbot_symptom`` label, else its alertname, looked up in the runbook's
vocabulary like any `why` question.

What Alertmanager sends and the routing configuration (KBOT_ALERT_TOKEN, KBOT_ALERT_ROUTES,
KBOT_ALERT_CHANNEL) are bot/alertmanager.py's.

A request without the right token gets 401; a body that is not a version 4 notification gets 400;
each with one log line. Thread state is kept in the bot's state database
(KBOT_STATE_DIR/pending.sqlite3), so a restart keeps updating the threads it opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hmac
import json
import logging
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from slack_sdk.errors import SlackApiError

from bot.alertmanager import (
    GROUP_LABELS,
    MAX_LABELS_SHOWN,
    PATH,
    TOPIC_LABELS,
    Alert,
    AlertConfig,
    BadNotification,
    Notification,
    Route,
    duration,
    parse_notification,
    parse_time,
    utc,
)
from bot.delivery import DeliveryFailed
from bot.render import slack_escape
from bot.slack_thread import SlackThread
from commands.timeline import answer_summary
from framework.dispatch import run_request
from framework.reply import Reply, Section
from framework.router import BadInput, check_group, check_topic
from framework.spec import CommandRequest
from gate.state_db import StateDb, state_db

log = logging.getLogger(__name__)


# ---- thread state ------------------------------------------------------------------------------


@dataclass
class Thread:
    group_key: str
    channel: str
    ts: str
    opened_at: float
    fingerprints: dict[str, dict] = field(default_factory=dict)  # fp -> {status, entity, name, starts_at}
    diagnosed: list[str] = field(default_factory=list)  # diagnosis keys already posted
    closed_at: float | None = None


class ThreadStore:
    """One row per open (or last) thread of a group key, in the bot's state database (the gate's
    sqlite file, gate/state_db.py), so a restart keeps threading alerts into the same threads."""

    TABLE = "alert_threads"
    OLD_FILE = "alerts.sqlite3"  # where earlier versions kept them: imported once, then renamed

    def __init__(self, db: StateDb):
        self.db = db
        with closing(db.connect()) as conn:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (group_key TEXT PRIMARY KEY, data TEXT NOT NULL)")
        self._import_old(db.path.parent / self.OLD_FILE)

    def _import_old(self, old: Path) -> None:
        if not old.is_file():
            return
        with closing(sqlite3.connect(old, timeout=30)) as src:
            try:
                rows = src.execute("SELECT group_key, data FROM threads").fetchall()
            except sqlite3.DatabaseError:
                rows = []  # not a thread store we know: leave the rows, keep the file for a look
        with closing(self.db.connect()) as conn:
            # an alert that arrived after the upgrade wins over the imported copy of its thread
            conn.executemany(f"INSERT OR IGNORE INTO {self.TABLE} VALUES (?, ?)", rows)
        old.rename(old.with_name(old.name + ".imported"))
        log.info("alert threads: imported %d thread(s) from %s into %s", len(rows), old, self.db.path)

    def get(self, group_key: str) -> Thread | None:
        with closing(self.db.connect()) as conn:
            row = conn.execute(f"SELECT data FROM {self.TABLE} WHERE group_key = ?", (group_key,)).fetchone()
        return Thread(**json.loads(row[0])) if row else None

    def put(self, thread: Thread) -> None:
        with closing(self.db.connect()) as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {self.TABLE} VALUES (?, ?)",
                (thread.group_key, json.dumps(dataclasses.asdict(thread))),
            )


# ---- the handler -------------------------------------------------------------------------------


class AlertThreads:
    def __init__(self, bot, config: AlertConfig, *, clock=time.time):
        self.bot, self.config, self.clock = bot, config, clock
        # the gate's database; a gate that keeps none (a test's) -> the state folder's own
        self.store = ThreadStore(bot.gate.state_db or state_db(bot.settings.state_dir))
        self._locks: dict[str, asyncio.Lock] = {}

    # -- HTTP --
    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.config.token.encode())

    async def handle(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            log.warning("alert webhook: refused a request from %s without the right bearer token", request.remote)
            return web.json_response({"error": "unauthorized"}, status=401)
        try:
            note = parse_notification(await request.read())
        except BadNotification as exc:
            log.warning(
                "alert webhook: rejected a malformed notification (%d bytes): %s", request.content_length or 0, exc
            )
            return web.json_response({"error": f"malformed notification: {exc}"}, status=400)
        # Alertmanager waits for our answer (10 s by default) and retries on error: answer at once,
        # work off the request path, one group at a time.
        self.bot.spawn(self.process(note))
        return web.json_response({"ok": True})

    # -- one notification --
    async def process(self, note: Notification) -> None:
        lock = self._locks.setdefault(note.group_key, asyncio.Lock())
        async with lock:
            try:
                result = await self._process(note)
            except (DeliveryFailed, SlackApiError) as exc:
                result = "failed"
                log.error("alert group %s: could not post: %s", note.group_key[:120], exc)
            await self.bot.audit.write(
                "alert",
                transport="alertmanager",
                group_key=note.group_key[:500],
                status=note.status,
                alerts=len(note.alerts),
                result=result,
                alertname=note.common_labels.get("alertname") or note.alerts[0].name,
                **await self._timeline_fields(note, result),
            )

    async def _timeline_fields(self, note: Notification, result: str) -> dict:
        """What the incident timeline shows of a notification (commands/timeline.py): the thread it
        went to, severity, summary, what fires and since when."""
        thread = await asyncio.to_thread(self.store.get, note.group_key) if result != "failed" else None
        starts = [t for a in note.alerts if (t := parse_time(a.starts_at)) is not None]
        ends = [t for a in note.alerts if (t := parse_time(a.ends_at)) is not None]
        iso = lambda ts: dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat()  # noqa: E731
        return {
            "channel": thread.channel if thread is not None and thread.ts else None,
            "thread_root": thread.ts if thread is not None and thread.ts else None,
            "severity": note.common_labels.get("severity"),
            "summary": (note.common_annotations.get("summary") or note.alerts[0].annotations.get("summary") or "")[:300]
            or None,
            "entities": [a.entity for a in note.alerts][:MAX_LABELS_SHOWN],
            "starts_at": iso(min(starts)) if starts else None,
            "ends_at": iso(max(ends)) if ends and note.status == "resolved" else None,
        }

    async def _process(self, note: Notification) -> str:
        thread = await asyncio.to_thread(self.store.get, note.group_key)
        if thread is not None and thread.closed_at is not None:
            thread = None if note.status == "firing" else thread  # a group firing again: a new incident, a new thread
        if thread is None:
            if note.status == "resolved":
                log.info(
                    "alert group %s resolved, but no thread of it is open: nothing to update", note.group_key[:120]
                )
                return "resolved_unknown"
            route = self.config.route({**note.common_labels, **note.alerts[0].labels})
            if route is None:
                log.warning(
                    "alert group %s: no route matches its labels and no default channel is set; not posted",
                    note.group_key[:120],
                )
                return "unrouted"
            thread = Thread(note.group_key, route.channel, "", self.clock())
            result = "opened"
        else:
            route = self.config.route({**note.common_labels, **note.alerts[0].labels}) or Route(thread.channel)
            result = "updated"
        was_closed = thread.closed_at is not None
        for a in note.alerts:
            thread.fingerprints[a.fingerprint] = {
                "status": a.status,
                "entity": a.entity,
                "name": a.name,
                "starts_at": a.starts_at,
                "ends_at": a.ends_at,
            }
        if note.status == "resolved" and not was_closed:
            thread.closed_at = self.clock()
            result = "resolved"
        await self._edit_parent(thread, note)
        await asyncio.to_thread(self.store.put, thread)
        if note.status == "firing":
            for alert in [a for a in note.alerts if a.status == "firing"]:
                key = _diagnosis_key(alert)
                if key in thread.diagnosed:
                    continue
                thread.diagnosed.append(key)
                await asyncio.to_thread(self.store.put, thread)
                await self._diagnose(thread, alert, route)
        elif result == "resolved":
            await self._close(thread, note)
        return result

    def _parent(self, thread: Thread, note: Notification) -> dict:
        """The parent message: what fires, where, since when; its state in the first word."""
        alerts = list(thread.fingerprints.values())
        firing = [a for a in alerts if a["status"] == "firing"]
        names = sorted({a["name"] for a in alerts})
        severity = note.common_labels.get("severity")
        summary = note.common_annotations.get("summary") or note.alerts[0].annotations.get("summary") or ""
        title = ", ".join(names)
        if thread.closed_at is not None:
            started = min(
                (t for a in alerts if (t := parse_time(a["starts_at"])) is not None), default=thread.opened_at
            )
            ended = max((t for a in alerts if (t := parse_time(a["ends_at"])) is not None), default=thread.closed_at)
            head = (
                f":white_check_mark: *RESOLVED* `{slack_escape(title)}` — fired for {duration(ended - started)} "
                f"({utc(started)} to {utc(ended)})"
            )
        else:
            head = (
                f":rotating_light: *FIRING* `{slack_escape(title)}`"
                + (f" ({slack_escape(severity)})" if severity else "")
                + f" — {len(firing)} alert{'s' if len(firing) != 1 else ''} firing"
            )
        lines = [head]
        if summary:
            lines.append(slack_escape(summary[:500]))
        shown = alerts if thread.closed_at is not None else firing
        entities = [slack_escape(a["entity"]) for a in shown][:MAX_LABELS_SHOWN]
        if entities:
            lines.append("on: " + "; ".join(entities) + (" …" if len(shown) > MAX_LABELS_SHOWN else ""))
        if thread.closed_at is None:
            lines.append(f"_last notified {utc(self.clock())}; diagnosis in the thread_")
        text = "\n".join(lines)
        return {"text": text[:3000], "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}]}

    async def _edit_parent(self, thread: Thread, note: Notification) -> None:
        """Post the parent of a new thread, or edit it: repeats never add a message."""
        if thread.ts:
            await self.bot.delivery.update(thread.channel, ts=thread.ts, **self._parent(thread, note))
            return
        resp = await self.bot.delivery.post(thread.channel, **self._parent(thread, note))
        thread.channel, thread.ts = resp.get("channel") or thread.channel, resp["ts"]

    async def _diagnose(self, thread: Thread, alert: Alert, route: Route) -> None:
        """The same path as `/kafka why <symptom>`: the router's command, run by framework.dispatch,
        posted into the thread through the channel's delivery queue."""
        bot = self.bot
        label = f"alert `{slack_escape(alert.name)}` ({slack_escape(alert.entity)})"
        matches = bot.ctx.lookup.search(alert.symptom, limit=1)
        # An alertname is not a question: a loose word match ("CoffeeMachineEmpty" -> "empty") is no
        # runbook entry. A kbot_symptom the rule states is taken as the operator wrote it.
        if not matches or (not alert.explicit_symptom and matches[0].reason.startswith("words")):
            return await self._post_reply(thread, label, _no_entry(alert))
        requests = [self._request("why", {"symptom": alert.symptom}, route, thread)]
        topic, group = alert.first(TOPIC_LABELS), alert.first(GROUP_LABELS)
        try:
            if topic:
                requests.append(self._request("describe", {"topic": check_topic(topic)}, route, thread))
            if group:
                requests.append(self._request("lag", {"group": check_group(group)}, route, thread))
        except BadInput as exc:  # a label that is no valid topic / group name: diagnose without that scope
            log.info("alert %s: label not usable as a scope: %s", alert.name, exc.message)
        for req in [r for r in requests if r is not None]:
            await self._post_reply(thread, label, None, request=req, alert=alert)

    def _request(self, name: str, args: dict, route: Route, thread: Thread) -> CommandRequest | None:
        # Built from the command and checked values, never by formatting label text into /kafka text.
        command = self.bot.router.find(name)
        if command is None:
            return None
        return CommandRequest(
            command,
            args=args,
            raw=f"{name} (from an alert)",
            cluster=route.cluster,
            user="alertmanager",
            channel=thread.channel,
            router=self.bot.router,  # reads the commands its answer suggests into the thread's memory
        )

    async def _post_reply(
        self,
        thread: Thread,
        label: str,
        reply: Reply | None,
        *,
        request: CommandRequest | None = None,
        alert: Alert | None = None,
    ) -> None:
        bot = self.bot
        slack_thread = SlackThread(bot.delivery, thread.channel, thread_ts=thread.ts, label=label)
        await slack_thread.start(f":hourglass_flowing_sand: Diagnosing {label}…")
        t0 = time.monotonic()
        if reply is None:
            result = await run_request(request, dataclasses.replace(bot.ctx, progress=slack_thread.progress))
            reply, outcome = result.reply, result.outcome
            if request.spec.name == "why" and alert is not None:
                reply.notes.append(f"Asked by Alertmanager for {alert.name} on {alert.entity}.")
        else:
            outcome = "answered"
        try:
            await slack_thread.finish(reply)
        except Exception:
            await slack_thread.fail("the diagnosis could not be posted; it is in the bot's log and audit")
            raise
        if request is not None:  # the alert's thread remembers its incident: follow-ups start from it
            await bot.remember(request, reply, slack_thread)
        await bot.audit.write(
            "answer",
            transport="alertmanager",
            user="alertmanager",
            channel=thread.channel,
            command=request.spec.name if request else "no-runbook-entry",
            args=request.args if request else {},
            cluster=request.cluster if request else None,
            outcome=outcome,
            latency_ms=round((time.monotonic() - t0) * 1000, 1),
            delivered="thread",
            thread_ts=thread.ts,
            thread_root=thread.ts,
            **answer_summary(reply),
        )

    async def _close(self, thread: Thread, note: Notification) -> None:
        alerts = list(thread.fingerprints.values())
        started = min((t for a in alerts if (t := parse_time(a["starts_at"])) is not None), default=thread.opened_at)
        ended = max((t for a in alerts if (t := parse_time(a["ends_at"])) is not None), default=thread.closed_at)
        entities = "; ".join(slack_escape(a["entity"]) for a in alerts[:MAX_LABELS_SHOWN])
        text = (
            f":white_check_mark: Resolved after {duration(ended - started)} (first fired {utc(started)}, "
            f"resolved {utc(ended)}). {len(alerts)} alert{'s' if len(alerts) != 1 else ''}: {entities}. "
            f"Diagnoses posted: {len(thread.diagnosed)}."
        )
        await self.bot.delivery.post(thread.channel, thread_ts=thread.ts, text=text[:3000])


def _diagnosis_key(alert: Alert) -> str:
    """Alerts of one group that share a symptom and scope share a diagnosis (URP on three brokers is
    one broker-loss question, not three)."""
    return json.dumps([alert.symptom.lower(), alert.first(TOPIC_LABELS), alert.first(GROUP_LABELS)])


def _no_entry(alert: Alert) -> Reply:
    shown = sorted(alert.labels.items())[: MAX_LABELS_SHOWN * 2]
    return Reply(
        title=f"No runbook entry for {alert.name}",
        severity="warning",
        verdict=f"The runbook has no entry for '{alert.symptom}'; here is what Alertmanager sent.",
        sections=[Section("Labels", [f"{k} = {v}" for k, v in shown])]
        + (
            [Section("Annotations", [f"{k}: {v}" for k, v in sorted(alert.annotations.items())])]
            if alert.annotations
            else []
        ),
        followups=["/kafka status", "/kafka help why"],
    )


def install(bot, app: web.Application) -> AlertThreads | None:
    """Serve the webhook when KBOT_ALERT_TOKEN is set (in the bot's settings); AlertConfigError when
    the configuration is wrong."""
    config = AlertConfig.from_settings(bot.settings.kbot)
    if config is None:
        return None
    bot.alerts = AlertThreads(bot, config)
    app.router.add_post(PATH, bot.alerts.handle)
    return bot.alerts
