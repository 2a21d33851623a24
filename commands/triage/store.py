"""Where triage threads are kept between answers: a ``triage_threads`` table in the bot's state
database, the same sqlite file as the confirmation gate's pending actions.

The database comes from the request's gate (``ctx.gate.state_db``: gate/state_db.py opens it,
private, WAL, every commit fsync'd): commands/ may not import bot/, so the store only knows
"something that opens sqlite connections". One row per thread: its key (the triage token), the
state as JSON (state.py), when it was last written, and a version. An answer is a
read-modify-write: the save succeeds only if the row still has the version that was read, so
two people clicking answers in the same thread at once cannot both win (the second is told the
question was already answered), and the Slack app's concurrent requests never interleave a
half-written state.

Older versions kept one JSON file per thread under ``<state dir>/triage/``. The first time a
store opens a database beside such a folder, it imports those files in one transaction, records
that it did (``triage_imports``), says so in one log line, and never touches the files: nothing
is lost, and the folder can be removed by hand once the import is trusted.

Without a gate (tests, the failure lab) the threads live in one in-memory database for the
process: a triage then lasts as long as the process.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from commands.triage.state import ALREADY_ANSWERED, TOKEN, TriageState
from framework.actions import StateDatabase
from framework.context import Context
from framework.router import BadInput

log = logging.getLogger(__name__)

KEEP_S = 7 * 86_400  # threads not written for this long are pruned
LEGACY_DIR = "triage"  # <state dir>/triage/<token>.json, before the threads moved into sqlite

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS triage_threads (
        thread_key TEXT PRIMARY KEY, state TEXT NOT NULL, updated_at REAL NOT NULL, version INTEGER NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS triage_threads_updated ON triage_threads(updated_at)",
    """CREATE TABLE IF NOT EXISTS triage_imports (
        source TEXT PRIMARY KEY, imported_at REAL NOT NULL, threads INTEGER NOT NULL, skipped INTEGER NOT NULL
    )""",
)

Connect = Callable[[], sqlite3.Connection]


@dataclass(frozen=True)
class Stored:
    state: TriageState
    version: int  # pass it back to save(): the save fails if someone else saved in between


class TriageStore:
    """Blocking sqlite calls: the command runs them in a worker thread (asyncio.to_thread)."""

    def __init__(
        self,
        connect: Connect,
        *,
        legacy_dir: Path | None = None,
        db_name: str = "memory",
        clock: Callable[[], float] = time.time,
    ):
        self._connect, self._clock, self.db_name = connect, clock, db_name
        with closing(self._connect()) as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            if legacy_dir is not None and legacy_dir.is_dir():
                self._import_json(conn, legacy_dir)

    @classmethod
    def on(cls, db: StateDatabase) -> TriageStore:
        return cls(db.connect, legacy_dir=db.path.parent / LEGACY_DIR, db_name=str(db.path))

    def load(self, token: str) -> Stored:
        if not TOKEN.match(token):  # user input: never more than a key, checked before any lookup
            raise BadInput(f"'{token[:20]}' is not a triage token.")
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT state, version FROM triage_threads WHERE thread_key = ?", (token,)).fetchone()
        if row is None:
            raise BadInput(f"No triage {token} here (expired, or started elsewhere).", ["triage URP"])
        return Stored(TriageState.from_dict(json.loads(row[0])), int(row[1]))

    def save(self, state: TriageState, version: int | None = None) -> int:
        """Write a new thread (``version`` None) or the next state of one read at ``version``;
        returns the version written. Abandoned threads are pruned on the way."""
        now = self._clock()
        doc = json.dumps(state.to_dict())
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")  # the write lock first: the version check and the write are one step
            try:
                conn.execute(
                    "DELETE FROM triage_threads WHERE updated_at < ? AND thread_key != ?", (now - KEEP_S, state.token)
                )
                if version is None:
                    conn.execute("INSERT INTO triage_threads VALUES (?, ?, ?, 1)", (state.token, doc, now))
                    written = 1
                else:
                    cur = conn.execute(
                        "UPDATE triage_threads SET state = ?, updated_at = ?, version = version + 1 "
                        "WHERE thread_key = ? AND version = ?",
                        (doc, now, state.token, version),
                    )
                    if cur.rowcount != 1:
                        raise BadInput(ALREADY_ANSWERED, ["triage " + state.symptom])
                    written = version + 1
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return written

    def _import_json(self, conn: sqlite3.Connection, folder: Path) -> None:
        """Once per folder: every <token>.json there becomes a row (an existing row wins)."""
        done = "SELECT 1 FROM triage_imports WHERE source = ?"
        if conn.execute(done, (str(folder),)).fetchone():  # the usual case, without taking the write lock
            return
        conn.execute("BEGIN IMMEDIATE")  # two processes starting at once import once
        try:
            if conn.execute(done, (str(folder),)).fetchone():
                conn.execute("COMMIT")
                return
            imported, skipped = 0, []
            for file in sorted(folder.glob("*.json")):
                try:
                    state = TriageState.from_dict(json.loads(file.read_text()))
                    if state.token != file.stem or not TOKEN.match(state.token):
                        raise ValueError("its name is not its triage token")
                    written = file.stat().st_mtime
                except (OSError, ValueError, TypeError, KeyError) as exc:
                    skipped.append(f"{file.name} ({type(exc).__name__}: {exc})"[:200])
                    continue
                cur = conn.execute(
                    "INSERT OR IGNORE INTO triage_threads VALUES (?, ?, ?, 1)",
                    (state.token, json.dumps(state.to_dict()), written),
                )
                imported += cur.rowcount
            conn.execute(
                "INSERT INTO triage_imports VALUES (?, ?, ?, ?)", (str(folder), self._clock(), imported, len(skipped))
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        log.warning(
            "imported %d triage thread(s) from %s into %s, once; the JSON files are left as they were%s",
            imported,
            folder,
            self.db_name,
            f" (not imported: {'; '.join(skipped)})" if skipped else "",
        )


_memory: TriageStore | None = None
_memory_lock = threading.Lock()


def _memory_store() -> TriageStore:
    global _memory
    with _memory_lock:
        if _memory is None:
            # A named shared-cache memory database lives while one connection to it is open: the
            # anchor below, kept for the life of the process.
            uri = f"file:kbot-triage-{uuid.uuid4().hex}?mode=memory&cache=shared"
            anchor = sqlite3.connect(uri, uri=True, check_same_thread=False)

            def connect() -> sqlite3.Connection:
                _ = anchor  # keeps the database alive as long as this function is
                return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)

            _memory = TriageStore(connect)
        return _memory


def store_for(ctx: Context) -> TriageStore:
    """The store in the gate's state database, or the process's in-memory one without a gate.
    Blocking (it may import old JSON threads): call it from a worker thread."""
    db = ctx.gate.state_db if ctx.gate is not None else None
    if db is not None:
        return TriageStore.on(db)
    return _memory_store()
