"""Parts of an answer the bot could not read because its principal lacks a right.

A read command on a secured cluster should answer with what it could read and say what is
missing and which grant would fill it ("min.insync.replicas of the topics: the observer principal
needs DESCRIBE_CONFIGS on TOPIC orders"), instead of failing whole over one refused call. A read
that can do without its data calls :func:`note_missing`; the dispatcher collects the notes of the
request being answered (:func:`collecting`) into ``Reply.missing``, which every renderer shows
right under the verdict. A read the answer cannot do without still fails the command, with the
same NotAuthorized text.

A context variable, not a parameter, because the refused reads sit deep in shared helpers
(``evidence.snapshot``, the live checks) that many commands call; the variable holds one list per
request, and tasks started by ``asyncio.gather`` share it (they copy the context, not the list).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

from live.gateway import NotAuthorized

_MISSING: ContextVar[list[str] | None] = ContextVar("kbot_missing_parts", default=None)


@contextmanager
def collecting() -> Iterator[list[str]]:
    """The list that receives this request's missing parts while the block runs."""
    parts: list[str] = []
    token = _MISSING.set(parts)
    try:
        yield parts
    finally:
        _MISSING.reset(token)


def note_missing(part: str, exc: NotAuthorized) -> str:
    """Record that ``part`` of the answer was not read (``exc`` names the missing right); returns
    the line, for a caller that also wants it in its own evidence."""
    line = f"{part}: {exc.role_line()}"
    parts = _MISSING.get()
    if parts is not None and line not in parts:
        parts.append(line)
    return line
