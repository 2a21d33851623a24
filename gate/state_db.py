"""The bot's one state database: ``<state dir>/pending.sqlite3``, opened one way for everyone.

The confirmation gate's pending actions (gate/confirmation.py) and the guided triage's threads
(commands/triage/store.py) share this file, so the Slack server and a terminal on the same host
see the same state, and one folder holds it all. Opening it:

* private before sqlite creates it: the folder 0700 and the file 0600 (``private_dir`` /
  ``private_file``); sqlite gives its -wal and -shm files the database file's mode;
* WAL, so readers never wait for the writer and concurrent requests of the Slack app (each on
  its own short connection, in worker threads) and other processes do not corrupt or block it;
  a writer waits up to ``BUSY_TIMEOUT_S`` for another's transaction instead of failing;
* ``synchronous=FULL``: every commit is fsync'd, so a confirmed action or an answered question
  survives a crash.

The triage store lives in commands/, which may not import bot/: it receives the ``StateDb`` from
the gate (``ConfirmationGate.state_db``) through the request's context.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gate.files import private_dir, private_file

FILENAME = "pending.sqlite3"  # the name predates the triage tables; kept so existing state is found
BUSY_TIMEOUT_S = 30.0


class StateDb:
    """One sqlite file; ``connect()`` gives a new short-lived connection (the caller closes it)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        private_dir(self.path.parent)
        private_file(self.path)
        for extra in ("-wal", "-shm"):  # left wider by an older version
            side = self.path.with_name(self.path.name + extra)
            if side.exists():
                private_file(side)

    def connect(self) -> sqlite3.Connection:
        # isolation_level=None: statements autocommit unless a caller opens a transaction itself
        # (BEGIN IMMEDIATE for read-modify-write), so no implicit transaction is left open.
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # fsync at every commit
        return conn

    def __repr__(self) -> str:
        return f"StateDb({str(self.path)!r})"


def state_db(state_dir: Path) -> StateDb:
    """The state database in ``state_dir`` (KBOT_STATE_DIR)."""
    return StateDb(Path(state_dir) / FILENAME)
