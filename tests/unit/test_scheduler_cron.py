"""Digest schedules as cron expressions (croniter), and every shorthand as the cron it stands for."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.scheduler import UTC, ScheduleError, parse_schedule


def at(*args) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_a_cron_expression_with_zone_channel_and_command():
    s = parse_schedule("0 9 * * 1-5 Europe/Berlin #kafka-ops digest --cluster prod")
    assert (s.cron, s.zone, s.channel, s.text) == (
        "0 9 * * 1-5",
        "Europe/Berlin",
        "#kafka-ops",
        "digest --cluster prod",
    )
    assert s.next_after(at(2025, 6, 6, 8, 0)) == at(2025, 6, 9, 7, 0)  # Friday 10:00 Berlin -> Monday 09:00 (UTC+2)
    every = parse_schedule("*/30 * * * * C0OPS status")
    assert every.next_after(at(2025, 6, 2, 7, 13)) == at(2025, 6, 2, 7, 30) and every.text == "status"


@pytest.mark.parametrize(
    "line,cron",
    [
        ("daily 09:00 #ops", "0 9 * * *"),
        ("weekdays 08:30 #ops", "30 8 * * 1,2,3,4,5"),
        ("weekends 10:00 #ops", "0 10 * * 6,0"),
        ("mon,thu 07:05 #ops", "5 7 * * 1,4"),
        ("every 15m #ops", "*/15 * * * *"),
        ("every 6h #ops", "0 */6 * * *"),
    ],
)
def test_shorthands_are_cron_expressions(line, cron):
    assert parse_schedule(line).cron == cron


@pytest.mark.parametrize(
    "line,needle",
    [
        ("61 9 * * * #ops", "not a valid cron expression"),
        ("0 9 * * 1-5 Mars/Olympus #ops", "unknown time zone"),
        ("0 9 * * * ops", "channel"),
        ("every 90m #ops", "divide an hour"),
    ],
)
def test_cron_errors_say_what_is_wrong(line, needle):
    with pytest.raises(ScheduleError, match=needle):
        parse_schedule(line)
