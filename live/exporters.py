"""Current readings from the nodes' Prometheus JMX exporters, for the live checks.

The admin API says nothing about how busy a broker is: request-handler idle time, fetch-session
evictions and per-partition write rates exist only as JMX metrics. A live check reads them straight
from the exporters (the same endpoints the metric lake collects from) so an answer does not wait for
the lake. Meters are read through the exporter's one-minute rate; a per-partition rate, which
no exporter series gives, comes from two reads of LogEndOffset a moment apart.

An exporter that hangs is a finding too (its JVM is paused), so every read is bounded and failures
are returned per node, never raised.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

# Prometheus's default scrape timeout. A JMX exporter on a loaded host can take seconds to render
# ~700 KB; a live answer that must come back in a few seconds uses its own, shorter budget.
SCRAPE_TIMEOUT_S = 10.0

# Every JMX exporter's own gauge of when its JVM started: a broker's restart, seen from outside.
PROCESS_STARTED = "process_start_time_seconds"

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    node: int
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass
class Reading:
    samples: list[Sample] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # node -> why it was not read
    silent: set[int] = field(default_factory=set)  # nodes of ``failed`` that did not answer in time (not refused)
    seconds: float = 0.0
    at: float = 0.0  # time.monotonic() when the read finished

    def named(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]


def parse(text: str, node: int, names: frozenset[str]) -> list[Sample]:
    """The samples of ``names`` in a Prometheus text exposition (other lines are skipped cheaply:
    an exporter page holds thousands of series and a check needs a handful)."""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.find(" ")
        end = brace if 0 <= brace < space else space
        name = line[:end]
        if name not in names:
            continue
        labels: tuple[tuple[str, str], ...] = ()
        rest = line[end:]
        if rest.startswith("{"):
            close = rest.rfind("}")
            labels = tuple(sorted(_LABEL.findall(rest[1:close])))
            rest = rest[close + 1 :]
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if value == value:  # NaN: a timer with no samples yet
            out.append(Sample(node, name, labels, value))
    return out


async def read(urls: dict[int, str], names: frozenset[str], timeout_s: float = SCRAPE_TIMEOUT_S) -> Reading:
    """One concurrent read of every node's exporter, keeping only ``names``."""
    import aiohttp
    from yarl import URL

    started = time.monotonic()
    reading = Reading()

    async def one(session: aiohttp.ClientSession, node: int, url: str) -> None:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
                if resp.status != 200:
                    reading.failed[node] = f"HTTP {resp.status}"
                    return
                text = await resp.text()
        except asyncio.TimeoutError:
            reading.failed[node] = f"no answer within {timeout_s:g} s (the JVM may be paused)"
            reading.silent.add(node)
            return
        except (aiohttp.ClientError, OSError) as exc:
            reading.failed[node] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return
        reading.samples.extend(await asyncio.to_thread(parse, text, node, names))

    # The exporters' HTTP server filters by name (name[]=...): a check needs a handful of the
    # thousands of series, so most of a ~700 KB page is never sent or parsed.
    query = [("name[]", n) for n in sorted(names)]
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one(session, n, str(URL(u).extend_query(query))) for n, u in sorted(urls.items())))
    reading.at = time.monotonic()
    reading.seconds = reading.at - started
    return reading
