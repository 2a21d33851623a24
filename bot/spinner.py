"""Progress for long work in a terminal: an elapsed-time spinner on stderr, only on a TTY.

Commands report what they are doing through ``Context.progress``; on a terminal that message is
drawn on one line with the seconds spent so far and erased when the answer prints, so stdout
stays clean for the answer (and for pipes and scripts, nothing is drawn at all).
"""

from __future__ import annotations

import asyncio
import sys
import time

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_S = 0.1


class Spinner:
    def __init__(self, stream=None, enabled: bool | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.message = ""
        self._started = 0.0
        self._task: asyncio.Task | None = None
        self._drawn = False

    async def progress(self, message: str) -> None:
        """Context.progress: the latest step; the spinner starts with the first one."""
        self.message = message
        if not self.enabled:
            return
        if self._task is None:
            self._started = time.monotonic()
            self._task = asyncio.get_running_loop().create_task(self._spin())

    async def _spin(self) -> None:
        n = 0
        try:
            while True:
                self._draw(f"{FRAMES[n % len(FRAMES)]} {self.message} ({time.monotonic() - self._started:.1f} s)")
                n += 1
                await asyncio.sleep(TICK_S)
        except asyncio.CancelledError:
            pass

    def _draw(self, text: str) -> None:
        self.stream.write("\r\033[K" + text[:200])
        self.stream.flush()
        self._drawn = True

    def stop(self) -> None:
        """Erase the line before the answer prints."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False
