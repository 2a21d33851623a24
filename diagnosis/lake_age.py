"""How much the metric lake holds: the answer in an incident's first minutes (issue 26).

On a fresh machine the lake is young: the collector has just started, no ingest has committed the
raw table yet, or no rollup has committed its table.  A lake question then has too little to work
on, and the answer says so in one line, ``Not enough data yet (N min collected)``, N being the
minutes of samples the lake holds (0 when none), instead of an empty trend read as health or a
Spark error read as a bug.

Young means: the lake holds nothing from before the window asked about and its first sample came
well after the window's start (``lake.embedded.collected``, read from the Delta logs in process):
what it holds began inside it. A lake that holds older data and nothing in the window has stopped
collecting, or never saw such samples: that is the window's own answer ("no data for this
window"), not this one.

Commands reach the lake through ``diagnosis.lake_evidence``; this module adds the lake's age on
top: :func:`young` (the error a young lake gives, or None) and :func:`guarded` (a lake question
whose table is not there yet, in Spark or in the in-process window reader, becomes that error,
never an internal error).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from diagnosis import lake_evidence as lake
from framework.context import Context
from framework.errors import Unavailable
from framework.reply import Evidence, Reply
from framework.spec import CommandRequest

T = TypeVar("T")

#: A lake whose first sample is this close to the window's start holds the whole window: the
#: collector scrapes every 10 s, a slow round or a prometheus step can take up to a minute.
COVERS_S = 60.0


def _hms(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.timezone.utc):%H:%M:%S}"


class YoungLake(Unavailable):
    """The lake is young for the window asked about: it began collecting inside it.

    ``minutes``: the minutes of samples it holds (0 when none); ``first``: its first sample
    (epoch seconds), None when it holds none.  An :class:`Unavailable`, so that a command that
    does not look for it still answers with the lake's part missing and says why."""

    def __init__(self, minutes: int, cluster: str | None = None, first: float | None = None):
        self.minutes, self.cluster, self.first = minutes, cluster, first
        super().__init__(f"{self.short} {self.held} Ask again in a few minutes.")

    @property
    def short(self) -> str:
        return f"Not enough data yet ({self.minutes} min collected)."

    @property
    def held(self) -> str:
        """What the lake holds, in a sentence (with the terminal's and Slack's advice)."""
        of = f" of cluster {self.cluster}" if self.cluster else ""
        if self.first is None:
            return (
                f"The metric lake holds no samples{of} yet."
                "[[terminal: Its collector (`kbot run`, or `kbot lake collect --ingest-follow`) scrapes every 10 s, "
                "and each sample reaches the lake with the next ingest, about a minute later.]]"
                "[[slack: Its collector's first samples reach it about a minute after it starts.]]"
            )
        return f"The metric lake's samples{of} begin at {_hms(self.first)} UTC."

    def evidence(self, source: str = "lake: collected") -> Evidence:
        since = f", since {_hms(self.first)} UTC" if self.first is not None else ""
        return Evidence("Metric lake", f"{self.minutes} min of samples{since}: not enough data yet", source, "neutral")

    def as_dict(self) -> dict[str, Any]:
        return {
            "young": True,
            "minutes_collected": self.minutes,
            "first_sample": (
                dt.datetime.fromtimestamp(self.first, dt.timezone.utc).isoformat() if self.first is not None else None
            ),
        }


@dataclass
class LakeAgeReply(Reply):
    """A Reply whose JSON also says how much the lake holds (``lake``: young, minutes_collected,
    first_sample), so that a script need not read it out of the verdict."""

    lake: dict[str, Any] = field(default_factory=dict)  # JSON: YoungLake.as_dict()


def young_reply(title: str, window: lake.Window, young: YoungLake, source: str, note: str) -> LakeAgeReply:
    """The short answer of a lake too young to answer: how much it holds, and when to ask again."""
    return LakeAgeReply(
        title=title,
        severity="info",
        verdict=str(young),
        window=window.label,
        evidence=[young.evidence(source)],
        notes=[note],
        lake=young.as_dict(),
    )


async def young(ctx: Context, request: CommandRequest, window: lake.Window) -> YoungLake | None:
    """:class:`YoungLake` when the lake began inside ``window`` (with the minutes it holds), else
    None.  Raises :class:`Unavailable` (no lake, Spark down, a timeout)."""
    age = await lake.collected(ctx, request, window)
    first = age["first"]
    if age["earlier"] or (first is not None and first - window.start.timestamp() <= COVERS_S):
        return None  # it holds the whole window: a lake that began with it is not young for it
    return YoungLake(int(age["minutes"]), lake.lake_cluster(request, ctx), first)


async def young_or_none(ctx: Context, request: CommandRequest, window: lake.Window) -> YoungLake | None:
    """:func:`young`, None when that cannot be told either (the lake went away meanwhile)."""
    try:
        return await young(ctx, request, window)
    except Unavailable:
        return None


async def guarded(ctx: Context, request: CommandRequest, window: lake.Window, ask: Callable[[], Awaitable[T]]) -> T:
    """``await ask()`` (a lake question over ``window``); when it fails because a table of the
    lake is not there yet (``lake_evidence.missing_table``: its first ingest or rollup has not
    committed), :class:`YoungLake` instead (a young lake is not a bug)."""
    try:
        return await ask()
    except lake.NotEnoughData as exc:  # the in-process window reader found no raw table: 0 minutes
        raise YoungLake(0, lake.lake_cluster(request, ctx)) from exc
    except Unavailable:
        raise
    except Exception as exc:
        if not lake.missing_table(exc):
            raise
        raise await _young(ctx, request, window) from exc


async def _young(ctx: Context, request: CommandRequest, window: lake.Window) -> YoungLake:
    """The lake's age, for a question that found a table missing (so the lake is young whatever it says)."""
    return await young_or_none(ctx, request, window) or YoungLake(0, lake.lake_cluster(request, ctx))
