"""Digest schedules: the small syntax, due times from an injected clock, and posting through the real app."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from bot.scheduler import UTC, Schedule, ScheduleError, Scheduler, parse_schedule, parse_schedules


def at(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


class SimClock:
    """A clock and a sleep that advances it: run_forever runs through days in milliseconds."""

    def __init__(self, start: dt.datetime):
        self.now = start.timestamp()
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_parse_forms():
    daily, weekdays, every = parse_schedules(
        "daily 09:00 #kafka-ops; weekdays 08:30 Europe/Berlin C0KAFKAOPS digest --cluster prod\nevery 6h #ops status"
    )
    assert (daily.channel, daily.text, daily.at, daily.zone) == ("#kafka-ops", "digest", dt.time(9, 0), "UTC")
    assert weekdays.days == frozenset(range(5)) and weekdays.zone == "Europe/Berlin"
    assert weekdays.text == "digest --cluster prod" and weekdays.channel == "C0KAFKAOPS"
    assert every.every == dt.timedelta(hours=6) and every.text == "status"
    assert parse_schedule("mon,thu 07:05 #x").days == frozenset({0, 3})
    assert parse_schedules("") == []


@pytest.mark.parametrize(
    "line,needle",
    [
        ("daily 9am #ops", "HH:MM"),
        ("daily 25:00 #ops", "HH:MM"),
        ("someday 09:00 #ops", "expected daily"),
        ("daily 09:00 Mars/Olympus #ops", "unknown time zone"),
        ("daily 09:00 ops", "channel"),
        ("every 7h #ops", "divide a day"),
        ("every 1m #ops", "at least 5m"),
        ("daily", "expected"),
    ],
)
def test_parse_errors_say_what_is_wrong(line, needle):
    with pytest.raises(ScheduleError, match=needle):
        parse_schedule(line)


def test_daily_next_after():
    s = parse_schedule("daily 09:00 #ops")
    assert s.next_after(at(2025, 6, 2, 8, 0)) == at(2025, 6, 2, 9, 0)
    assert s.next_after(at(2025, 6, 2, 9, 0)) == at(2025, 6, 3, 9, 0)  # strictly after: fires once
    assert s.next_after(at(2025, 6, 2, 9, 0, 1)) == at(2025, 6, 3, 9, 0)


def test_weekdays_skip_the_weekend():
    s = parse_schedule("weekdays 09:00 #ops")
    assert s.next_after(at(2025, 6, 6, 10, 0)) == at(2025, 6, 9, 9, 0)  # Friday after 09:00 -> Monday


def test_zone_follows_daylight_saving():
    s = parse_schedule("daily 09:00 Europe/Berlin #ops")
    assert s.next_after(at(2025, 3, 29, 12, 0)) == at(2025, 3, 30, 7, 0)  # CEST from 30 March: UTC+2
    assert s.next_after(at(2025, 3, 28, 12, 0)) == at(2025, 3, 29, 8, 0)  # still CET: UTC+1


def test_every_is_aligned_to_midnight():
    s = parse_schedule("every 6h #ops")
    assert s.next_after(at(2025, 6, 2, 7, 13)) == at(2025, 6, 2, 12, 0)
    assert s.next_after(at(2025, 6, 2, 23, 0)) == at(2025, 6, 3, 0, 0)


async def test_scheduler_fires_each_due_time_once_with_an_injected_clock():
    clock = SimClock(at(2025, 6, 2, 8, 0))
    posted: list[tuple[str, dt.datetime]] = []

    async def post(s: Schedule, due: dt.datetime) -> None:
        posted.append((s.channel, due))

    sched = Scheduler(parse_schedules("daily 09:00 #ops; every 12h #b"), post, clock=clock, sleep=clock.sleep)
    while clock.now < at(2025, 6, 3, 12, 1).timestamp():
        await sched.run_pending()
        await clock.sleep(min((sched.next_due() - sched.now()).total_seconds(), 60))
    assert posted == [
        ("#ops", at(2025, 6, 2, 9, 0)),
        ("#b", at(2025, 6, 2, 12, 0)),
        ("#b", at(2025, 6, 3, 0, 0)),
        ("#ops", at(2025, 6, 3, 9, 0)),
        ("#b", at(2025, 6, 3, 12, 0)),
    ]
    assert max(clock.slept) <= 60  # wakes at least once a minute, so a clock jump is noticed


async def test_missed_times_are_skipped_not_caught_up():
    clock = SimClock(at(2025, 6, 2, 8, 0))
    posted = []

    async def post(s, due):
        posted.append(due)

    sched = Scheduler(parse_schedules("daily 09:00 #ops"), post, clock=clock, sleep=clock.sleep)
    clock.now = at(2025, 6, 5, 10, 0).timestamp()  # the bot was stopped for three days
    await sched.run_pending()
    await sched.run_pending()
    assert posted == []  # three stale digests help no one
    assert sched.next_due() == at(2025, 6, 6, 9, 0)
    clock.now = at(2025, 6, 6, 9, 10).timestamp()  # ten minutes late is still worth posting
    await sched.run_pending()
    assert posted == [at(2025, 6, 6, 9, 0)]


async def test_a_failing_post_does_not_stop_the_scheduler():
    clock = SimClock(at(2025, 6, 2, 8, 59))
    calls = []

    async def post(s, due):
        calls.append(due)
        raise RuntimeError("slack down")

    sched = Scheduler(parse_schedules("daily 09:00 #ops"), post, clock=clock, sleep=clock.sleep)
    clock.now += 120
    assert len(await sched.run_pending()) == 1
    assert await sched.run_pending() == []  # not retried in a loop
    assert sched.next_due() == at(2025, 6, 3, 9, 0)


async def test_digest_schedule_posts_to_the_channel_through_the_app(slack):
    bot = await slack.start_bot(digest_schedules="daily 09:00 #kafka-ops")
    clock = SimClock(at(2025, 6, 2, 8, 59, 30))
    sched = Scheduler(bot.digests.schedules, bot.digests.post, clock=clock, sleep=clock.sleep)
    await sched.run_pending()
    assert slack.stand.called("chat.postMessage") == []
    clock.now += 31
    fired = await sched.run_pending()
    assert [s.channel for s in fired] == ["#kafka-ops"]
    post = slack.stand.called("chat.postMessage")[0]
    assert post.args["channel"] == "#kafka-ops" and "thread_ts" not in post.args
    assert "Kafka daily digest" in json.dumps(post.args["blocks"])
    assert slack.digest.runs == 1
    rec = slack.audit("scheduled")[0]
    assert (
        rec["schedule"] == "daily 09:00 #kafka-ops"
        and rec["outcome"] == "answered"
        and rec["due"].startswith("2025-06-02T09:00")
    )


async def test_digest_on_demand_through_the_router(slack):
    await slack.slash("digest")
    replies = await slack.stand.wait_for(lambda: slack.stand.thread_replies())
    await slack.bot.drain(60)
    assert "Kafka daily digest" in json.dumps(replies[0].args["blocks"])


async def test_a_mutating_schedule_is_refused_at_start(slack):
    with pytest.raises(ValueError, match="changes the cluster"):
        await slack.start_bot(digest_schedules="daily 09:00 #ops fake-bump orders")
