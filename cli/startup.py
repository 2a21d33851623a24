"""`kbot run`'s start-up behind the prompt: the local cluster, the Spark server and the collector
come up in background threads while the console (or the Slack app) already answers.

Each part has a state - starting, up, failed, off - and a one-line detail that is always true:
"found running" only for JVMs that were running before this run, "live" only once the brokers
answer. The console shows the parts as its status line and after `status`; every change is
said once (on stderr, or queued for the console to print between answers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

STARTING = "starting"
UP = "up"
FAILED = "failed"
OFF = "off"


@dataclass
class Part:
    name: str
    state: str
    detail: str
    since: float


class Startup:
    """What `kbot run` is still bringing up. Thread-safe: the start threads set, the console reads."""

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self._say = say
        self._clock = clock
        self._lock = threading.Lock()
        self._parts: dict[str, Part] = {}
        self._queued: list[str] = []
        self._queue_only = False
        self._closed = False
        self._changed = threading.Condition(self._lock)
        # run by the console before each question, in its own thread (e.g. attach the lake once
        # its Spark server is up): what the start threads bring is taken in where it is used
        self.before_question: list[Callable[[Any], None]] = []

    def set(self, name: str, state: str, detail: str, *, announce: bool = True) -> None:
        with self._lock:
            old = self._parts.get(name)
            since = old.since if old is not None and old.state == state else self._clock()
            self._parts[name] = Part(name, state, detail, since)
            self._changed.notify_all()
            line = f"{name}: {detail}"
            if announce and not self._closed:
                if self._queue_only:
                    self._queued.append(line)
                else:
                    self._say(line)

    def close(self) -> None:
        """The run is ending: changes are still recorded, no longer said."""
        with self._lock:
            self._closed = True

    def queue_messages(self) -> None:
        """From now on, changes are queued for drain() instead of said at once: the console
        prints them between answers, not over its prompt."""
        with self._lock:
            self._queue_only = True

    def drain(self) -> list[str]:
        with self._lock:
            lines, self._queued = self._queued, []
            return lines

    def state(self, name: str) -> str | None:
        with self._lock:
            part = self._parts.get(name)
            return part.state if part is not None else None

    def pending(self) -> bool:
        with self._lock:
            return any(p.state == STARTING for p in self._parts.values())

    def wait(self, name: str, timeout: float) -> str | None:
        """Wait until part ``name`` is no longer starting (or ``timeout``); its state then."""
        deadline = self._clock() + timeout
        with self._changed:
            while True:
                part = self._parts.get(name)
                if part is not None and part.state != STARTING:
                    return part.state
                left = deadline - self._clock()
                if left <= 0:
                    return part.state if part is not None else None
                self._changed.wait(min(left, 1.0))

    def starting(self) -> list[str]:
        """The parts still starting, each with its age ("cluster (12s)")."""
        now = self._clock()
        with self._lock:
            return [f"{p.name} ({now - p.since:.0f}s)" for p in self._parts.values() if p.state == STARTING]

    def line(self) -> str:
        """The status line: every part and its state, the ones still starting with their age."""
        now = self._clock()
        with self._lock:
            parts = list(self._parts.values())
        shown = []
        for p in parts:
            if p.state == STARTING:
                shown.append(f"{p.name}: starting ({now - p.since:.0f}s)")
            else:
                shown.append(f"{p.name}: {p.state}")
        return " | ".join(shown)

    def prepare(self, ctx: Any) -> None:
        """Run the before_question hooks on the console's context."""
        for hook in list(self.before_question):
            hook(ctx)

    def lines(self) -> list[str]:
        """Every part with its detail (the console adds these to a `status` answer)."""
        with self._lock:
            return [f"{p.name}: {p.detail}" for p in self._parts.values()]
