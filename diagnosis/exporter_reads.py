"""One read of the nodes' JMX exporters for a live answer, with one deadline, and an account of it.

Every node is read on its own, at once; the read ends when all have answered or at one deadline,
whichever comes first, so a slow node never holds the others' samples (issue 35):

- the deadline grows with the bot's own host's load (a fixed 4 s turned exporters that took 4-6 s
  on a host at load 17 into "no answer", and an answer built from the rest into "OK");
- once every node but one has answered, the last one gets LONE_SILENT_S, or twice as long as the
  slowest of the others took: alone in not answering, it is the finding (a paused or starved JVM);
- each node's read is recorded as an evidence source (framework/sources.py): read, slow, no answer
  or failed, with its time, so an answer can say what it did not see;
- when every exporter is slow and the bot's host is busy (its load per core, how late its own event
  loop ran), the silence is the bot's host, not the JVMs, and the reading says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass

from framework import sources
from framework.reply import SourceState
from live import exporters

# A live answer's usual budget: an idle exporter answers in ~0.1 s, a loaded one in seconds.
BASE_TIMEOUT_S = 4.0
LONE_SILENT_S = 1.5
# The bot's host is busy when its 1-minute load per core is at least this, or its event loop ran
# this late during the read.
BUSY_LOAD_PER_CORE = 2.0
BUSY_LOOP_LAG_S = 0.5


def host_load() -> tuple[float, int]:
    """The host's 1-minute load average and its core count (0.0 where the OS does not say)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return load, os.cpu_count() or 1


def deadline_s(base_s: float = BASE_TIMEOUT_S) -> float:
    """The read's one deadline: ``base_s`` on a calm host, longer in proportion to the load per
    core, never past the lake's own scrape timeout (Prometheus's default)."""
    load, cores = host_load()
    return min(exporters.SCRAPE_TIMEOUT_S, max(base_s, base_s * load / cores / BUSY_LOAD_PER_CORE))


@dataclass
class HostBusy:
    load: float
    cores: int
    loop_lag_s: float

    def sentence(self) -> str:
        return (
            f"The bot's own host is busy (load {self.load:.1f} on {self.cores} core(s); its event loop ran "
            f"{self.loop_lag_s:.1f} s late during the read): every exporter being slow says that, not that the "
            "brokers' JVMs are paused."
        )


@dataclass
class NodeReading:
    reading: exporters.Reading
    host_busy: HostBusy | None = None


class _LoopLag:
    """How late the event loop runs a 50 ms timer, at most, while it is running."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.task = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            self.worst = max(self.worst, time.monotonic() - t - 0.05)

    async def stop(self) -> float:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        return self.worst


async def read_nodes(
    urls: dict[int, str], names: frozenset[str], base_s: float = BASE_TIMEOUT_S, started: float | None = None
) -> NodeReading:
    """Every node's exporter read on its own, under one deadline (see the module docstring)."""
    started = time.monotonic() if started is None else started
    limit = deadline_s(base_s)
    lag = _LoopLag()
    tasks = {n: asyncio.ensure_future(exporters.read({n: u}, names, limit)) for n, u in sorted(urls.items())}
    took: dict[int, float] = {}
    pending: set[asyncio.Future[exporters.Reading]] = set(tasks.values())
    slowest = 0.0
    try:
        while pending:
            waited = time.monotonic() - started
            if waited >= limit:
                break
            lone_left = max(LONE_SILENT_S, 2 * slowest) - waited
            if len(pending) == 1 and lone_left <= 0:
                break
            timeout = min(limit - waited, lone_left) if len(pending) == 1 else limit - waited
            done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            now = time.monotonic()
            for n, t in tasks.items():
                if t in done:
                    took[n] = now - started
            if done:
                slowest = now - started
    finally:
        for fut in pending:
            fut.cancel()
        worst_lag = await lag.stop()
    out = exporters.Reading()
    for node, task in sorted(tasks.items()):
        if task in pending or task.cancelled():
            waited = time.monotonic() - started
            alone = len(pending) == 1 and len(tasks) > 1
            out.failed[node] = f"no answer within {waited:.1f} s" + (
                " while every other node answered" if alone else ""
            )
            out.silent.add(node)
            sources.record(f"exporter {node}", "no answer", waited, out.failed[node], node=node)
            continue
        part = task.result()
        out.samples += part.samples
        out.failed.update(part.failed)
        out.silent |= part.silent
        if node in part.failed:
            state: SourceState = "no answer" if node in part.silent else "failed"
            sources.record(f"exporter {node}", state, took.get(node), part.failed[node], node=node)
        else:
            sources.record(f"exporter {node}", "read", took.get(node), node=node)
    out.at = time.monotonic()
    out.seconds = out.at - started
    load, cores = host_load()
    all_slow = bool(tasks) and all(n in out.silent or took.get(n, 0.0) > sources.SLOW_READ_S for n in tasks)
    busy = None
    if all_slow and (load / cores >= BUSY_LOAD_PER_CORE or worst_lag >= BUSY_LOOP_LAG_S):
        busy = HostBusy(load, cores, worst_lag)
    return NodeReading(out, busy)
