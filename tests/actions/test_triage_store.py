"""Triage threads in the gate's sqlite file (commands/triage/store.py): one file with the pending
actions, the old JSON threads imported once and left alone, and answers that race for the same
question settled by the database, not by luck."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from commands import triage
from commands.registry import ROUTER
from commands.registry import answer as dispatch
from commands.triage.store import KEEP_S, TriageStore
from framework.context import Context
from framework.router import BadInput
from gate.audit import AuditLog
from gate.confirmation import ConfirmationGate, PendingStore
from gate.state_db import StateDb


def gated(state_dir: Path) -> Context:
    """No cluster (every step is a question) and a real confirmation gate on ``state_dir``."""
    gate = ConfirmationGate(
        PendingStore(state_dir / "pending.sqlite3"), AuditLog(state_dir / "audit.jsonl"), router=ROUTER
    )
    return Context(gate=gate)


def rows(db: Path, sql: str) -> list[tuple]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


async def test_pending_actions_and_triage_threads_share_one_file(tmp_path):
    state = tmp_path / "state"
    ctx = gated(state)
    started = await dispatch("triage URP", ctx)
    token = started.reply.actions[0].command.split()[2]
    tables = {r[0] for r in rows(state / "pending.sqlite3", "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"pending", "messages", "triage_threads"} <= tables
    assert sorted(p.name for p in state.iterdir() if p.suffix == ".sqlite3") == ["pending.sqlite3"]
    ((doc, version),) = rows(state / "pending.sqlite3", "SELECT state, version FROM triage_threads")
    assert json.loads(doc)["token"] == token and version == 1
    assert rows(state / "pending.sqlite3", "PRAGMA journal_mode") == [("wal",)]


async def test_old_json_threads_are_imported_once_and_left_alone(tmp_path, caplog):
    """A thread an older version left in <state>/triage/<token>.json goes on from where it was."""
    state = tmp_path / "state"
    old = await triage.start("URP", Context())  # a walk waiting for its first answer, as it was saved then
    folder = state / "triage"
    folder.mkdir(parents=True)
    saved = folder / f"{old.token}.json"
    saved.write_text(json.dumps(old.to_dict()))
    junk = folder / "0123456789ab.json"
    junk.write_text("{not json")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    with caplog.at_level(logging.WARNING, logger="commands.triage.store"):
        answered = await dispatch(f"triage answer {old.token} q1 rules-out", gated(state))
    assert answered.outcome == "answered", answered.reply.verdict
    assert "Slow follower" in answered.reply.notes[0]  # broker-loss ruled out: the walk moved on
    imports = [r.getMessage() for r in caplog.records if "imported" in r.getMessage()]
    assert len(imports) == 1 and imports[0].startswith(f"imported 1 triage thread(s) from {folder}")
    assert "0123456789ab.json" in imports[0]  # the unreadable one is named, not imported, not touched
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before

    # Once: a later start-up neither imports again nor lets the old file overwrite the newer row.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="commands.triage.store"):
        stored = TriageStore.on(StateDb(state / "pending.sqlite3")).load(old.token)
    assert stored.version == 2 and stored.state.ruled_out == ["broker-loss"]
    assert not [r for r in caplog.records if "imported" in r.getMessage()]
    assert rows(state / "pending.sqlite3", "SELECT source, threads, skipped FROM triage_imports") == [
        (str(folder), 1, 1)
    ]


async def test_concurrent_answers_to_one_question_only_one_wins(tmp_path):
    """Eight clicks on the same answer at once (the Slack app runs requests concurrently, each
    on its own connection in a worker thread): one answer is applied, the others are told."""
    ctx = gated(tmp_path / "state")
    started = await dispatch("triage URP", ctx)
    command = started.reply.actions[0].command  # triage answer <token> q1 confirms
    results = await asyncio.gather(*(dispatch(command, ctx, user=f"U{i}") for i in range(8)))
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == ["answered"] + ["bad_input"] * 7, [r.reply.verdict for r in results]
    assert all("already answered" in r.reply.verdict for r in results if r.outcome == "bad_input")
    token = command.split()[2]
    stored = TriageStore.on(StateDb(tmp_path / "state" / "pending.sqlite3")).load(token)
    assert stored.version == 2 and [r.answer for r in stored.state.records] == ["you answered: It points here"]


async def test_a_save_from_a_stale_read_is_refused(tmp_path):
    store = TriageStore.on(StateDb(tmp_path / "pending.sqlite3"))
    state = await triage.start("URP", Context())
    store.save(state)
    first, second = store.load(state.token), store.load(state.token)
    store.save(first.state, first.version)
    with pytest.raises(BadInput, match="already answered"):
        store.save(second.state, second.version)


async def test_abandoned_threads_are_pruned(tmp_path):
    now = [1_000_000.0]
    store = TriageStore(StateDb(tmp_path / "pending.sqlite3").connect, clock=lambda: now[0])
    old, new = await triage.start("URP", Context()), await triage.start("offline", Context())
    store.save(old)
    now[0] += KEEP_S + 1
    store.save(new)
    with pytest.raises(BadInput, match="No triage"):
        store.load(old.token)
    assert store.load(new.token).state.symptom == "offline"
