"""A long hot-partitions window whose minute rollup cannot answer is ranked over its last hour of
raw samples only (they are read into the bot's memory), and the answer says from when."""

import datetime as dt

from window_queries.hot import HOT_QUESTION, HOT_ROLLUP_QUESTION, RAW_MAX_S, ask_hot

END = dt.datetime(2026, 11, 27, 4, 0, tzinfo=dt.timezone.utc)


async def _asked(since: dt.timedelta):
    calls = []

    async def ask(question, start, end, *args):
        calls.append((question, start, end))
        if question is HOT_ROLLUP_QUESTION:
            return {"resolution": None}  # the rollup has not caught up
        return {"rows": [], "series": [], "data_end": None, "resolution": "raw", "raw_from": None}

    facts = await ask_hot(ask, END - since, END)
    return calls, facts


async def test_a_day_with_the_rollup_behind_is_ranked_over_the_last_hour_of_raw_samples():
    calls, facts = await _asked(dt.timedelta(hours=24))
    assert [c[0] for c in calls] == [HOT_ROLLUP_QUESTION, HOT_QUESTION]
    assert calls[1][1:] == (END - dt.timedelta(seconds=RAW_MAX_S), END)
    assert facts["ranked_from"] == END - dt.timedelta(seconds=RAW_MAX_S)


async def test_a_short_window_is_ranked_whole_from_raw_samples():
    calls, facts = await _asked(dt.timedelta(minutes=15))
    assert [(c[0], c[1]) for c in calls] == [(HOT_QUESTION, END - dt.timedelta(minutes=15))]
    assert facts["ranked_from"] is None
