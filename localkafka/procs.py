"""Detached JVM processes tracked by pid files.

Why the ``sh -c '... &'`` launch: the JVM must outlive the Python process
that started it (``kbot cluster up`` exits right away) and must not become a
zombie child of a long-lived Python process (pytest) after a SIGKILL. The
shell is made a session leader (``start_new_session``), backgrounds the JVM
and exits, so the JVM is re-parented to init, sits in its own session and
process group, and ``$!`` is its pid.

Liveness never trusts a pid alone: ``/proc/<pid>/cmdline`` must contain the
node's marker (its properties file path), so a stale pid file whose pid was
reused by another program reads as "dead".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

# /proc/<pid>/stat state letters
_STOPPED = {"T", "t"}
_GONE = {"Z", "X"}


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_state(pid: int) -> str | None:
    """The kernel state letter of ``pid`` or None if it does not exist."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    # "pid (comm) S ..." - comm may contain spaces/parens, so split at the last ')'
    return raw[raw.rfind(b")") + 2 :].split(b" ", 1)[0].decode()


def matches(pid: int, marker: str) -> bool:
    cmdline = _read(f"/proc/{pid}/cmdline")
    return cmdline is not None and marker.encode() in cmdline


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def live_pid(pid_file: Path, marker: str) -> int | None:
    """The pid from ``pid_file`` if that process exists (running or stopped,
    not a zombie) and is really ours; else None (stale pid files are removed)."""
    pid = read_pid(pid_file)
    if pid is None:
        return None
    state = proc_state(pid)
    if state is None or state in _GONE or not matches(pid, marker):
        pid_file.unlink(missing_ok=True)
        return None
    return pid


def is_stopped(pid: int) -> bool:
    return proc_state(pid) in _STOPPED


def spawn(argv: list[str], log_file: Path, pid_file: Path, env: dict | None = None) -> int:
    """Start ``argv`` detached, stdout+stderr appended to ``log_file``; ``env``: the child's whole
    environment (None: this process's, inherited)."""
    script = 'log=$1; shift; exec "$@" >>"$log" 2>&1 </dev/null & echo $!'
    out = subprocess.run(
        ["sh", "-c", script, "sh", str(log_file), *argv],
        env=env,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=True,
        timeout=30,
    )
    pid = int(out.stdout.strip())
    pid_file.write_text(f"{pid}\n")
    return pid


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def is_gone(pid: int) -> bool:
    """True once the process and all its threads have exited. A JVM's main
    thread can already show as a zombie while other threads are still
    exiting and holding its sockets open, so a zombie only counts as gone
    when no other task is left in /proc/<pid>/task."""
    state = proc_state(pid)
    if state is None:
        return True
    if state not in _GONE:
        return False
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.1)
    return is_gone(pid)


def terminate(pids: list[int], grace: float = 20.0) -> None:
    """SIGCONT (a SIGSTOPped JVM can't act on SIGTERM), SIGTERM, wait up to
    ``grace`` seconds, then SIGKILL whatever is left. Handles several pids at
    once so brokers shut down in parallel."""
    for pid in pids:
        signal_pid(pid, signal.SIGCONT)
        signal_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for pid in pids:
        if not wait_gone(pid, max(0.0, deadline - time.monotonic())):
            signal_pid(pid, signal.SIGKILL)
            wait_gone(pid, 10.0)


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
