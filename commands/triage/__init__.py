"""triage [symptom]: walk the runbook's triage steps for a symptom, answering from the cluster where it can.

state.py    the triage state: plain data (to_dict/from_dict), the question, the records
probes.py   what the cluster can answer, bound to steps by name from the runbook (PROBES)
engine.py   the walk: start(), answer(), steps and transitions between entries
view.py     the Reply a state shows (to_reply): answer buttons, or the conclusion and its actions
store.py    threads between answers, in the gate's sqlite state database
command.py  the `triage` and `triage answer` commands (COMMAND, ANSWER)

state = await start("URP", ctx)                  # runs every step it can answer
state = await answer(state, "q1", "no", ctx)     # the human's answer; continues
to_reply(state, ctx.kb)                          # question as Actions, or the diagnosis
"""

from __future__ import annotations

from commands.triage.command import ANSWER, ANSWER_SPEC, COMMAND, SPEC, run, run_answer
from commands.triage.engine import MAX_QUESTIONS, answer, start
from commands.triage.probes import PROBES, SHARE, LiveProbes, Probe
from commands.triage.state import LABELS, Conclusion, Outcome, Question, Record, TriageState
from commands.triage.store import KEEP_S, Stored, TriageStore, store_for
from commands.triage.view import to_reply

__all__ = [
    "ANSWER",
    "ANSWER_SPEC",
    "COMMAND",
    "KEEP_S",
    "LABELS",
    "MAX_QUESTIONS",
    "PROBES",
    "SHARE",
    "SPEC",
    "Conclusion",
    "LiveProbes",
    "Outcome",
    "Probe",
    "Question",
    "Record",
    "Stored",
    "TriageState",
    "TriageStore",
    "answer",
    "run",
    "run_answer",
    "start",
    "store_for",
    "to_reply",
]
