"""The digest's words for how old the lake's data is (the lake query itself is covered end to
end in test_prometheus_source_e2e.py)."""

from __future__ import annotations

import datetime as dt

from commands.digest import describe_age, freshness
from diagnosis.lake_evidence import FRESH_S

END = dt.datetime(2024, 5, 1, 10, 42, 10, tzinfo=dt.timezone.utc)


def test_fresh_data_names_its_end_and_age():
    assert freshness(END, END.timestamp() + 35) == ("lake data to 10:42:10 UTC, 35 s old", False)


def test_data_older_than_the_symptom_commands_trust_is_stale():
    text, stale = freshness(END, END.timestamp() + FRESH_S + 1)
    assert stale and text == f"lake data to 10:42:10 UTC, {describe_age(FRESH_S + 1)} old"
    assert freshness(None, END.timestamp()) == ("no lake data in the window", True)


def test_ages_read_naturally():
    assert [describe_age(s) for s in (0, 119, 120, 7199, 7200 + 300, 3 * 86_400 + 4 * 3600)] == [
        "0 s",
        "119 s",
        "2 min",
        "1 h 59 min",
        "2 h 5 min",
        "3 d 4 h",
    ]
