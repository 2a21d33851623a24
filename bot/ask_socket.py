"""One-shot `kbot ask` through the running bot: the protocol and the client (standard library only).

When `kbot run` or `kbot serve` runs, it listens on a Unix socket in the state folder
(bot/ask_server.py). A `kbot ask` then hands its question over and prints the answer the warm bot
gives - its live part and its lake part - instead of starting the bot's machinery itself: a second
Python process importing the whole bot costs more than the answer.

Security: the socket is 0600 in the 0700 state folder, and the server serves only a peer whose
uid (SO_PEERCRED) is its own. The client refuses a socket that is not its own user's.

Protocol: the client sends one JSON line, {"v": 1, "text": ..., "json": bool, "tty": bool,
"bootstrap": its KBOT_BOOTSTRAP or null}; the
server answers with JSON lines: {"accepted": true} at once, then {"out": text} pieces to print as
they come (the live answer, then the lake's part), and {"exit": code} last. No accept within
ACCEPT_S (a stale socket, a bot too busy) and the client answers in its own process, with a note;
so does a connection lost before the exit line.

This module is imported on the one-shot path before anything else of the bot: keep it to the
standard library.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

VERSION = 1
SOCKET_NAME = "ask.sock"
#: how long a client waits for the bot to take its question before answering in its own process
ACCEPT_S = 5.0
#: how long it waits for the rest of the answer (the lake's part included) once taken: past the
#: lake's own query timeout (KBOT_LAKE_TIMEOUT_S, 30 s by default), so the bot answers first
ANSWER_S = 120.0


class NotServed(Exception):
    """The running bot did not answer this question; the message says why (for the note)."""


def socket_path(state_dir: Path) -> Path:
    return Path(state_dir).expanduser() / SOCKET_NAME


def _own_socket(path: Path) -> bool:
    """The path is a socket of this user's, in a folder only this user can enter."""
    try:
        st = path.lstat()
        folder = path.parent.stat()
    except OSError:
        return False
    uid = os.getuid()
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == uid and folder.st_uid == uid and not folder.st_mode & 0o077


def ask(
    path: Path,
    text: str,
    *,
    as_json: bool,
    tty: bool,
    write=None,
    bootstrap: str | None = None,
    accept_s: float = ACCEPT_S,
    answer_s: float = ANSWER_S,
) -> int | None:
    """Ask the running bot at ``path``; ``write`` gets each piece of the answer as it comes (stdout
    by default). Returns its exit code; None when no bot listens there (no socket file: answer in
    this process, nothing to say); raises NotServed when one should but did not answer.
    ``bootstrap``: the cluster this process is configured for (KBOT_BOOTSTRAP), if any: a bot
    that talks to another one does not answer for it."""
    if not path.exists():
        return None
    if not _own_socket(path):
        raise NotServed(f"{path} is not this user's socket in a private folder; not using it")
    out = write or _stdout
    deadline = time.monotonic() + accept_s  # for the accept; once accepted, for the whole answer
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(accept_s)
        try:
            sock.connect(str(path))
            request = {"v": VERSION, "text": text, "json": as_json, "tty": tty, "bootstrap": bootstrap}
            sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise NotServed(f"the running bot's socket does not answer ({exc.strerror or exc})") from None
        reader = sock.makefile("rb")
        printed = False
        accepted = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotServed(_late(accepted, printed, accept_s, answer_s))
            sock.settimeout(left)
            try:
                line = reader.readline()
            except TimeoutError:
                raise NotServed(_late(accepted, printed, accept_s, answer_s)) from None
            except OSError as exc:
                raise NotServed(f"the running bot's connection failed ({exc})") from None
            if not line:
                raise NotServed(
                    "the running bot closed the connection before its answer was complete"
                    + ("; what it printed above is incomplete" if printed else "")
                )
            msg = json.loads(line)
            if msg.get("accepted"):
                accepted = True
                deadline = time.monotonic() + answer_s
            elif "out" in msg:
                out(msg["out"])
                printed = True
            elif "exit" in msg:
                return int(msg["exit"])
            elif "error" in msg:
                raise NotServed(str(msg["error"]))
    finally:
        sock.close()


def _late(accepted: bool, printed: bool, accept_s: float, answer_s: float) -> str:
    if not accepted:
        return f"the running bot did not take the question within {accept_s:g}s (busy, or a stale socket)"
    return f"the running bot did not finish its answer within {answer_s:g}s" + (
        "; what it printed above is incomplete" if printed else ""
    )


def _stdout(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()
