"""`kbot lab chaos`: a seeded campaign of random, composed faults, judged as an engineer would.

The lab's modes stage one fault at a time on a calm cluster, and rules written against them pass
them. A real incident is not staged: the broker is any broker, two things break at once, or the
fault lands while the cluster still recovers from the last one. A campaign draws, from a seed,
trials of three shapes:

- single: one fault (a lab mode, or a broker fault on a broker drawn at random);
- pair: two faults at once, on different brokers, at most one of which takes a broker away;
- recovery: a broker killed and started again, and a second fault injected while it catches up.

Each trial asks the faults' own questions and `status`, after a short random delay, then judges
the answers (:func:`judge_trial`): the first answer's top cause is one the active faults explain,
every fault's entity is named somewhere, no answer says OK / Healthy while a fault is in place, and
no first step moves data or weakens durability for a cause the faults do not explain. Every trial
has a seed of its own (``<campaign seed>:<trial>``), so one trial can be rerun alone.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from lab import chaos_faults, probes
from lab.ask import Asker
from lab.chaos_faults import Fault
from lab.judge import answer_text, names
from lab.mode import Facts, Mode
from lab.modes import by_name
from lab.runner import delete_topics, heal_mode, public, unavailable

BROKERS = (101, 102, 103)

# The brokers each lab mode holds (fixed in its module), and whether it takes one away (killed,
# halted or cut off): two faults never share a broker, and a pair takes at most one away (two
# brokers gone of three is a third failure, not the sum of two).
MODE_BROKERS: dict[str, tuple[frozenset[int], bool]] = {
    "broker-loss": (frozenset({102}), True),
    "paused-broker": (frozenset({103}), True),
    "under-min-isr": (frozenset({103}), True),
    "min-isr-equals-rf": (frozenset({103}), True),
    "offline-partitions": (frozenset({103}), True),
    "reassignment-throttled": (frozenset({101, 102, 103}), False),
    "hanging-transaction": (frozenset(), False),
    "producer-fencing": (frozenset(), False),
    "hot-partition": (frozenset(), False),
    "rebalance-storm": (frozenset(), False),
    "consumer-stop": (frozenset(), False),
    "flapping-broker": (frozenset({103}), True),
    "one-dir-halt": (frozenset({102}), True),
    "handler-saturation": (frozenset({101}), False),
}
# Client-side faults a healthy cluster's `status` rightly calls healthy: the brokers are fine, an
# application is not. Every other fault must show in `status` (issue: each active finding).
CLIENT_SIDE = frozenset({"producer-fencing", "hot-partition", "rebalance-storm", "consumer-stop"})
# Modes a campaign draws alone but never pairs: their own heal restarts brokers or resets
# machine-wide state, or they take minutes to reproduce.
SINGLE_ONLY = frozenset({"flapping-broker", "one-dir-halt", "handler-saturation", "reassignment-throttled"})
SLOW = frozenset({"handler-saturation"})  # ~100 s to reproduce: only with --slow

# What an answer must never say while a fault is in place.
ALL_CLEAR = re.compile(r"^\s*(\[ok\]\s*)?(healthy|no under-replicated|nothing (is )?wrong)\b", re.IGNORECASE)


def _from_mode(mode: Mode) -> Fault:
    brokers, takes = MODE_BROKERS[mode.name]
    return Fault(
        name=mode.name,
        expect=frozenset({mode.expect_entry} if mode.expect_entry else set()),
        questions=mode.questions,
        brokers=brokers,
        takes_broker=takes,
        inject=mode.inject,  # type: ignore[arg-type]
        wait=mode.wait_for_symptom,
        heal=mode.heal,
        named=mode.named,
        topics=mode.topics,
        mode=mode,
        expect_verdict="" if mode.expect_entry else mode.expect_verdict,
        in_status=mode.name not in CLIENT_SIDE,
    )


def _signalled(broker: int, rng: random.Random, kind: str, send: Callable[[Any, int], Any], gone: bool) -> Fault:
    """A signal to a broker drawn at random, with a topic of its own on all three brokers; the
    symptom is the broker out of every ISR of that topic (and, when ``gone``, out of the cluster)."""
    topic = f"lab-chaos-{kind}-{rng.randrange(1 << 30):x}"

    def inject(cluster) -> Facts:
        cluster.faults.create_topic(topic, partitions=3, replication_factor=3, timeout=90)
        send(cluster, broker)
        return {"broker_id": broker, "topic": topic, "topics": [topic]}

    def wait(cluster, facts):
        return cluster.faults.wait_for(
            lambda: (
                (not gone or probes.not_registered(cluster, broker))
                and len(probes.isr_lacks(cluster, topic, broker)) == 3
            ),
            90,
            f"broker {broker} out of the ISRs of {topic}" + (" and of the cluster" if gone else ""),
        )

    def heal(cluster, facts):
        if not gone and cluster.brokers[broker].pid():
            cluster.faults.resume_broker(broker)

    return Fault(
        name=f"{kind}-{broker}",
        # a paused JVM looks like a GC pause, a starved broker or a dead one until it resumes
        expect=frozenset({"broker-loss"} if gone else {"gc-pauses", "broker-loss", "starved-broker"}),
        questions=("why URP",),
        brokers=frozenset({broker}),
        takes_broker=True,
        inject=inject,
        wait=wait,
        heal=heal,
        named=lambda f: [f["broker_id"]],
        topics=(topic,),
    )


def kill_fault(broker: int, rng: random.Random) -> Fault:
    """SIGKILL a broker drawn at random (a crash, a pulled plug)."""
    return _signalled(broker, rng, "kill", lambda cluster, b: cluster.faults.kill_broker(b), gone=True)


def pause_fault(broker: int, rng: random.Random) -> Fault:
    """SIGSTOP a broker drawn at random past its session timeout (a long stop-the-world pause)."""
    return _signalled(broker, rng, "pause", lambda cluster, b: cluster.faults.pause_broker(b), gone=False)


def reassignment_target_dies(mode: Mode) -> Fault:
    """The lab's throttled reassignment (102 -> 103 on lab-reassign), then its target killed: the
    move can no longer finish, and the answer must say so beside the broker loss."""
    base = _from_mode(mode)
    target = 103

    def inject(cluster) -> Facts:
        facts = mode.inject(cluster) or {}  # type: ignore[misc]
        if mode.wait_for_symptom is not None:
            mode.wait_for_symptom(cluster, facts)
        cluster.faults.kill_broker(target)
        return {**facts, "broker_id": target}

    def wait(cluster, facts):
        return cluster.faults.wait_for(
            lambda: probes.not_registered(cluster, target), 90, f"reassignment target {target} out of the cluster"
        )

    return Fault(
        name="reassignment-target-dies",
        expect=frozenset({"reassignment", "stalled-reassignment", "broker-loss"}),
        questions=("why URP",),
        brokers=frozenset({101, 102, 103}),
        takes_broker=True,
        inject=inject,
        wait=wait,
        heal=base.heal,
        named=lambda f: [f["topic"], f["broker_id"]],
        topics=base.topics,
    )


@dataclass
class Trial:
    index: int
    seed: str
    shape: str  # single / pair / recovery
    faults: list[Fault]
    recovering: int | None = None  # the broker restarted just before the faults (recovery shape)
    delay_s: float = 0.0  # between the symptom and the first question


def draw_trial(seed: int, index: int, *, slow: bool = False, modes: dict[str, Mode] | None = None) -> Trial:
    """Trial ``index`` of campaign ``seed``: the same on every machine (a string seed is hashed the
    same way in every process)."""
    trial_seed = f"{seed}:{index}"
    rng = random.Random(trial_seed)
    available = modes if modes is not None else runnable_modes(slow)
    shape = rng.choices(("single", "pair", "recovery"), weights=(6, 3, 2))[0]
    delay = round(rng.uniform(0.0, 5.0), 1)

    def any_fault(exclude: frozenset[int] = frozenset(), pairable: bool = False, keep: bool = True) -> Fault:
        """A lab mode, or (two times in five) a broker fault on a broker drawn at random."""
        modes: list[Callable[[], Fault]] = []
        for name, mode in sorted(available.items()):
            brokers, takes = MODE_BROKERS[name]
            if pairable and name in SINGLE_ONLY:
                continue
            if brokers & exclude or (takes and not keep):
                continue
            modes.append(lambda mode=mode: _from_mode(mode))
        free = [b for b in BROKERS if b not in exclude]
        broker_faults: list[Callable[[], Fault]] = []
        if free and keep:
            broker_faults = [lambda: kill_fault(rng.choice(free), rng), lambda: pause_fault(rng.choice(free), rng)]
        if free and chaos_faults.cpu_cgroup_unavailable() is None:
            broker_faults.append(lambda: chaos_faults.starve(rng.choice(free), rng))
        clients: list[Callable[[], Fault]] = [
            lambda: chaos_faults.quota(rng),
            lambda: chaos_faults.deleted_unread(rng),
            lambda: chaos_faults.slow_consumer(rng),
        ]
        if not pairable and "reassignment-throttled" in available and not exclude:
            modes.append(lambda: reassignment_target_dies(available["reassignment-throttled"]))
        draw = rng.random()
        if broker_faults and draw < 0.35:
            pool = broker_faults
        elif draw < 0.55 or not modes:
            pool = clients
        else:
            pool = modes
        return rng.choice(pool)()

    if shape == "single":
        return Trial(index, trial_seed, shape, [any_fault()], delay_s=delay)
    if shape == "pair":
        first = any_fault(pairable=True)
        second = any_fault(exclude=first.brokers, pairable=True, keep=not first.takes_broker)
        return Trial(index, trial_seed, shape, [first, second], delay_s=delay)
    recovering = rng.choice(BROKERS)
    fault = any_fault(exclude=frozenset({recovering}), pairable=True)
    return Trial(index, trial_seed, shape, [fault], recovering=recovering, delay_s=delay)


def runnable_modes(slow: bool = False) -> dict[str, Mode]:
    """The lab modes a campaign draws from on this machine."""
    out = {}
    for name, mode in by_name().items():
        if name not in MODE_BROKERS or mode.topology != "standard" or unavailable(mode) is not None:
            continue
        if name in SLOW and not slow:
            continue
        out[name] = mode
    return out


# ---- judging ------------------------------------------------------------------------------------


@dataclass
class TrialJudgement:
    top1: list[str | None]  # the top cause of each fault's first question
    top1_ok: bool
    named_missing: list[str] = field(default_factory=list)
    said_ok: list[str] = field(default_factory=list)  # questions answered OK / Healthy during the fault
    harmful: list[str] = field(default_factory=list)  # first steps that move data on a cause not in place

    @property
    def passed(self) -> bool:
        return self.top1_ok and not self.named_missing and not self.said_ok and not self.harmful

    def failures(self) -> list[str]:
        out = []
        if not self.top1_ok:
            out.append(f"top-1 {', '.join(str(t) for t in self.top1)}")
        if self.named_missing:
            out.append(f"does not name {', '.join(self.named_missing)}")
        out += [f"said OK to {q!r}" for q in self.said_ok]
        out += [f"harmful first step: {h}" for h in self.harmful]
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed, "failures": self.failures()}


@dataclass(frozen=True)
class Expectation:
    """What one fault's first question must be answered with."""

    question: str
    verdict: str = ""  # a fault whose right answer is a verdict, not an entry (consumers that stopped)


def said_all_clear(reply: dict) -> bool:
    """The answer reads as 'nothing is wrong': severity ok, or a verdict that opens with it."""
    return reply.get("severity") == "ok" or bool(ALL_CLEAR.match(reply.get("verdict") or ""))


def top_entry(reply: dict) -> str | None:
    diagnoses = reply.get("diagnoses") or []
    return diagnoses[0]["entry_id"] if diagnoses else None


def first_step(reply: dict) -> dict | None:
    diagnoses = reply.get("diagnoses") or []
    steps = diagnoses[0].get("mitigation") if diagnoses else None
    return steps[0] if steps else None


def judge_trial(
    expect: set[str],
    firsts: list[Expectation],
    named: list[str],
    answers: list[tuple[str, dict]],
    status_must_show: bool = True,
) -> TrialJudgement:
    """``answers``: (question, Reply.to_dict()) in the order asked. Each fault's first question must
    lead with a cause the trial's faults explain (``expect``: with two at once, either one's cause
    may lead), or say the fault's verdict; every entity of ``named`` appears in some answer; no answer
    says all is well (`status` only when ``status_must_show``: a client's fault leaves the cluster
    healthy); no first step moves data or weakens durability for a cause not in ``expect``."""
    by_question = dict(answers)
    tops, ok = [], True
    for want in firsts:
        reply = by_question.get(want.question, {})
        top = top_entry(reply)
        tops.append(top)
        said = want.verdict and want.verdict.lower() in (reply.get("verdict") or "").lower()
        ok = ok and (top in expect or bool(said))
    text = "\n".join(answer_text(r) for _q, r in answers)
    missing = [n for n in named if not names(text, n)]
    said_ok = [q for q, r in answers if said_all_clear(r) and (q != "status" or status_must_show)]
    harmful = []
    for q, r in answers:
        step = first_step(r)
        if step and (step.get("destroys_data") or (step.get("confirmed_only") and top_entry(r) not in expect)):
            harmful.append(f"{q!r}: {step.get('text', '')[:120]}")
    return TrialJudgement(tops, ok, missing, said_ok, harmful)


# ---- running ------------------------------------------------------------------------------------


def _questions(trial: Trial, facts: list[Facts]) -> list[str]:
    out: list[str] = []
    for fault, f in zip(trial.faults, facts):
        for q in fault.questions:
            text = q.format(**f)
            if text not in out:
                out.append(text)
    out.append("status")
    return out


async def _ask(cluster, questions: list[str]) -> list[tuple[str, dict, float]]:
    asker = Asker(cluster)
    try:
        asked = [await asker.ask(q) for q in questions]
    finally:
        await asker.close()
    return [(a.question, a.reply, a.seconds) for a in asked]


def _heal(cluster, trial: Trial, facts: list[Facts]) -> None:
    """Each fault's own undo, its topics deleted, then the cluster back to healthy."""
    for fault, f in zip(trial.faults, facts):
        try:
            if fault.mode is not None:
                heal_mode(cluster, fault.mode, f)
                continue
            if fault.heal is not None:
                fault.heal(cluster, f)
            topics = sorted(set(f.get("topics") or []) | set(fault.topics))
            if topics:
                delete_topics(cluster, topics)
        except Exception:  # noqa: BLE001 - the generic heal below still runs
            pass
    cluster.faults.heal(timeout=180)


def run_trial(cluster, trial: Trial) -> dict:
    """Inject the trial's faults from outside, wait for each symptom, ask, judge, heal."""
    result: dict = {
        "trial": trial.index,
        "seed": trial.seed,
        "shape": trial.shape,
        "faults": [f.name for f in trial.faults],
        "recovering": trial.recovering,
        "reproduced": False,
        "answers": [],
        "judgement": None,
        "error": None,
    }
    facts: list[Facts] = []
    t0 = time.monotonic()
    try:
        if trial.recovering is not None:  # killed, then started: it rejoins while the next fault lands
            b = trial.recovering
            cluster.faults.kill_broker(b)
            cluster.start_node(cluster.brokers[b])
            # serving, not registered: a killed broker's registration outlives it until its session
            # expires (trial 2911:17's quota, set through the user's client right after, was refused)
            cluster.faults.wait_for(lambda: cluster.serves(b), 90, f"broker {b} serving again")
        for fault in trial.faults:
            facts.append(fault.inject(cluster) or {})
        for fault, f in zip(trial.faults, facts):
            if fault.wait is not None:
                seen = fault.wait(cluster, f)
                if isinstance(seen, dict):
                    f.update(seen)
        result["facts"] = [public(f) for f in facts]
        result["reproduced"] = True
        result["symptom_seconds"] = round(time.monotonic() - t0, 1)
        time.sleep(trial.delay_s)  # the trial's timing: when the engineer happens to ask
        asked = asyncio.run(_ask(cluster, _questions(trial, facts)))
        result["answers"] = [
            {"question": q, "seconds": s, "severity": r.get("severity"), "verdict": r.get("verdict"), "reply": r}
            for q, r, s in asked
        ]
        expect: set[str] = set().union(*(f.expect for f in trial.faults))
        firsts = [
            Expectation(fault.questions[0].format(**f), fault.expect_verdict) for fault, f in zip(trial.faults, facts)
        ]
        named = [str(n) for fault, f in zip(trial.faults, facts) for n in fault.named(f)]
        # a restarted broker may have caught up by the time `status` is asked: healthy is then right
        in_status = any(f.in_status for f in trial.faults)
        result["judgement"] = judge_trial(
            expect, firsts, named, [(q, r) for q, r, _s in asked], status_must_show=in_status
        ).to_dict()
    except Exception as exc:  # noqa: BLE001 - a trial that could not be staged is reported, not raised
        result["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
    finally:
        _heal(cluster, trial, facts)
        result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def run_campaign(
    cluster,
    seed: int,
    trials: int,
    *,
    only: int | None = None,
    slow: bool = False,
    progress: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Every trial of the campaign (or trial ``only``), in order, on a running lab cluster."""
    modes = runnable_modes(slow)
    out = []
    for i in [only] if only is not None else range(trials):
        res = run_trial(cluster, draw_trial(seed, i, slow=slow, modes=modes))
        out.append(res)
        if progress is not None:
            progress(res)
    return out


def summary(results: list[dict]) -> dict:
    judged = [r for r in results if r["judgement"]]
    return {
        "trials": len(results),
        "judged": len(judged),
        "not_staged": len(results) - len(judged),
        "passed": sum(r["judgement"]["passed"] for r in judged),
        "top1_right": sum(r["judgement"]["top1_ok"] for r in judged),
        "said_ok_during_fault": sum(bool(r["judgement"]["said_ok"]) for r in judged),
        "harmful_first_steps": sum(bool(r["judgement"]["harmful"]) for r in judged),
    }


def table(results: list[dict]) -> str:
    """A Markdown table, one row a trial (what docs/chaos.md holds)."""
    rows = [
        "| trial | seed | shape | faults | top-1 | result | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        j = r["judgement"]
        faults = " + ".join(r["faults"]) + (f" (after {r['recovering']} restarted)" if r["recovering"] else "")
        verdict = r["error"] or ("pass" if j["passed"] else "FAIL: " + "; ".join(j["failures"]))
        top1 = ", ".join(str(t) for t in j["top1"]) if j else "-"
        rows.append(
            f"| {r['trial']} | `{r['seed']}` | {r['shape']} | {faults} | {top1} | {verdict.replace('|', '/')} | {r['seconds']} |"
        )
    return "\n".join(rows)
