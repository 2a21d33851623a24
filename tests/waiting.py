"""The tests' one way to wait for a condition (issue 25): poll ``predicate`` until it returns something
truthy and return that; past ``timeout`` seconds fail with an AssertionError that names ``what``, the
timeout and what the predicate last gave.

- ``ignore``: the exception types that mean "not yet" (metadata that moves while brokers come and go,
  a port not listening yet). Nothing is ignored unless named; the last one ignored is in the failure
  message and chained to it.
- ``check``: called once a round after a false answer; it raises to stop the wait at once (a process
  or task that died while we waited for it).
- ``detail``: called on failure; what it returns is added to the message (the calls so far, the
  collector's last rounds).

The predicate of ``async_wait_until`` may be sync or return an awaitable (a coroutine, a Future), which
is awaited: ``lambda: asyncio.to_thread(blocking_read)`` keeps a blocking read off the event loop.

Lives on the tests' pythonpath (pyproject.toml): ``from waiting import wait_until``."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

Predicate = Callable[[], Any]


class _Waiting:
    """What one wait has seen so far, and its failure message."""

    def __init__(self, timeout: float, what: str, ignore: tuple[type[BaseException], ...]) -> None:
        self.deadline = time.monotonic() + timeout
        self.timeout, self.what, self.ignore = timeout, what, ignore
        self.last: Any = None
        self.last_error: BaseException | None = None

    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def failure(self, detail: Callable[[], Any] | None) -> AssertionError:
        message = f"timed out after {self.timeout:g}s waiting for {self.what}; last value: {self.last!r}"
        if self.last_error is not None:
            message += f"; last error: {self.last_error!r}"
        if detail is not None:
            message += f"; {detail()}"
        return AssertionError(message)


def wait_until(
    predicate: Predicate,
    timeout: float,
    what: str,
    interval: float = 0.2,
    *,
    ignore: tuple[type[BaseException], ...] = (),
    check: Callable[[], Any] | None = None,
    detail: Callable[[], Any] | None = None,
) -> Any:
    """Poll ``predicate()`` every ``interval`` seconds until it is truthy; return its value."""
    state = _Waiting(timeout, what, ignore)
    while True:
        try:
            state.last = predicate()
        except ignore as exc:
            state.last, state.last_error = None, exc
        if state.last:
            return state.last
        if check is not None:
            check()
        if state.over():
            raise state.failure(detail) from state.last_error
        time.sleep(interval)


async def async_wait_until(
    predicate: Predicate,
    timeout: float,
    what: str,
    interval: float = 0.2,
    *,
    ignore: tuple[type[BaseException], ...] = (),
    check: Callable[[], Any] | None = None,
    detail: Callable[[], Any] | None = None,
) -> Any:
    """``wait_until`` on the event loop: sleeps with asyncio, awaits a predicate's awaitable answer."""
    state = _Waiting(timeout, what, ignore)
    while True:
        try:
            value = predicate()
            state.last = (await value) if inspect.isawaitable(value) else value
        except ignore as exc:
            state.last, state.last_error = None, exc
        if state.last:
            return state.last
        if check is not None:
            check()
        if state.over():
            raise state.failure(detail) from state.last_error
        await asyncio.sleep(interval)
