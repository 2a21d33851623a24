"""Where the bot's log lines go in a terminal.

A person at a prompt reads answers, not tracebacks: in the console, `kbot ask` and `kbot run`
without Slack tokens, every log record goes in full (tracebacks included) to a private log file
in the state folder, and a warning or error reaches the screen as one short line that names that
file. A server (`kbot serve`, `kbot run` with Slack) keeps logging to stderr, where its
supervisor collects it.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from gate.audit import RedactingFilter
from gate.files import private_dir, private_file

LOG_FILE = "kbot.log"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLine(logging.Formatter):
    """A record as one short line for the screen: no traceback, no stack, the log file named."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def format(self, record: logging.LogRecord) -> str:
        message = " ".join(record.getMessage().split())
        if len(message) > 300:
            message = message[:299] + "…"
        detail = f" (details in {self.path})" if record.exc_info or record.levelno >= logging.ERROR else ""
        return f"kbot: {record.levelname.lower()}: {message}{detail}"


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever sys.stderr is when it emits (the console's spinner and
    test captures replace it), not to the stream it found when it was made."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def log_to_screen(level: str) -> None:
    """A server's logging: every record on stderr, as it comes."""
    logging.basicConfig(level=level, stream=sys.stderr, format=_FORMAT)


def log_to_file(level: str, state_dir: Path, secrets: tuple[str, ...] = ()) -> Path | None:
    """A terminal's logging: records at ``level`` in full to ``state_dir``/kbot.log (0600, rotated
    at 5 MB, 3 kept), warnings and errors as one line on stderr. Returns the file, or None when it
    cannot be written (then everything goes to stderr as before, so nothing is lost)."""
    try:
        path = private_file(private_dir(state_dir) / LOG_FILE)
        to_file: logging.Handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=5_000_000, backupCount=3, encoding="utf-8"
        )
    except OSError as exc:
        log_to_screen(level)
        logging.getLogger(__name__).warning("cannot write the log file in %s: %s", state_dir, exc)
        return None
    to_file.setFormatter(logging.Formatter(_FORMAT))
    to_file.addFilter(RedactingFilter(secrets))
    to_screen = _Stderr()
    to_screen.setLevel(logging.WARNING)
    to_screen.setFormatter(OneLine(path))
    to_screen.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    root.setLevel(level)
    for handler in [h for h in root.handlers if getattr(h, "_kbot_terminal", False)]:  # called again in one process
        root.removeHandler(handler)
        handler.close()
    for handler in (to_file, to_screen):
        handler._kbot_terminal = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    return path
