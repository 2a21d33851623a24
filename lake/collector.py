"""Collector: scrape each Kafka node's Prometheus endpoint and land the samples as files.

Every ``interval_s`` seconds one *round* scrapes all targets in parallel (aiohttp),
parses each exposition with ``prometheus_client``'s parser, maps the samples to
lake rows (``lake.mapping``) and writes them, with the consumer-group rows, as one
JSON-lines landing file in ``<lake dir>/landing/``.  The Spark ingest job
(``lake.ingest``) turns landing files into the Delta Lake table.

Sources (``KBOT_METRICS_SOURCE``)
---------------------------------
``exporters`` (the default) scrapes the exporters itself:

* the local cluster's exporters (``LocalCluster.metrics_urls``: node id -> URL), or
* any exporters a user already runs: ``KBOT_METRICS_TARGETS="101=http://kafka-1:7071/metrics,102=..."``
  (the node id is the ``broker`` column: Kafka's ``node.id``/``broker.id``).

All targets of a round are scraped concurrently, each with ``timeout_s`` (default 10 s,
Prometheus's default ``scrape_timeout``: a JMX exporter on a loaded host takes seconds).

``prometheus`` reads the same series from a Prometheus that already scrapes them
(``KBOT_PROMETHEUS_URL``, e.g. ``http://127.0.0.1:9090``) through ``/api/v1/query_range``
over the time since the last round (``lake.prometheus_source``: the broker id comes from the
``KBOT_PROMETHEUS_BROKER_LABEL`` label, default ``node_id``; ``KBOT_PROMETHEUS_SELECTOR``
adds label matchers such as ``cluster="prod"``).  It resumes from the last instant it wrote
(``<lake dir>/prometheus.state.json``), so a restart or a Prometheus outage neither loses nor
duplicates a window.  No targets are needed in this mode.  See docs/metrics-sources.md.

Timestamps
----------
All rows of a round carry the round's start time, not each response's arrival
time: replicas of a partition sampled in the same round then share ``ts``, which
the lake queries compare instant by instant (``window_queries.hot``: which replica
is the leader).  A target that does not answer within ``timeout_s`` contributes
no rows to that round (a dead broker sends nothing, which is itself evidence).

Landing files
-------------
Written atomically: to a hidden ``.<name>.tmp`` in the landing directory, flushed
and fsynced, then renamed to ``<name>.jsonl`` (a rename within one directory is
atomic) and the directory fsynced.  A crash leaves at most a hidden tmp file,
which ingest never reads and the next collector start removes.  So ingest only
ever sees complete files.

Consumer groups
---------------
With ``groups`` and a ``lag_source`` (``live.gateway.AdminGateway``: its
``consumer_group_lag``), each round also reads the groups' committed offsets and
log end offsets and writes ``CommittedOffset`` and ``ConsumerLag`` rows (broker -1,
``labels.group``) - but only for a partition whose committed offset changed
since the previous round (or that is seen for the first time).  That approximates
Burrow's "one row per observed commit" (``lake.schema``): a consumer that stops
committing produces no new rows, which the lag rules read as STOP; a consumer that
keeps committing the same offset cannot be told apart from a stopped one by
sampling (Burrow's STALL needs the commit stream itself).  The ``ConsumerLag``
of a commit is the lag at that commit and stays there once commits stop; the
lake's *current* lag is the brokers' latest ``LogEndOffset`` sample minus the
last committed offset (``window_queries.lag``), which is what a live read shows.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kbot_settings import KbotSettings
from lake.change_sampler import ChangeSampler
from lake.landing import LANDING_SUFFIX, fsync_dir, land, landing_name, remove_stale_tmp, write_landing_file  # noqa: F401 (re-exported)
from lake.mapping import Mapper, group_rows
from lake.prometheus_source import PrometheusSource, PromRound

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_TIMEOUT_S = 10.0  # Prometheus's default scrape_timeout: a JMX exporter on a busy host can take seconds
TARGETS_ENV = "KBOT_METRICS_TARGETS"
SOURCE_ENV = "KBOT_METRICS_SOURCE"
EXPORTERS, PROMETHEUS = "exporters", "prometheus"
SOURCES = (EXPORTERS, PROMETHEUS)


# --------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    broker: int  # node id: the lake's broker column
    url: str


def parse_targets(spec: str) -> list[Target]:
    """``"101=http://h:7071/metrics,102=http://..."`` -> targets (ValueError when malformed)."""
    targets: list[Target] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        node, sep, url = item.partition("=")
        if not sep or not url.strip():
            raise ValueError(f"metrics target {item!r}: expected <node id>=<url>")
        try:
            broker = int(node.strip())
        except ValueError:
            raise ValueError(f"metrics target {item!r}: node id {node.strip()!r} is not a number") from None
        url = url.strip()
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"metrics target {item!r}: the URL must start with http:// or https://")
        targets.append(Target(broker, url))
    if len({t.broker for t in targets}) != len(targets):
        raise ValueError(f"metrics targets name a node id twice: {spec!r}")
    return targets


def targets_from_settings(settings: KbotSettings) -> list[Target]:
    """``KBOT_METRICS_TARGETS`` from the settings: a plain string there, parsed here into targets."""

    return parse_targets(settings.kbot_metrics_targets or "")


def targets_from_urls(urls: Mapping[int, str]) -> list[Target]:
    """From ``LocalCluster.metrics_urls`` (node id -> URL)."""
    return [Target(int(b), u) for b, u in sorted(urls.items())]


# --------------------------------------------------------------------------- landing files


# --------------------------------------------------------------------------- consumer groups


class GroupSampler:
    """Committed offsets of consumer groups -> rows, one per observed change."""

    def __init__(self, source, groups: Iterable[str]):
        self.source = source  # has: async consumer_group_lag(group) -> live.model.GroupLag
        self.groups = list(dict.fromkeys(groups))
        self._last: dict[tuple[str, str, int], int] = {}

    async def sample(self, ts_us: int, cluster: str) -> tuple[list[dict], dict[str, str]]:
        """Rows for the commits seen since the last call, and per-group errors."""
        results = await asyncio.gather(
            *(self.source.consumer_group_lag(g) for g in self.groups), return_exceptions=True
        )
        rows: list[dict] = []
        errors: dict[str, str] = {}
        for group, res in zip(self.groups, results):
            if isinstance(res, BaseException):
                errors[group] = f"{type(res).__name__}: {res}"
                continue
            for p in res.partitions:
                if p.committed is None:
                    continue
                key = (group, p.topic, p.partition)
                if self._last.get(key) == p.committed:
                    continue
                self._last[key] = p.committed
                rows += group_rows(group, p.topic, p.partition, p.committed, p.lag, ts_us=ts_us, cluster=cluster)
        return rows, errors


# --------------------------------------------------------------------------- collector


@dataclass
class ScrapeResult:
    target: Target
    rows: list[dict] = field(default_factory=list)
    samples: int = 0
    unmapped: int = 0
    error: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RoundReport:
    ts_us: int
    scrapes: list[ScrapeResult]
    group_rows: int = 0
    group_errors: dict[str, str] = field(default_factory=dict)
    file: Path | None = None  # the newest landing file the round wrote
    seconds: float = 0.0
    prometheus: PromRound | None = None  # KBOT_METRICS_SOURCE=prometheus: what the source did

    @property
    def rows(self) -> int:
        prom = self.prometheus.rows if self.prometheus is not None else 0
        return sum(len(s.rows) for s in self.scrapes) + prom + self.group_rows

    @property
    def failed(self) -> dict[int, str]:
        return {s.target.broker: s.error for s in self.scrapes if s.error}

    @property
    def error(self) -> str | None:
        """The Prometheus source's failure (its round is retried), None otherwise."""
        return self.prometheus.error if self.prometheus is not None else None

    def summary(self) -> str:
        if self.prometheus is not None:
            text = self.prometheus.summary()
            if self.group_rows or self.group_errors:
                text += f" ({self.group_rows} group rows)"
            text += f" in {self.seconds:.2f}s"
            if self.file is not None:
                text += f" -> {self.file.name}"
            for g, e in sorted(self.group_errors.items()):
                text += f"; group {g}: {e}"
            return text
        ok = sum(s.ok for s in self.scrapes)
        text = f"{ok}/{len(self.scrapes)} targets, {self.rows:,} rows"
        if self.group_rows or self.group_errors:
            text += f" ({self.group_rows} group rows)"
        text += f" in {self.seconds:.2f}s"
        if self.file is not None:
            text += f" -> {self.file.name}"
        for b, e in sorted(self.failed.items()):
            text += f"; node {b}: {e}"
        for g, e in sorted(self.group_errors.items()):
            text += f"; group {g}: {e}"
        return text


class Collector:
    """Scrapes ``targets`` (or reads Prometheus) every ``interval_s`` seconds into ``landing_dir``.

    ``source``: ``exporters`` or ``prometheus``; None reads ``KBOT_METRICS_SOURCE``.  In
    ``prometheus`` mode ``prometheus`` is the :class:`PrometheusSource` to read (None builds one
    from the environment, its state file next to ``landing_dir``) and ``targets`` may be empty.
    """

    def __init__(
        self,
        targets: Iterable[Target],
        landing_dir: str | os.PathLike,
        cluster: str,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        groups: Iterable[str] = (),
        lag_source=None,
        mapper: Mapper | None = None,
        clock: Callable[[], float] = time.time,
        source: str | None = None,
        prometheus: PrometheusSource | None = None,
        settings: KbotSettings | None = None,
        changes: ChangeSampler | None = None,
        admin=None,
    ):
        # the source, and Prometheus's URL, label and selector, come from the process's settings
        # (KBOT_METRICS_SOURCE, KBOT_PROMETHEUS_*) unless given; without either, the defaults
        settings = KbotSettings() if settings is None else settings
        self.source = settings.kbot_metrics_source if source is None else source
        if self.source not in SOURCES:
            raise ValueError(f"metrics source {self.source!r}: expected one of {', '.join(SOURCES)}")
        self.targets = list(targets) if self.source == EXPORTERS else []
        if self.source == EXPORTERS and not self.targets:
            raise ValueError(f"no metrics targets: pass node=url pairs or set {TARGETS_ENV}")
        if interval_s <= 0 or timeout_s <= 0:
            raise ValueError("interval_s and timeout_s must be positive")
        self.landing_dir = Path(landing_dir)
        self.cluster = cluster
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self.mapper = mapper or Mapper()
        self.clock = clock
        groups = list(groups)
        self.groups = GroupSampler(lag_source, groups) if groups and lag_source is not None else None
        self.prometheus: PrometheusSource | None = None
        if self.source == PROMETHEUS:
            # step = our interval: one point per series per round, as an exporter round gives
            self.prometheus = prometheus or PrometheusSource.from_settings(
                self.landing_dir.parent,
                cluster,
                settings,
                step_s=self.interval_s,
                timeout_s=self.timeout_s,
                mapper=self.mapper,
                clock=clock,
            )
        # "what changed?": a metadata snapshot every ``changes.interval_s`` through ``admin``
        self.changes = changes if admin is not None else None
        self.admin = admin
        self.rounds = 0

    async def _sample_changes(self) -> None:
        """One metadata round when due; bounded by the scrape interval, so a cluster that does not
        answer delays no sample round by more than one interval, and never stops collection."""
        if self.changes is None or not self.changes.due():
            return
        budget = max(self.interval_s, 10.0)
        try:
            res = await asyncio.wait_for(self.changes.round(self.admin), timeout=budget)
        except asyncio.TimeoutError:
            log.warning("metadata snapshot of %s: no answer within %.0f s", self.cluster, budget)
            return
        except Exception as exc:  # noqa: BLE001 - the samples go on without the change events
            log.warning("metadata snapshot of %s failed: %s", self.cluster, exc)
            return
        if res.events:
            log.info("metadata snapshot of %s: %d change(s)", self.cluster, res.events)

    async def _scrape(self, session, target: Target, ts_us: int) -> ScrapeResult:
        import aiohttp

        res = ScrapeResult(target)
        t0 = time.monotonic()
        try:
            async with session.get(target.url, timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"HTTP {resp.status}")
                text = await resp.text()
            # parsing a big exposition is CPU work: keep it off the event loop
            mapped = await asyncio.to_thread(
                self.mapper.map_text, text, broker=target.broker, ts_us=ts_us, cluster=self.cluster
            )
            res.rows, res.samples, res.unmapped = mapped.rows, mapped.samples, mapped.unmapped
        except asyncio.TimeoutError:
            res.error = f"no answer within {self.timeout_s:g}s"
        except (aiohttp.ClientError, OSError, RuntimeError, ValueError) as exc:
            res.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        res.seconds = time.monotonic() - t0
        return res

    async def collect_once(self, session=None) -> RoundReport:
        """One round: scrape every target, sample the groups, write one landing file
        (none when the round produced no rows).  ``session``: an aiohttp ClientSession
        to reuse (one is made for the round otherwise)."""
        import aiohttp

        t0 = time.monotonic()
        ts_us = int(self.clock() * 1_000_000) // 1000 * 1000  # millisecond precision
        own = session is None
        if own:
            session = aiohttp.ClientSession()
        prom: PromRound | None = None
        try:
            # every target at once: a slow exporter costs the round its own timeout, not the sum
            jobs = [self._scrape(session, t, ts_us) for t in self.targets]
            scrapes = await asyncio.gather(*jobs)
            if self.prometheus is not None:
                prom = await self.prometheus.collect(session, self.landing_dir)
        finally:
            if own:
                await session.close()
        report = RoundReport(ts_us, list(scrapes), prometheus=prom)
        if prom is not None and prom.files:
            report.file = prom.files[-1]
        rows = [r for s in scrapes for r in s.rows]
        if self.groups is not None:
            g_rows, report.group_errors = await self.groups.sample(ts_us, self.cluster)
            report.group_rows = len(g_rows)
            rows += g_rows
        if rows:
            report.file = await land(self.landing_dir, rows, landing_name(ts_us))
        await self._sample_changes()
        report.seconds = time.monotonic() - t0
        self.rounds += 1
        return report

    async def run(
        self,
        *,
        rounds: int | None = None,
        duration_s: float | None = None,
        stop: asyncio.Event | None = None,
        on_round: Callable[[RoundReport], Awaitable[None] | None] | None = None,
    ) -> int:
        """Collect until ``rounds`` rounds, ``duration_s`` seconds or ``stop`` is set.

        Rounds start on a fixed cadence (a slow round delays the next one, it
        does not shift every later one).  Returns the number of rounds run.
        """
        import aiohttp

        remove_stale_tmp(self.landing_dir)
        stop = stop or asyncio.Event()
        started = time.monotonic()
        done = 0
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                tick = time.monotonic()
                report = await self.collect_once(session)
                done += 1
                if report.failed or report.error:
                    log.warning("collector round: %s", report.summary())
                if on_round is not None:
                    maybe = on_round(report)
                    if asyncio.iscoroutine(maybe):
                        await maybe
                if rounds is not None and done >= rounds:
                    break
                if duration_s is not None and time.monotonic() - started >= duration_s:
                    break
                wait = max(0.0, self.interval_s - (time.monotonic() - tick))
                try:
                    await asyncio.wait_for(stop.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
        return done
