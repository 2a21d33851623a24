"""What a triage state shows: the open question as answer buttons, or the conclusion with the
gated actions it suggests. Transport-neutral (a Reply), like every command's answer."""

from __future__ import annotations

from commands.triage.state import LABELS, TriageState
from diagnosis.entries import diagnosis, hold_unconfirmed
from diagnosis.entry_ids import BROKER_LOSS, GC_PAUSES, HANGING_TRANSACTION, LOG_DIR_FAILURE, SLOW_FOLLOWER
from diagnosis.snapshot import broker_list
from framework.reply import Action, Evidence, Reply
from runbook_kb import KnowledgeBase, default_kb

THROTTLE_KEY = "reassignment_throttle_bytes_per_s"  # broker-loss's threshold for re-replication


def _suggested(state: TriageState, kb: KnowledgeBase) -> list[Action]:
    """Gated actions the conclusion suggests, as exact commands; the gate previews them first."""
    entry = state.conclusion["entry"] if state.conclusion else None
    f = state.facts
    out: list[Action] = []
    if entry in (BROKER_LOSS, SLOW_FOLLOWER, GC_PAUSES, LOG_DIR_FAILURE):
        missing = f.get("brokers", {}).get("missing")
        when = f"After broker {broker_list(missing)} is back: " if missing else ""
        out += [
            Action(f"{when}elect preferred leaders on {t}", f"elect-leaders {t}", mutating=True)
            for t in f.get("brokers", {}).get("not_preferred", [])[:3]
        ]
        if entry == BROKER_LOSS and f.get("maintenance") == "no":
            rate = kb.failure_modes[BROKER_LOSS].checks.thresholds[THROTTLE_KEY]
            rate_text = f"{rate / 1e6:g}MB/s"  # the throttle command reads MB as 1000^2
            out.append(
                Action(
                    f"If it will not come back: throttle re-replication ({rate_text})",
                    f"throttle set {rate_text}",
                    mutating=True,
                )
            )
    if entry == HANGING_TRANSACTION:
        out += [
            Action(
                f"Abort producer {p['producer_id']} on {p['topic']}-{p['partition']}",
                f"abort-txn {p['topic']} {p['partition']} --producer-id {p['producer_id']}",
                mutating=True,
            )
            for p in f.get("hanging", {}).get("producers", [])[:3]
        ]
    return out


def to_reply(state: TriageState, kb: KnowledgeBase | None = None) -> Reply:
    kb = kb or default_kb()
    evidence = [
        Evidence(
            _clip(r.text), r.answer, r.source, "ok" if r.status == "ok" else "bad" if r.status == "bad" else "neutral"
        )
        for r in state.records
    ]
    walked = [f"{kb.failure_modes[e].title}" + (" (ruled out)" if e in state.ruled_out else "") for e in state.visited]
    notes = [f"Walked: {' -> '.join(walked)}.", f"Triage token {state.token}."]
    title = f"Triage: {state.symptom}"
    if state.question is not None:
        q = state.question
        return Reply(
            title=title,
            severity="info",
            verdict=q.text,
            evidence=evidence,
            actions=[Action(LABELS.get(c, c), f"triage answer {state.token} {q.id} {c}") for c in q.choices],
            notes=notes,
        )
    if state.conclusion is None:  # the walk always ends with a question or a conclusion
        raise ValueError(f"triage {state.token} has neither a question nor a conclusion")
    entry_id, reason = state.conclusion["entry"], state.conclusion["reason"]
    if entry_id is None:
        return Reply(
            title=title,
            severity="warning",
            verdict=reason[:1].upper() + reason[1:] + ".",
            evidence=evidence,
            followups=[f"/kafka why {state.symptom}", "/kafka status"],
            notes=notes,
        )
    entry = kb.failure_modes[entry_id]
    missing = state.facts.get("brokers", {}).get("missing")
    who = (
        f" (broker {broker_list(missing)})"
        if entry_id == BROKER_LOSS and missing
        else (
            f" (broker {state.facts['suspect']})"
            if state.facts.get("suspect") and entry_id in (SLOW_FOLLOWER, GC_PAUSES)
            else ""
        )
    )
    planned = " Planned maintenance: wait for it to return." if state.facts.get("maintenance") == "yes" else ""
    # the walk ends on the engineer's answers, not on evidence that confirms the cause: the steps
    # that move data or weaken durability wait for `why`, which reads that evidence
    found, held = hold_unconfirmed(diagnosis(kb, entry, reason="triage: " + reason))
    if held:
        notes = [
            *notes,
            "Not advised on a triage walk: " + "; ".join(held) + ". The runbook gives these only once "
            f"the cause is confirmed: `/kafka why {state.symptom}` reads the evidence that would.",
        ]
    return Reply(
        title=title,
        severity="warning",
        verdict=f"{entry.title}{who}: {reason}.{planned}",
        evidence=evidence,
        diagnoses=[found],
        actions=_suggested(state, kb) + [Action(f"Runbook: {entry.title}", f"runbook {entry_id}")],
        notes=notes,
        more_command=f"runbook {entry_id} --full",  # the whole entry the triage ended at
    )


def _clip(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
