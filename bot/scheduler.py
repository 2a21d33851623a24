"""Post the digest (or any read-only command) to a channel on a schedule.

KBOT_DIGEST_SCHEDULES holds one schedule per line or per ';'. Each is a cron expression (five
fields, evaluated by croniter in the schedule's zone) or one of the shorthands below::

    <minute> <hour> <day of month> <month> <day of week> [<zone>] <channel> [<command text>]
    <when> <time> [<zone>] <channel> [<command text>]

    cron      e.g. "0 9 * * 1-5" (09:00 Monday to Friday), "*/30 * * * *"
    when      daily | weekdays | weekends | mon,wed,fri (any of mon tue wed thu fri sat sun)
              | every <N>m / every <N>h (then no <time>; counted from midnight UTC, so
              "every 6h" fires at 00:00, 06:00, 12:00, 18:00 whatever the start time)
    time      HH:MM, 24-hour
    zone      an IANA zone such as Europe/Berlin (default UTC)
    channel   a channel id (C0123ABC) or #name
    command   what to run, as after /kafka (default "digest")

Examples::

    0 9 * * 1-5 Europe/Berlin #kafka-ops digest
    daily 09:00 #kafka-ops
    weekdays 08:30 Europe/Berlin C0KAFKAOPS digest --cluster prod
    every 6h #kafka-ops status

Every shorthand is the cron expression it stands for (``Schedule.cron``), so one maintained
implementation computes every due time. Times are computed from an injected clock; a schedule fires at most once per
due time, and a due time missed by more than 15 minutes (the bot was down, the host slept) is
skipped rather than caught up: a stale digest helps no one.
Run the bot as a single replica, or every replica posts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

log = logging.getLogger(__name__)

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_EVERY = re.compile(r"^(\d+)([mh])$")
_CHANNEL = re.compile(r"^(#[a-z0-9._-]{1,80}|[CGD][A-Z0-9]{2,})$")
UTC = dt.timezone.utc


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True)
class Schedule:
    channel: str
    text: str = "digest"
    days: frozenset[int] = frozenset(range(7))  # 0 = Monday (shorthands)
    at: dt.time | None = None  # daily-style shorthands
    every: dt.timedelta | None = None  # interval shorthands
    zone: str = "UTC"
    source: str = ""  # the line it came from, for logs
    cron: str = ""  # the cron expression due times come from (a shorthand's translation)

    def __post_init__(self):
        if not self.cron:
            object.__setattr__(self, "cron", _to_cron(self))

    def next_after(self, after: dt.datetime) -> dt.datetime:
        """The first due time strictly after ``after`` (an aware datetime), in UTC."""
        from croniter import croniter

        local = after.astimezone(ZoneInfo(self.zone))
        return croniter(self.cron, local).get_next(dt.datetime).astimezone(UTC)


def _to_cron(s: Schedule) -> str:
    """The cron expression a shorthand stands for."""
    if s.every is not None:
        minutes = int(s.every.total_seconds() // 60)
        return f"*/{minutes} * * * *" if minutes < 60 else f"0 */{minutes // 60} * * *"
    assert s.at is not None
    days = ",".join(str((d + 1) % 7) for d in sorted(s.days))  # cron: 0 = Sunday
    return f"{s.at.minute} {s.at.hour} * * {'*' if len(s.days) == 7 else days}"


_CRON_FIELD = re.compile(r"^[0-9*/,\-]+$|^[A-Za-z]{3}([,-][A-Za-z]{3})*$")


def _days(word: str) -> frozenset[int]:
    if word == "daily":
        return frozenset(range(7))
    if word == "weekdays":
        return frozenset(range(5))
    if word == "weekends":
        return frozenset({5, 6})
    names = word.split(",")
    if not all(n in DAYS for n in names):
        raise ScheduleError(f"'{word}': expected daily, weekdays, weekends, every <N>m|h or days like mon,wed")
    return frozenset(DAYS.index(n) for n in names)


def parse_schedule(line: str) -> Schedule:
    words = line.split()
    if len(words) >= 6 and all(_CRON_FIELD.match(w) for w in words[:5]):
        return _parse_cron(line, words)
    if len(words) < 3:
        raise ScheduleError(f"'{line}': expected '<when> <time> [<zone>] <channel> [<command>]'")
    when, rest = words[0].lower(), words[1:]
    every = at = None
    days = frozenset(range(7))
    if when == "every":
        m = _EVERY.match(rest.pop(0).lower())
        if not m or int(m.group(1)) == 0:
            raise ScheduleError(f"'{line}': 'every' takes an interval like 30m or 6h")
        every = dt.timedelta(minutes=int(m.group(1))) if m.group(2) == "m" else dt.timedelta(hours=int(m.group(1)))
        if every < dt.timedelta(minutes=5) or dt.timedelta(days=1) % every:
            raise ScheduleError(f"'{line}': the interval must be at least 5m and divide a day evenly")
        if (
            every < dt.timedelta(hours=1)
            and dt.timedelta(hours=1) % every
            or every > dt.timedelta(hours=1)
            and every % dt.timedelta(hours=1)
        ):
            # a cron expression can step minutes within an hour or hours within a day, not both
            raise ScheduleError(
                f"'{line}': the interval must divide an hour (5m, 10m, 15m, 20m, 30m) "
                "or be whole hours that divide a day evenly; write a cron expression otherwise"
            )
    else:
        days = _days(when)
        m = _TIME.match(rest.pop(0))
        if not m:
            raise ScheduleError(f"'{line}': the time must be HH:MM")
        at = dt.time(int(m.group(1)), int(m.group(2)))
    zone, channel, text = _zone_channel_text(line, rest)
    return Schedule(channel, text, days, at, every, zone, line.strip())


def _parse_cron(line: str, words: list[str]) -> Schedule:
    from croniter import croniter

    expression, rest = " ".join(words[:5]), words[5:]
    if not croniter.is_valid(expression):
        raise ScheduleError(f"'{line}': '{expression}' is not a valid cron expression (minute hour day month weekday)")
    zone, channel, text = _zone_channel_text(line, rest)
    return Schedule(channel, text, zone=zone, source=line.strip(), cron=expression)


def _zone_channel_text(line: str, rest: list[str]) -> tuple[str, str, str]:
    zone = "UTC"
    if rest and "/" in rest[0] and not rest[0].startswith("#"):
        zone = rest.pop(0)
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"'{line}': unknown time zone '{zone}'") from None
    if not rest or not _CHANNEL.match(rest[0]):
        raise ScheduleError(f"'{line}': expected a channel id (C0123ABC) or #name")
    channel = rest.pop(0)
    return zone, channel, " ".join(rest) or "digest"


def parse_schedules(spec: str) -> list[Schedule]:
    lines = [ln.strip() for ln in re.split(r"[;\n]", spec or "") if ln.strip()]
    return [parse_schedule(ln) for ln in lines]


Post = Callable[[Schedule, dt.datetime], Awaitable[None]]


MISSED_GRACE = dt.timedelta(minutes=15)


class Scheduler:
    """Fires ``post(schedule, due)`` when a schedule comes due. Clock and sleep are injected."""

    def __init__(
        self,
        schedules: list[Schedule],
        post: Post,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_sleep_s: float = 60.0,
        grace: dt.timedelta = MISSED_GRACE,
    ):
        self.schedules, self.post, self.clock, self.sleep, self.grace = schedules, post, clock, sleep, grace
        self.max_sleep_s = max_sleep_s  # wake at least this often, so a clock jump is noticed
        start = self.now()
        self._next = {i: s.next_after(start) for i, s in enumerate(schedules)}

    def now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.clock(), UTC)

    def next_due(self) -> dt.datetime | None:
        return min(self._next.values(), default=None)

    async def run_pending(self) -> list[Schedule]:
        """Post every schedule that is due now; each due time fires once."""
        now = self.now()
        fired = []
        for i, s in enumerate(self.schedules):
            due = self._next[i]
            if due <= now:
                self._next[i] = s.next_after(now)  # advance first: a failing post is not retried in a loop
                if now - due > self.grace:
                    log.warning("schedule %r: skipped the %s run, missed by %s", s.source, due.isoformat(), now - due)
                    continue
                try:
                    await self.post(s, due)
                except Exception:
                    log.exception("scheduled post %r failed", s.source)
                fired.append(s)
        return fired

    async def run_forever(self) -> None:
        if not self.schedules:
            return
        while True:
            await self.run_pending()
            wait = (self.next_due() - self.now()).total_seconds()
            await self.sleep(min(max(wait, 0.0), self.max_sleep_s))
