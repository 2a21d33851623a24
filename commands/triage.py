"""triage [symptom]: walk the runbook's triage steps for a symptom, answering from the cluster where it can.

A transport-neutral state machine. The symptom resolves (ctx.lookup.search) to ranked runbook
entries; the walk starts with the first and goes through its ``triage`` steps in order. A step
is answered by a live probe when its text names something the cluster can tell (registered
brokers, ISR concentration, min ISR, transactions, quorum, log dirs); otherwise the human gets a
Question with choices. Evidence that points at another entry switches the walk there; evidence
that rules an entry out moves on to the next candidate. The runbook's step text stays in the
KB: this module only maps patterns in it to probes.

    state = await start("URP", ctx)                  # runs every step it can answer
    state = await answer(state, "q1", "no", ctx)     # the human's answer; continues
    state.to_reply()                                 # question as Actions, or the diagnosis

State is plain data (to_dict/from_dict): Slack keeps it per thread; the terminal keeps it in a
JSON file under $KBOT_STATE_DIR (default ~/.kbot)/triage/<token>.json.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from live.gateway import ClusterUnreachable, GatewayError

from .context import Context
from .diagnosis import diagnosis
from .evidence import broker_list, gateway, name_partitions, snapshot
from .reply import Action, Evidence, Reply
from .router import BadInput
from .spec import Command, CommandRequest, CommandSpec, Param

MAX_QUESTIONS = 12  # a triage that needs more is better read as the runbook itself
KEEP_S = 7 * 86_400  # stored states older than this are pruned
SHARE = 0.6  # share of out-of-sync replicas on one broker that makes it "the" suspect
_TOKEN = re.compile(r"^[0-9a-f]{12}$")
LABELS = {"yes": "Yes", "no": "No", "unknown": "Don't know", "confirms": "It points here",
          "rules-out": "It rules this out", "skip": "Skip", "level": "Level (flat)", "moving": "Moving up and down"}


@dataclass
class Question:
    id: str
    text: str
    choices: list[str]
    kind: str  # "step" | "gc" | "urp-shape" | "maintenance"
    refs: list[str] = field(default_factory=list)  # entries the step names ("then follow gc-pauses")


@dataclass
class Record:
    entry: str
    step: int  # index in the entry's triage; -1 for the bot's own follow-up question
    text: str
    answer: str
    source: str
    status: str = "neutral"


@dataclass
class TriageState:
    token: str
    symptom: str
    cluster: str | None
    candidates: list[str]
    entry: str
    step: int = 0
    records: list[Record] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # probe results by probe name, plus human answers
    visited: list[str] = field(default_factory=list)
    ruled_out: list[str] = field(default_factory=list)
    support: dict = field(default_factory=dict)  # entry -> [what pointed at it]
    question: Question | None = None
    conclusion: dict | None = None  # {"entry": id | None, "reason": str}
    asked: int = 0

    @property
    def done(self) -> bool:
        return self.conclusion is not None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TriageState":
        data = dict(data)
        data["records"] = [Record(**r) for r in data.get("records", [])]
        data["question"] = Question(**data["question"]) if data.get("question") else None
        return cls(**data)

    def to_reply(self, kb=None) -> Reply:
        return _reply(self, kb)


# ---- probes: gather facts once (cached in state.facts), judge them per entry ----------------

@dataclass
class Outcome:
    answer: str
    source: str
    status: str = "neutral"
    points_to: str | None = None
    rules_out: bool = False


class _Live:
    """The gateway and one snapshot shared by the probes of one walk (not stored in the state)."""

    def __init__(self, gw, ctx: Context):
        self.gw, self.ctx, self._snap = gw, ctx, None

    async def snap(self):
        if self._snap is None:
            self._snap = await snapshot(self.gw, min_isr="all")
        return self._snap


async def _g_brokers(live: _Live, state: TriageState) -> dict:
    s = await live.snap()
    not_preferred = sorted({p.topic for p in s.states if p.leader is not None and p.replicas and p.leader != p.replicas[0]
                            and not p.topic.startswith("__")})
    return {"missing": sorted(s.brokers.expected - s.brokers.registered), "registered": sorted(s.brokers.registered),
            "not_preferred": not_preferred[:5]}


def _j_brokers(f: dict, entry: str) -> Outcome:
    if f["missing"]:
        return Outcome(f"broker {broker_list(f['missing'])} not registered ({len(f['registered'])} registered: "
                       f"{broker_list(f['registered'])})", "live: describe_cluster", "bad", points_to="broker-loss")
    return Outcome(f"all {len(f['registered'])} expected brokers are registered", "live: describe_cluster", "ok",
                   rules_out=entry == "broker-loss")


async def _g_concentration(live: _Live, state: TriageState) -> dict:
    s = await live.snap()
    by: dict[str, int] = {}
    for p in s.states:
        for b in p.replicas:
            if b not in p.isr and b in s.brokers.registered:
                by[str(b)] = by.get(str(b), 0) + 1
    return {"by_broker": by}


def _j_concentration(f: dict, entry: str) -> Outcome:
    by = f["by_broker"]
    total = sum(by.values())
    if not total:
        return Outcome("no replica on a live broker is out of its ISR right now", "live: metadata", "ok", rules_out=True)
    top, n = max(by.items(), key=lambda kv: kv[1])
    if n / total >= SHARE:
        return Outcome(f"{n} of {total} out-of-sync replicas are on broker {top}", "live: metadata", "bad", points_to=entry)
    return Outcome("out-of-sync replicas are spread: " + ", ".join(f"broker {b}: {c}" for b, c in sorted(by.items())),
                   "live: metadata", "neutral")


async def _g_min_isr(live: _Live, state: TriageState) -> dict:
    cats = (await live.snap()).by_category()
    return {"under": [[p.topic, p.partition] for p in cats["UnderMinIsr"]], "at": len(cats["AtMinIsr"])}


def _j_min_isr(f: dict, entry: str) -> Outcome:
    under = [tuple(x) for x in f["under"]]
    text = (f"{len(under)} partition(s) under min ISR ({name_partitions(under, 4)}): acks=all writes fail there"
            if under else "no partition is under min ISR") + f"; {f['at']} at min ISR"
    return Outcome(text, "live: metadata + topic configs", "bad" if under or f["at"] else "ok",
                   rules_out=entry == "under-min-isr" and not under)


async def _g_hanging(live: _Live, state: TriageState) -> dict:
    # Every open transaction that holds a partition's last stable offset back, however young: the
    # person triaging stuck read_committed consumers needs to see it now. Whether it is hanging
    # (nothing will abort it) or will be aborted by its coordinator is judged per transaction.
    from .txn_evidence import read_open_transactions

    report = await read_open_transactions(live.gw)
    now = report.now_ms
    return {
        "open": [{"tid": t.transactional_id, "producer_id": t.producer_id, "where": t.where,
                  "age_s": (t.age_ms(now) or 0) // 1000, "lso_lag": t.offsets.lso_lag if t.offsets else None,
                  "status": t.status(now), "abort_at_ms": t.abort_at_ms} for t in report.open],
        "hanging": [{"tid": t.transactional_id, "producer_id": t.producer_id, "age_s": (t.age_ms(now) or 0) // 1000,
                     "coordinator": t.coordinator_id, "state": "Ongoing", "partitions": [[t.topic, t.partition]]}
                    for t in report.open if t.transactional_id is not None],
        "producers": [{"topic": t.topic, "partition": t.partition, "producer_id": t.producer_id,
                       "epoch": t.producer_epoch, "start": t.start_offset} for t in report.open],
        "unread": sorted(report.unread),
    }


def _j_hanging(f: dict, entry: str) -> Outcome:
    if f["open"]:
        t = f["open"][0]
        lag = f", LSO {t['lso_lag']:,} records behind" if t["lso_lag"] is not None else ""
        return Outcome(f"{len(f['open'])} open transaction(s) hold a partition's last stable offset back, e.g. producer "
                       f"{t['producer_id']} on {t['where']}" + (f" ({t['tid']})" if t["tid"] else "") + f", open {t['age_s']:,} s{lag}",
                       "live: list_offsets + describe_producers + describe_transactions", "bad", points_to="hanging-transaction")
    partial = f" (not read: {', '.join(f['unread'])})" if f.get("unread") else ""
    return Outcome("no open transaction holds any partition's last stable offset back" + partial,
                   "live: list_offsets + describe_producers", "neutral" if partial else "ok",
                   rules_out=entry == "hanging-transaction" and not partial)


def _j_producers(f: dict, entry: str) -> Outcome:
    if not f["producers"]:
        return Outcome("no producer holds a transaction open on the partitions of those transactions",
                       "live: describe_producers", "ok" if not f["hanging"] else "neutral")
    return Outcome("; ".join(f"{p['topic']}-{p['partition']}: producer {p['producer_id']} (epoch {p['epoch']}) holds a "
                             f"transaction open from offset {p['start']:,}" for p in f["producers"][:3]),
                   "live: describe_producers", "bad", points_to="hanging-transaction")


def _j_coordinator(f: dict, entry: str) -> Outcome:
    if not f["open"]:
        return Outcome("no open transaction to ask the coordinators about", "live: list/describe_transactions", "ok")
    t = f["open"][0]
    if t["status"] == "unknown-to-coordinator":
        return Outcome(f"no coordinator knows producer {t['producer_id']}'s transaction on {t['where']}: nothing will "
                       "abort it by itself", "live: list/describe_transactions", "bad", points_to="hanging-transaction")
    if t["status"] == "past-timeout":
        return Outcome(f"its coordinator lists {t['tid']} yet it is past its timeout after {t['age_s']:,} s: it will not "
                       "end by itself", "live: list/describe_transactions", "bad", points_to="hanging-transaction")
    at = time.strftime("%H:%M:%S UTC", time.gmtime(t["abort_at_ms"] / 1000)) if t["abort_at_ms"] else "its timeout"
    return Outcome(f"its coordinator still tracks {t['tid']}: it aborts it by itself at {at}, so waiting may be enough",
                   "live: list/describe_transactions", "neutral")


async def _g_offline(live: _Live, state: TriageState) -> dict:
    s = await live.snap()
    return {"offline": [[p.topic, p.partition] for p in s.states if not p.has_leader]}


def _j_offline(f: dict, entry: str) -> Outcome:
    off = [tuple(x) for x in f["offline"]]
    if off:
        return Outcome(f"{len(off)} partition(s) without a leader: {name_partitions(off, 4)}", "live: metadata", "bad",
                       points_to="offline-partitions" if entry == "offline-partitions" else None)
    return Outcome("every partition has a leader", "live: metadata", "ok", rules_out=entry == "offline-partitions")


async def _g_quorum(live: _Live, state: TriageState) -> dict:
    q = await live.gw.metadata_quorum()
    return {"leader": q.leader_id, "voters": [v.id for v in q.voters], "lagging": [v.id for v in q.voters if v.lag > 0]}


def _j_quorum(f: dict, entry: str) -> Outcome:
    if f["leader"] < 0:
        return Outcome(f"the controller quorum has no leader (voters {broker_list(f['voters'])})",
                       "live: describe_metadata_quorum", "bad", points_to="controller-quorum-loss")
    return Outcome(f"controller quorum leader {f['leader']}, voters {broker_list(f['voters'])}"
                   + (f", lagging {broker_list(f['lagging'])}" if f["lagging"] else ""), "live: describe_metadata_quorum",
                   "ok", rules_out=entry == "controller-quorum-loss")


async def _g_log_dirs(live: _Live, state: TriageState) -> dict:
    dirs = await live.gw.log_dirs()
    full = [[d.broker, d.path] for d in dirs if d.total_bytes and d.usable_bytes is not None and d.usable_bytes < 0.05 * d.total_bytes]
    return {"failed": [[d.broker, d.path, d.error] for d in dirs if d.error], "full": full, "count": len(dirs)}


def _j_log_dirs(f: dict, entry: str) -> Outcome:
    if f["full"]:
        return Outcome("nearly full: " + ", ".join(f"broker {b} {p}" for b, p in f["full"]), "live: describe_log_dirs", "bad",
                       points_to="full-disk")
    if f["failed"]:
        return Outcome("failed log dir(s): " + ", ".join(f"broker {b} {p} ({e})" for b, p, e in f["failed"]),
                       "live: describe_log_dirs", "bad", points_to="log-dir-failure")
    if not f["count"]:
        return Outcome("no broker reported a log dir", "live: describe_log_dirs", "neutral")
    return Outcome(f"all {f['count']} log dirs are online with space left", "live: describe_log_dirs", "ok",
                   rules_out=entry in ("log-dir-failure", "full-disk"))


async def _g_racks(live: _Live, state: TriageState) -> dict:
    s = await live.snap()
    affected = sorted((s.brokers.expected - s.brokers.registered)
                      | {b for p in s.states for b in p.replicas if b not in p.isr})
    racks = {str(b.id): b.rack for b in s.cluster.brokers}
    return {"affected": affected, "racks": {str(b): racks.get(str(b)) for b in affected}}


def _j_racks(f: dict, entry: str) -> Outcome:
    if not f["affected"]:
        return Outcome("no broker is missing and no replica is out of its ISR: nothing is cut off", "live: metadata", "ok",
                       rules_out=entry == "network-partition")
    known = {r for r in f["racks"].values() if r}
    where = (f"all in rack {known.pop()}" if len(known) == 1 and all(f["racks"].values())
             else "racks: " + ", ".join(f"{b}: {r or 'unset'}" for b, r in f["racks"].items()))
    return Outcome(f"affected brokers {broker_list(f['affected'])}, {where}", "live: describe_cluster + metadata", "neutral")


async def _g_urp_shape(live: _Live, state: TriageState) -> dict | None:
    """From the lake when there is one; implied by a missing broker; else the human is asked."""
    from .digest import lake_rows

    if live.ctx.lake is not None:
        try:
            rows = await lake_rows(live.ctx, live.gw.name, 1, "urp_trend")
        except Exception:  # noqa: BLE001 - a lake failure only means falling back to the next source
            rows = None
        shapes = {r["shape"] for r in rows or []} - {"zero"}
        if shapes:
            return {"shape": "flat" if shapes == {"flat"} else "fluctuating", "source": "lake: urp_trend, last hour"}
    missing = state.facts.get("brokers", {}).get("missing")
    if missing:
        return {"shape": "flat", "source": f"implied: broker {broker_list(missing)} is gone, so its replicas stay out of ISR"}
    return None


def _j_urp_shape(f: dict, entry: str) -> Outcome:
    if f["shape"] == "flat":
        return Outcome("URP is level (flat)", f["source"], "bad", points_to="broker-loss")
    return Outcome("URP moves up and down", f["source"], "bad", points_to="slow-follower")


# The probes by the name the runbook binds them to triage steps under (an entry's
# `checks.triage`: step index -> probe names): (fact gathered, cached under this name; gather; judge).
# Several probes may answer one step; several judges may read the same fact.
PROBES: dict[str, tuple[str, object, object]] = {
    "brokers": ("brokers", _g_brokers, _j_brokers),
    "urp_shape": ("urp_shape", _g_urp_shape, _j_urp_shape),
    "concentration": ("concentration", _g_concentration, _j_concentration),
    "min_isr": ("min_isr", _g_min_isr, _j_min_isr),
    "hanging": ("hanging", _g_hanging, _j_hanging),
    "producers": ("hanging", _g_hanging, _j_producers),
    "coordinator": ("hanging", _g_hanging, _j_coordinator),
    "offline": ("offline", _g_offline, _j_offline),
    "quorum": ("quorum", _g_quorum, _j_quorum),
    "log_dirs": ("log_dirs", _g_log_dirs, _j_log_dirs),
    "racks": ("racks", _g_racks, _j_racks),
}
_GC = re.compile(r"\bGC\b")


# ---- the walk --------------------------------------------------------------------------------

def _refs(ctx: Context, text: str, entry: str) -> list[str]:
    return [eid for eid in ctx.kb.failure_modes if eid != entry and re.search(rf"\b{re.escape(eid)}\b", text)]


def _ask(state: TriageState, text: str, choices: list[str], kind: str, refs: list[str] | None = None) -> None:
    state.asked += 1
    state.question = Question(f"q{state.asked}", text, choices, kind, refs or [])


def _human_question(state: TriageState, ctx: Context, text: str) -> None:
    refs = _refs(ctx, text, state.entry)
    suspect = state.facts.get("suspect")
    if _GC.search(text) and suspect is not None:
        _ask(state, f"Did the GC log of broker {suspect} show long pauses lined up with the ISR shrinks?",
             ["yes", "no", "unknown"], "gc", refs or (["gc-pauses"] if state.entry != "gc-pauses" else []))
    elif "?" in text:
        _ask(state, text, ["yes", "no", "unknown"], "step", refs)
    else:
        _ask(state, f"{text} What did you find?", ["confirms", "rules-out", "skip"], "step", refs)


def _apply(state: TriageState, ctx: Context, o: Outcome, text: str, step: int) -> None:
    state.records.append(Record(state.entry, step, text, o.answer, o.source, o.status))
    if step >= 0:
        state.step += 1
    if o.points_to and o.points_to in ctx.kb.failure_modes:
        state.support.setdefault(o.points_to, []).append(o.answer)
        # Follow the evidence to another entry, once: coming back would loop.
        if o.points_to != state.entry and o.points_to not in state.visited and o.points_to not in state.ruled_out:
            state.entry, state.step = o.points_to, 0
            state.visited.append(o.points_to)
            return
    if o.rules_out:
        state.ruled_out.append(state.entry)
        nxt = next((c for c in state.candidates if c not in state.ruled_out and c not in state.visited), None)
        if nxt is None:
            state.conclusion = {"entry": None, "reason": "the cluster and your answers ruled out every runbook explanation for "
                                f"'{state.symptom}': " + ", ".join(state.ruled_out)}
        else:
            state.entry, state.step = nxt, 0
            state.visited.append(nxt)


def _conclude(state: TriageState, ctx: Context) -> None:
    missing = state.facts.get("brokers", {}).get("missing")
    if state.entry == "broker-loss" and missing and "maintenance" not in state.facts and state.asked < MAX_QUESTIONS:
        _ask(state, f"Is broker {broker_list(missing)} down for planned maintenance (a rolling restart, an upgrade)?",
             ["yes", "no", "unknown"], "maintenance")
        return
    why = state.support.get(state.entry) or ["walked its triage steps and nothing ruled it out"]
    state.conclusion = {"entry": state.entry, "reason": "; ".join(dict.fromkeys(why))}


async def _walk(state: TriageState, ctx: Context, live: _Live | None) -> TriageState:
    for _ in range(100):  # bounded: every pass advances a step, switches entry or stops
        if state.done or state.question is not None:
            break
        entry = ctx.kb.failure_modes[state.entry]
        if state.step >= len(entry.triage):
            _conclude(state, ctx)
            continue
        text = entry.triage[state.step]
        matching = [PROBES[name] for name in entry.checks.triage.get(state.step, [])]
        outcomes: list[Outcome] = []
        for name, gather, judge in matching:
            if name not in state.facts:
                if live is None:
                    continue
                try:
                    found = await gather(live, state)
                except GatewayError as exc:
                    state.records.append(Record(state.entry, -1, text, f"could not read: {exc}", "live", "neutral"))
                    if isinstance(exc, ClusterUnreachable):
                        live = None  # the remaining steps become questions instead of each timing out
                    continue
                if found is None:
                    continue
                state.facts[name] = found
            outcomes.append(judge(state.facts[name], state.entry))
        suspect = _suspect(state)
        if suspect is not None:
            state.facts["suspect"] = suspect  # the GC question names this broker
        if not outcomes:
            if state.asked >= MAX_QUESTIONS:
                _apply(state, ctx, Outcome("not checked (question limit reached)", "bot"), text, state.step)
            elif any(p[1] == "urp_shape" for p in matching):
                _ask(state, "Is the URP count level since it rose (flat), or moving up and down?", ["level", "moving", "unknown"], "urp-shape")
            else:
                _human_question(state, ctx, text)
            continue
        merged = Outcome("; ".join(o.answer for o in outcomes), " / ".join(dict.fromkeys(o.source for o in outcomes)),
                         "bad" if any(o.status == "bad" for o in outcomes) else "ok" if all(o.status == "ok" for o in outcomes) else "neutral",
                         next((o.points_to for o in outcomes if o.points_to), None), any(o.rules_out for o in outcomes))
        _apply(state, ctx, merged, text, state.step)
    return state


def _suspect(state: TriageState) -> str | None:
    by = state.facts.get("concentration", {}).get("by_broker") or {}
    total = sum(by.values())
    if total:
        top, n = max(by.items(), key=lambda kv: kv[1])
        if n / total >= SHARE:
            return top
    return state.facts.get("suspect")


async def _live(ctx: Context, cluster: str | None) -> _Live | None:
    if ctx.live is None:
        return None  # no cluster: every step becomes a question
    
    return _Live(await gateway(ctx, cluster), ctx)


async def start(symptom: str, ctx: Context, cluster: str | None = None) -> TriageState:
    matches = ctx.lookup.search(symptom, limit=6)
    if not matches:
        raise BadInput(f"The runbook has nothing for '{symptom}'.",
                       [f"triage {s}" for s in ctx.lookup.did_you_mean(symptom)] or ["help triage"])
    candidates = [m.entry.id for m in matches]
    state = TriageState(token=secrets.token_hex(6), symptom=symptom, cluster=cluster, candidates=candidates,
                        entry=candidates[0], visited=[candidates[0]])
    return await _walk(state, ctx, await _live(ctx, cluster))


async def answer(state: TriageState, question_id: str, choice: str, ctx: Context) -> TriageState:
    q = state.question
    if q is None or q.id != question_id:
        raise BadInput("That question was already answered or belongs to another step of this triage.",
                       ["triage " + state.symptom])
    if choice not in q.choices:
        raise BadInput(f"'{choice}' is not an answer to this question; choose one of: {', '.join(q.choices)}.")
    state.question = None
    label = LABELS.get(choice, choice)
    step = state.step if q.kind in ("step", "gc", "urp-shape") else -1
    text = ctx.kb.failure_modes[state.entry].triage[state.step] if step >= 0 else q.text
    if q.kind == "maintenance":
        state.facts["maintenance"] = choice
        state.records.append(Record(state.entry, -1, q.text, label, "you"))
        return await _walk(state, ctx, await _live(ctx, state.cluster))
    yes, no = choice in ("yes", "confirms", "level"), choice in ("no", "rules-out")
    target = None
    if q.kind == "urp-shape":
        target = "broker-loss" if choice == "level" else "slow-follower" if choice == "moving" else None
    elif yes:
        target = q.refs[0] if q.refs else state.entry
    # "No" to a question rules nothing out by itself (the step asked about one branch); "it rules
    # this out" to an instruction does, and so does "no" to the GC question inside gc-pauses.
    rules_out = choice == "rules-out" or (no and q.kind == "gc" and state.entry == "gc-pauses")
    _apply(state, ctx, Outcome(f"{q.text if q.kind != 'step' else 'you answered'}: {label}", "you",
                               "bad" if yes else "neutral", target, rules_out), text, step)
    return await _walk(state, ctx, await _live(ctx, state.cluster))


# ---- the reply ------------------------------------------------------------------------------

def _suggested(state: TriageState, kb) -> list[Action]:
    """Gated actions the conclusion suggests, as exact commands; the gate previews them first."""
    entry = (state.conclusion or {}).get("entry")
    f = state.facts
    out: list[Action] = []
    if entry in ("broker-loss", "slow-follower", "gc-pauses", "log-dir-failure"):
        missing = f.get("brokers", {}).get("missing")
        when = f"After broker {broker_list(missing)} is back: " if missing else ""
        out += [Action(f"{when}elect preferred leaders on {t}", f"elect-leaders {t}", mutating=True)
                for t in f.get("brokers", {}).get("not_preferred", [])[:3]]
        if entry == "broker-loss" and f.get("maintenance") == "no":
            rate = kb.failure_modes["broker-loss"].checks.thresholds["reassignment_throttle_bytes_per_s"]
            rate_text = f"{rate / 1e6:g}MB/s"  # the throttle command reads MB as 1000^2
            out.append(Action(f"If it will not come back: throttle re-replication ({rate_text})", f"throttle set {rate_text}", mutating=True))
    if entry == "hanging-transaction":
        out += [Action(f"Abort producer {p['producer_id']} on {p['topic']}-{p['partition']}",
                       f"abort-txn {p['topic']} {p['partition']} --producer-id {p['producer_id']}", mutating=True)
                for p in f.get("hanging", {}).get("producers", [])[:3]]
    return out


def _reply(state: TriageState, kb=None) -> Reply:
    from runbook_kb import default_kb

    kb = kb or default_kb()
    evidence = [Evidence(_clip(r.text), r.answer, r.source, r.status if r.status in ("ok", "bad") else "neutral")
                for r in state.records]
    walked = [f"{kb.failure_modes[e].title}" + (" (ruled out)" if e in state.ruled_out else "") for e in state.visited]
    notes = [f"Walked: {' -> '.join(walked)}.", f"Triage token {state.token}."]
    if state.question is not None:
        q = state.question
        return Reply(title=f"Triage: {state.symptom}", severity="info", verdict=q.text, evidence=evidence,
                     actions=[Action(LABELS.get(c, c), f"triage answer {state.token} {q.id} {c}") for c in q.choices],
                     notes=notes)
    entry_id = state.conclusion["entry"]
    if entry_id is None:
        return Reply(title=f"Triage: {state.symptom}", severity="warning", verdict=state.conclusion["reason"][:1].upper() + state.conclusion["reason"][1:] + ".",
                     evidence=evidence, followups=[f"/kafka why {state.symptom}", "/kafka status"], notes=notes)
    entry = kb.failure_modes[entry_id]
    missing = state.facts.get("brokers", {}).get("missing")
    who = f" (broker {broker_list(missing)})" if entry_id == "broker-loss" and missing else (
        f" (broker {state.facts['suspect']})" if state.facts.get("suspect") and entry_id in ("slow-follower", "gc-pauses") else "")
    planned = " Planned maintenance: wait for it to return." if state.facts.get("maintenance") == "yes" else ""
    return Reply(title=f"Triage: {state.symptom}", severity="warning", verdict=f"{entry.title}{who}: {state.conclusion['reason']}.{planned}",
                 evidence=evidence, diagnoses=[diagnosis(kb, entry, reason="triage: " + state.conclusion["reason"])],
                 actions=_suggested(state, kb) + [Action(f"Runbook: {entry.title}", f"runbook {entry_id}")], notes=notes)


def _clip(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ---- terminal persistence and the commands -----------------------------------------------------

def _dir() -> Path:
    return Path(os.environ.get("KBOT_STATE_DIR") or "~/.kbot").expanduser() / "triage"


def save(state: TriageState) -> None:
    d = _dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)  # triage state names clusters and users: private
    now = time.time()
    for old in d.glob("*.json"):  # prune abandoned triages; cheap at this size
        if now - old.stat().st_mtime > KEEP_S:
            old.unlink(missing_ok=True)
    tmp = d / f".{state.token}.tmp"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(json.dumps(state.to_dict()))
    tmp.replace(d / f"{state.token}.json")  # atomic: a crash never leaves half a state


def load(token: str) -> TriageState:
    if not _TOKEN.match(token):  # also keeps the token from naming any other path
        raise BadInput(f"'{token[:20]}' is not a triage token.")
    try:
        return TriageState.from_dict(json.loads((_dir() / f"{token}.json").read_text()))
    except FileNotFoundError:
        raise BadInput(f"No triage {token} here (expired, or started elsewhere).", ["triage URP"]) from None


SPEC = CommandSpec(
    words=("triage",),
    summary="Guided triage: walk the runbook's steps for a symptom, answered from the cluster where it can, asking you the rest.",
    params=(Param("symptom", "what you see: URP, offline, NotEnoughReplicas ... (default: what the cluster shows)",
                  kind="text", required=False, rest=True),),
    examples=("triage URP", "triage", "triage hanging transaction"),
)
ANSWER_SPEC = CommandSpec(
    words=("triage", "answer"),
    summary="Answer a triage question and continue.",
    params=(Param("token", "the triage token"), Param("question", "the question id, e.g. q1"), Param("choice", "your answer")),
    examples=("triage answer 3f2a9c1b7d4e q1 no",),
)


async def _symptom_now(ctx: Context, request: CommandRequest) -> str | None:
    """The most urgent thing the cluster shows, as a symptom the runbook knows."""
    snap = await snapshot(await gateway(ctx, request.cluster), min_isr="all")
    cats = snap.by_category()
    for cat, symptom in (("Offline", "offline"), ("UnderMinIsr", "under min isr"), ("UnderReplicated", "URP")):
        if cats[cat]:
            return symptom
    return "URP" if snap.brokers.expected - snap.brokers.registered else None


async def run(request: CommandRequest, ctx: Context) -> Reply:
    symptom = request.args.get("symptom")
    if not symptom:
        symptom = await _symptom_now(ctx, request)
        if symptom is None:
            return Reply(title="Triage", severity="ok", verdict="The cluster shows nothing to triage: every partition is in sync.",
                         followups=["/kafka triage URP", "/kafka triage hanging transaction"])
    await ctx.progress(f"walking the runbook's triage for '{symptom}'")
    state = await start(str(symptom), ctx, request.cluster)
    save(state)
    return state.to_reply(ctx.kb)


async def run_answer(request: CommandRequest, ctx: Context) -> Reply:
    state = load(str(request.args["token"]))
    state = await answer(state, str(request.args["question"]), str(request.args["choice"]).lower(), ctx)
    save(state)
    return state.to_reply(ctx.kb)


COMMAND = Command(SPEC, run)
ANSWER = Command(ANSWER_SPEC, run_answer)
