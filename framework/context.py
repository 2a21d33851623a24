"""What a command may use to gather evidence. Transports build one Context per request."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from kbot_settings import KbotSettings
from runbook_kb import KnowledgeBase, default_kb
from runbook_kb.lookup import Lookup

if TYPE_CHECKING:  # types only: importing these at run time would pull Kafka and Spark into every command
    from framework.actions import Gate
    from lake.service import LakeService
    from live.pool import GatewayPool


async def _no_progress(_message: str) -> None:
    return None


@dataclass
class Context:
    kb: KnowledgeBase = field(default_factory=default_kb)
    clock: Callable[[], float] = time.time
    # Reports progress on long work ("checking 5,000 partitions..."); the terminal prints it,
    # Slack updates the "working on it" message.
    progress: Callable[[str], Awaitable[None]] = _no_progress
    # Evidence providers, present when configured: the live admin gateway and the metric lake.
    live: Optional["GatewayPool"] = None
    lake: Optional["LakeService"] = None
    gate: Optional["Gate"] = None  # proposes, confirms and cancels mutating actions
    # The process's settings, loaded once at its edge (kbot_settings); a Context built without them
    # (a test's) has every default and no environment.
    settings: KbotSettings = field(default_factory=KbotSettings)
    _lookup: Lookup | None = None

    @property
    def lookup(self) -> Lookup:
        if self._lookup is None:
            self._lookup = Lookup.for_kb(self.kb)
        return self._lookup
