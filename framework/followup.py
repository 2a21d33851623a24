"""Follow-ups keep the incident's context: what a thread (or a console session) has established so far.

A thread remembers its incident: the cluster, the entities named so far (topics, consumer groups,
brokers, partitions, transactional ids), the time window (``--since``) and the leading cause (the
first diagnosis of the last ``why``). A later question in the same thread uses them without
retyping them:

    why URP --since 30m     names topic orders, broker 103; cause broker-loss; window 30m
    describe it             topic orders              (it / that / this / the topic / the same topic)
    lag                     the group named earlier   (a parameter left out gets the remembered value)
    history URP             window 30m
    hot-partitions          topic orders, window 30m
    runbook that            the leading cause         (a free-text parameter that only refers)

The rules:

* Explicit input always wins: memory fills only what the user left out, or what the user's words
  refer to. Nothing is silent: the answer carries one note line naming what it took ("From this
  thread: topic orders, window 30m"), set on the request as ``context_note`` and added by
  framework.dispatch.
* Only what the command really has is filled, by the declared kind: positional parameters of kind
  topic and group; the options ``since``, and ``topic`` / ``broker`` / ``partition`` only when the
  user's value refers (``--topic it``): ``history URP --broker 103`` because broker 103 was named
  earlier would chart the lost broker alone, and a per-broker gauge filtered by a topic is empty.
  The cluster is filled for every command that reads one. Commands that change the cluster
  resolve references (``elect-leaders it``) and the cluster, but never fill a target left out.
* Values are never invented: a kind is remembered when the request named it or when an answer
  named exactly one of it (in its suggested commands, its tables' topic / group / broker /
  partition columns, a ``Broker N`` evidence line); an answer that lists several topics leaves
  "the topic" unset, and "it" then asks which one instead of guessing.
* The values are bound on the parsed request (the router asks :class:`Binding` while it binds,
  framework.spec.Referents), never pasted into the text and parsed again.

Where memory lives is the transport's business: bot/slack_bot.py keeps one per Slack thread
(channel + thread ts) in :class:`ThreadMemories` (LRU, 500 threads, 24 h, written through to the
bot's state database so a restart keeps them); the terminal console keeps one per session.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import asdict, dataclass, field
from typing import Any

from framework import dispatch, plain_words
from framework.dispatch import Answer
from framework.reply import Reply, error_reply
from framework.router import BadInput, Router
from framework.spec import ArgValue, CommandRequest, CommandSpec, Param, ParamKind

MAX_THREADS = 500
TTL_S = 24 * 3600.0
MAX_NAMED = 20  # values kept per kind, newest last

# Commands that read no cluster (confirm/cancel act on the cluster their plan names): no cluster is
# bound on them here, and bot/cluster_routing.py routes them without asking which cluster.
NO_CLUSTER = frozenset({"help", "runbook", "confirm", "cancel", "triage answer", "timeline"})
PRONOUNS = frozenset({"it", "that", "this"})
DETERMINERS = frozenset({"the", "that", "this", "same"})
KINDS = ("topic", "group", "broker", "partition", "transactional id")
_TOPIC_PARTITION = re.compile(r"^([A-Za-z0-9._-]+)-(\d+)$")
_BROKER_LABEL = re.compile(r"^Broker (\d+)$")
# a partition named in an evidence line's list (diagnosis.snapshot.name_partitions): "orders-3"
_PARTITION_IN_TEXT = re.compile(r"(?:(?<=[(,:])|(?<=[(,:] ))([A-Za-z0-9._-]+-\d+)(?=[,)]|\s[(…]|$)")
_TXN_ID = re.compile(r"\btransactional id ([A-Za-z0-9._:@+=/-]+?)[,:;)]?(?:\s|$)")


def _slot(spec_kind: ParamKind, name: str) -> str | None:
    """Which remembered kind a parameter or option holds: topic, group, broker, partition, cause."""
    if spec_kind in ("topic", "group"):
        return spec_kind
    if spec_kind == "int" and name in ("broker", "partition"):
        return name
    if spec_kind == "text" and name != "command":  # `runbook that`; never `help it`
        return "cause"
    return None


def _noun(slot: str) -> str:
    return {"transactional id": "transactional-id"}.get(slot, slot)


def refers(words: Sequence[str], slot: str) -> int:
    """How many of the first ``words`` refer back (it / that / this, the topic, the same group); 0: none."""
    low = [w.lower() for w in words[:3]]
    noun = _noun(slot)
    if len(low) >= 3 and low[0] == "the" and low[1] == "same" and low[2] == noun:
        return 3
    if len(low) >= 2 and low[0] in DETERMINERS and low[1] == noun:
        return 2
    if low and low[0] in PRONOUNS:
        return 1
    return 0


@dataclass
class IncidentMemory:
    """One thread's (or console session's) incident: ``remember`` after each answer, ``apply`` /
    ``parse`` before the next question."""

    scope: str = "this thread"  # how the note names it: "From this thread: ..."
    cluster: str | None = None
    since: str | None = None
    cause: tuple[str, str] | None = None  # (runbook entry id, title) of the last `why`'s first diagnosis
    metric: str | None = None  # the metric of the last `why` (its symptom): what "is it getting better?" charts
    current: dict[str, str] = field(default_factory=dict)  # kind -> the one value "it" means now
    named: dict[str, list[str]] = field(default_factory=dict)  # kind -> every value named, newest last
    updated_at: float = 0.0

    # ---- before a question ------------------------------------------------------------------
    def binding(self, fill: bool = True) -> Binding:
        return Binding(self, fill=fill)

    def parse(self, text: str, router: Router, cluster: str | None = None, *, fill: bool = True) -> CommandRequest:
        """``text`` parsed with this memory: references and left-out values bound, the note set.
        ``cluster``: chosen outside the text, it comes before the memory's. ``fill``: False leaves
        parameters left out unset (a plain "who is affected?" asks about the whole cluster). Raises
        BadInput as Router.parse does (and when "it" refers to nothing known)."""
        binding = self.binding(fill)
        request = router.parse(text, referents=binding)
        request.cluster = request.cluster or cluster
        self.apply(request, binding)
        return request

    def apply(self, request: CommandRequest, binding: Binding | None = None) -> list[str]:
        """Bind what the parsed ``request`` left out and has room for (cluster, window); returns
        what was taken from memory, the references the router resolved included, and sets the
        request's note line."""
        taken = dict(binding.taken) if binding is not None else {}
        spec = request.spec
        if not request.options.get("help"):
            if request.cluster is None and self.cluster and spec.name not in NO_CLUSTER:
                request.cluster = self.cluster
                taken["cluster"] = self.cluster
            has_since = any(o.name == "since" for o in spec.options)
            if has_since and "since" not in request.options and self.since:
                request.options["since"] = self.since
                taken["window"] = self.since
        notes = [f"{label} {value}" for label, value in taken.items()]
        request.context_note = f"From {self.scope}: {', '.join(notes)}" if notes else None
        return notes

    def value(self, slot: str) -> ArgValue | None:
        """What "it" means for a kind now; None when nothing (or several things) were named."""
        if slot == "cause":
            return self.cause[0] if self.cause else None
        found = self.current.get(slot)
        if found is None:
            return None
        if slot == "broker":
            return int(found)
        if slot == "partition":
            return int(found.rsplit("-", 1)[1])
        return found

    # ---- after an answer ----------------------------------------------------------------------
    def remember(self, request: CommandRequest, reply: Reply, now: float | None = None) -> None:
        """What this question and its answer established. A refused or failed question teaches
        nothing (its topic may not exist); an unavailable source still keeps what the user named."""
        self.updated_at = time.time() if now is None else now
        if reply.outcome in ("bad_input", "failed"):
            return
        if request.cluster:
            self.cluster = request.cluster
        since = request.option_text("since")
        if since:
            self.since = since
        if reply.outcome == "answered" or reply.outcome == "partial":
            if request.spec.name == "why" and reply.diagnoses:
                first = reply.diagnoses[0]
                self.cause = (first.entry_id, first.title)
                self.metric = _metric(request, reply) or self.metric
            found = _from_reply(reply, request.router)
            for kind, values in found.items():
                for v in values:
                    self._name(kind, v)
                if len(values) == 1:  # an answer that names one of a kind is about it
                    self.current[kind] = values[0]
                else:  # several (orders-* and payments-*): "it" asks which instead of keeping an older one
                    self.current.pop(kind, None)
        for kind, v in _from_request(request):  # the user's own words last: explicit input wins
            self._name(kind, v)
            self.current[kind] = v

    def _name(self, kind: str, value: str) -> None:
        values = [v for v in self.named.get(kind, []) if v != value] + [value]
        self.named[kind] = values[-MAX_NAMED:]

    # ---- storage ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cause"] = list(self.cause) if self.cause else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], scope: str = "this thread") -> IncidentMemory:
        cause = data.get("cause")
        return cls(
            scope=scope,
            cluster=data.get("cluster"),
            since=data.get("since"),
            cause=(str(cause[0]), str(cause[1])) if cause else None,
            metric=str(data["metric"]) if data.get("metric") else None,
            current={str(k): str(v) for k, v in (data.get("current") or {}).items()},
            named={str(k): [str(x) for x in v] for k, v in (data.get("named") or {}).items()},
            updated_at=float(data.get("updated_at") or 0.0),
        )


class Binding:
    """framework.spec.Referents for one parse: resolves references and left-out values from the
    memory, and records what it took for the note."""

    def __init__(self, memory: IncidentMemory, *, fill: bool = True):
        self.memory = memory
        self.fill = fill
        self.taken: dict[str, str] = {}

    def refer(self, words: Sequence[str], spec: CommandSpec, name: str, kind: ParamKind) -> tuple[int, ArgValue] | None:
        slot = _slot(kind, name)
        if slot is None:
            return None
        n = refers(words, slot)
        if n == 0:
            return None
        if slot == "cause" and n != len(words):
            return None  # `why is it slow`: words, not a reference
        value = self.memory.value(slot)
        if value is None:
            raise BadInput(self._unknown(slot, " ".join(words[:n]), spec))
        self._took(slot, value)
        return n, value

    def missing(self, spec: CommandSpec, param: Param) -> ArgValue | None:
        slot = _slot(param.kind, param.name)
        if not self.fill or slot not in ("topic", "group") or spec.mutating:
            return None  # an action's target is said, never remembered into it
        value = self.memory.value(slot)
        if value is not None:
            self._took(slot, value)
        return value

    def _took(self, slot: str, value: ArgValue) -> None:
        if slot == "partition" and self.memory.current.get("partition"):
            self.taken["partition"] = self.memory.current["partition"]
        else:
            self.taken[slot] = str(value)

    def _unknown(self, slot: str, words: str, spec: CommandSpec) -> str:
        several = self.memory.named.get(slot, [])
        where = self.memory.scope
        if slot == "cause":
            return f"'{words}': {where} has no `why` answer yet to refer to; name what to look up."
        if len(several) > 1:
            return (
                f"'{words}': {where} named several {_noun(slot)}s ({', '.join(several[-5:])}); "
                f"say which, e.g. `{spec.name} {several[-1]}`."
            )
        return f"'{words}': {where} has not named a {_noun(slot)} yet; name one (`{spec.usage()}`)."


_SYMPTOM = re.compile(r"^symptom ([A-Za-z][A-Za-z0-9_.-]+)$")


def _metric(request: CommandRequest, reply: Reply) -> str | None:
    """The metric a `why` was about: the symptom typed when it is one word (URP, IsrShrinksPerSec),
    else the metric the runbook matched the words to ("symptom UnderReplicatedPartitions")."""
    symptom = request.arg_text("symptom") or ""
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]+", symptom):
        return symptom
    for d in reply.diagnoses:
        m = _SYMPTOM.match(d.why_ranked)
        if m:
            return m.group(1)
    return None


def _from_request(request: CommandRequest) -> list[tuple[str, str]]:
    """(kind, value) the request itself holds, by its parameters' and options' declared kinds."""
    spec = request.spec
    found: list[tuple[str, str]] = []
    topic: str | None = None
    partition: int | None = None
    declared = [(p.name, p.kind, request.args.get(p.name)) for p in spec.params] + [
        (o.name, o.kind, request.options.get(o.name)) for o in spec.options
    ]
    for name, kind, value in declared:
        if value is None or isinstance(value, bool):
            continue
        slot = _slot(kind, name)
        if slot in ("topic", "group"):
            found.append((slot, str(value)))
            if slot == "topic":
                topic = str(value)
        elif slot == "broker":
            found.append(("broker", str(value)))
        elif slot == "partition":
            partition = int(value)
    if partition is not None and topic is not None:
        found.append(("partition", f"{topic}-{partition}"))
    return found


def _from_reply(reply: Reply, router: Router | None) -> dict[str, list[str]]:
    """Entities an answer names, by kind, in order: the commands it suggests (read by the router,
    so a value's kind is the parameter's declared kind), its tables' topic / group / broker /
    partition columns, its ``Broker N`` evidence lines and the transactional ids its evidence names."""
    found: dict[str, list[str]] = {}

    def add(kind: str, value: object) -> None:
        text = str(value)
        if kind in ("topic", "partition") and text.startswith("__"):
            return  # Kafka's own topics (__consumer_offsets, __transaction_state) are nobody's "it"
        if text and text not in found.setdefault(kind, []):
            found[kind].append(text)

    if router is not None:
        commands = [a.command for a in reply.actions] + [f for f in reply.followups if f.startswith("/kafka ")]
        for text in commands:
            try:
                suggested = router.parse(text)
            except BadInput:
                continue
            for kind, value in _from_request(suggested):
                add(kind, value)
    for table in reply.tables:
        columns = [c.lower() for c in table.columns]
        for row in table.rows:
            for column, cell in zip(columns, row):
                if cell is None:
                    continue
                if column in ("topic", "group", "broker", "transactional id"):
                    add(column, cell)
                elif column == "partition" and isinstance(cell, str):
                    m = _TOPIC_PARTITION.match(cell)
                    if m:
                        add("topic", m.group(1))
                        add("partition", cell)
    for ev in reply.evidence:
        m = _BROKER_LABEL.match(ev.label)
        if m and ev.status == "bad":
            add("broker", m.group(1))
        if ev.status == "bad":  # "gone from 6 ISR(s) (orders-0, orders-1, payments-0 (+2 more))"
            for name in _PARTITION_IN_TEXT.findall(ev.value):
                tp = _TOPIC_PARTITION.match(name)
                if tp and re.search(r"[A-Za-z]", tp.group(1)):
                    add("topic", tp.group(1))
                    add("partition", name)
        for txn in _TXN_ID.findall(ev.value):
            add("transactional id", txn)
    return found


# ---- where the memories live ------------------------------------------------------------------

Key = tuple[str, str]  # (Slack channel id, the thread's root ts)
Connect = Callable[[], sqlite3.Connection]
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS incident_threads "
    "(thread_key TEXT PRIMARY KEY, memory TEXT NOT NULL, updated_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS incident_threads_updated ON incident_threads(updated_at)",
)


class ThreadMemories:
    """One IncidentMemory per thread: an LRU of at most ``max_threads``, each forgotten ``ttl_s``
    after its last question. With ``connect`` (the bot's state database, gate/state_db.py, the file
    the triage threads live in) every memory is also written to an ``incident_threads`` table and
    read back on a miss, so a restarted bot still knows its threads; the table is pruned to the
    same bounds. Its calls block: the Slack app runs them in a worker thread."""

    def __init__(
        self,
        connect: Connect | None = None,
        *,
        max_threads: int = MAX_THREADS,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.time,
    ):
        self._connect, self.max_threads, self.ttl_s, self.clock = connect, max_threads, ttl_s, clock
        self._cache: OrderedDict[Key, IncidentMemory] = OrderedDict()
        self._lock = threading.RLock()  # called from worker threads: one read-modify-write at a time
        if connect is not None:
            with closing(connect()) as conn:
                for statement in _SCHEMA:
                    conn.execute(statement)

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, key: Key) -> IncidentMemory | None:
        """The thread's memory, or None (a thread the bot has not answered in, or forgotten)."""
        with self._lock:
            return self._get(key)

    def update(self, key: Key, request: CommandRequest, reply: Reply, scope: str = "this thread") -> IncidentMemory:
        """Remember an answer in the thread's memory (a new one for a new thread), and store it."""
        with self._lock:
            memory = self._get(key) or IncidentMemory(scope=scope)
            memory.remember(request, reply, now=self.clock())
            self.put(key, memory)
            return memory

    def _get(self, key: Key) -> IncidentMemory | None:
        now = self.clock()
        memory = self._cache.get(key)
        if memory is None and self._connect is not None:
            with closing(self._connect()) as conn:
                row = conn.execute("SELECT memory FROM incident_threads WHERE thread_key = ?", (_key(key),)).fetchone()
            if row is not None:
                memory = IncidentMemory.from_dict(json.loads(row[0]))
                self._keep(key, memory)
        if memory is None:
            return None
        if now - memory.updated_at > self.ttl_s:
            self._cache.pop(key, None)
            return None
        self._cache.move_to_end(key)
        return memory

    def put(self, key: Key, memory: IncidentMemory) -> None:
        with self._lock:
            self._put(key, memory)

    def _put(self, key: Key, memory: IncidentMemory) -> None:
        memory.updated_at = memory.updated_at or self.clock()
        self._keep(key, memory)
        if self._connect is None:
            return
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO incident_threads VALUES (?, ?, ?)",
                    (_key(key), json.dumps(memory.to_dict()), memory.updated_at),
                )
                conn.execute("DELETE FROM incident_threads WHERE updated_at < ?", (self.clock() - self.ttl_s,))
                conn.execute(
                    "DELETE FROM incident_threads WHERE thread_key NOT IN "
                    "(SELECT thread_key FROM incident_threads ORDER BY updated_at DESC LIMIT ?)",
                    (self.max_threads,),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _keep(self, key: Key, memory: IncidentMemory) -> None:
        self._cache[key] = memory
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_threads:
            self._cache.popitem(last=False)

    def keys(self) -> Iterable[Key]:
        with self._lock:
            return list(self._cache)


def parse_request(
    text: str,
    memory: IncidentMemory | None,
    *,
    user: str | None,
    channel: str | None,
    router: Router,
    cluster: str | None = None,
) -> CommandRequest | Answer:
    """framework.dispatch.parse_request with the thread's memory: the request, or the bad_input
    Answer saying why it is not one ("it" naming nothing known included). ``cluster``: the one
    chosen outside the text (the Slack channel's, the terminal's --cluster); a --cluster in the
    text wins over it."""
    if memory is None:
        parsed = dispatch.parse_request(text, user=user, channel=channel, router=router)
        if isinstance(parsed, CommandRequest):
            parsed.cluster = parsed.cluster or cluster
        return parsed
    reading = None
    if router.command_for(text) is None:  # plain words: "and broker 102?", "what should I do first?"
        reading = plain_words.read(text, memory)
        if reading is None and plain_words.plain(text):
            first = " ".join(plain_words.clean(text).split()[:2])
            return Answer(error_reply(plain_words.not_understood(text, memory), router.closest(first)), "bad_input")
    try:
        if reading is None:  # a command, or a mistyped one (the router says which it may be)
            request = memory.parse(text, router, cluster)
        else:
            request = memory.parse(reading.command, router, cluster, fill=reading.fill)
    except BadInput as exc:
        return Answer(error_reply(exc.message, exc.suggestions), "bad_input")
    if reading is not None:
        said = " ".join(text.split())
        read_as = f"Read “{said[:80]}” as `{reading.command}`."
        request.context_note = f"{read_as} {request.context_note}" if request.context_note else read_as
    request.user, request.channel = user, channel
    return request


def _key(key: Key) -> str:
    return f"{key[0]}/{key[1]}"
