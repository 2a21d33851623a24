"""The collector's metadata rounds for "what changed?": every ``interval_s`` one snapshot of the
cluster's metadata (live/metadata_snapshot.py), diffed with the last (live/change_events.py),
the events landed for the Spark ingest (lake/changes.py). The first round of a process is a
baseline and lands nothing; a round that could not read the cluster lands nothing and keeps the
last snapshot, so the next good round is compared with it."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from lake.changes import land_events
from lake.layout import LakeLayout
from live.change_events import MetadataSnapshot, carry_forward, diff
from live.gateway import AdminGateway, GatewayError
from live.metadata_snapshot import read_metadata

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 60.0


@dataclass
class RoundResult:
    events: int
    seconds: float
    cpu_s: float
    error: str | None = None


class ChangeSampler:
    def __init__(
        self,
        layout: LakeLayout,
        cluster: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        read: Callable[[AdminGateway], Awaitable[MetadataSnapshot]] = read_metadata,
    ):
        self.layout = layout
        self.cluster = cluster
        self.interval_s = interval_s
        self._read = read
        self.last: MetadataSnapshot | None = None
        self._next_at = 0.0

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self._next_at

    async def round(self, gw: AdminGateway) -> RoundResult:
        """One snapshot, diffed and landed (whether due or not: :meth:`due` says when)."""
        t0, c0 = time.monotonic(), time.process_time()
        self._next_at = t0 + self.interval_s
        try:
            snap = carry_forward(self.last, await self._read(gw))
        except GatewayError as exc:
            log.warning("metadata snapshot of %s failed: %s", self.cluster, exc)
            return RoundResult(0, time.monotonic() - t0, time.process_time() - c0, str(exc))
        events = diff(self.last, snap)
        self.last = snap
        if events:
            land_events(self.layout, self.cluster, (e.to_row() for e in events))
        return RoundResult(len(events), time.monotonic() - t0, time.process_time() - c0)
