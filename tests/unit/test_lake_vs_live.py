"""The lake's lines checked against the live read of the same answer (diagnosis.lake_vs_live)."""

import datetime as dt

from diagnosis.findings import LiveFacts
from diagnosis.lake_evidence import LakeFindings, Window
from diagnosis.lake_vs_live import check_against_live
from framework.reply import Evidence

END = dt.datetime(2026, 11, 27, 3, 15, tzinfo=dt.timezone.utc)
WINDOW = Window(END - dt.timedelta(minutes=15), END, dt.timedelta(minutes=15))
NEWEST = (END - dt.timedelta(seconds=40)).timestamp()


def lake(*evidence: Evidence) -> LakeFindings:
    return LakeFindings(WINDOW, evidence=list(evidence), newest=NEWEST)


def live(urp: int = 0, offline: int = 0, missing=()) -> LiveFacts:
    return LiveFacts(under_replicated=urp, offline=offline, missing_brokers=frozenset(missing))


def test_the_lakes_lines_open_with_where_its_data_ends():
    out = check_against_live(
        lake(Evidence("URP trend", "0 on all 3", "lake: urp_trend", "ok")), live(), END.timestamp()
    )
    assert (out.evidence[0].label, out.evidence[0].value) == (
        "Metric lake",
        "data to 03:14:20 UTC, 40 s before this answer",
    )
    assert out.evidence[1].status == "ok"  # healthy in the lake and now: nothing to mark


def test_a_healthy_lake_line_under_a_live_fault_is_marked_as_from_before_it():
    churn = Evidence("ISR churn", "no ISR shrinks or expands", "lake: isr_churn", "ok")
    [_, line] = check_against_live(lake(churn), live(urp=18, missing={102}), END.timestamp()).evidence
    assert line.status == "neutral"
    assert line.value == (
        "no ISR shrinks or expands [as of 03:14:20 UTC: from before the live read, which finds 18 partition(s) "
        "under-replicated now]"
    )


def test_a_line_about_a_broker_that_left_says_so_and_stops_counting_as_bad():
    trend = Evidence("URP trend, broker 102", "fluctuating: between 0 and 3", "lake: urp_trend", "bad")
    other = Evidence("URP trend, broker 103", "flat: level at 18", "lake: urp_trend", "bad")
    [_, gone, kept] = check_against_live(lake(trend, other), live(urp=18, missing={102}), END.timestamp()).evidence
    assert gone.status == "neutral" and "broker 102 is not in the cluster now" in gone.value
    assert kept == other  # consistent with the live read: left as it was


def test_an_unhealthy_lake_line_after_recovery_is_marked_past():
    trend = Evidence("URP trend, broker 101", "fluctuating: between 0 and 11, last 11", "lake: urp_trend", "bad")
    [_, line] = check_against_live(lake(trend), live(urp=0), END.timestamp()).evidence
    assert line.status == "neutral" and line.value.endswith(
        "[as of 03:14:20 UTC: the live read finds none under-replicated now: recovered since]"
    )


def test_without_a_live_read_only_the_data_end_is_added():
    trend = Evidence("URP trend, broker 101", "flat", "lake: urp_trend", "bad")
    out = check_against_live(lake(trend), None, END.timestamp())
    assert [e.source for e in out.evidence] == ["lake: freshness", "lake: urp_trend"] and out.evidence[1] == trend


def test_a_lake_without_data_gets_no_data_end_line():
    empty = LakeFindings(WINDOW, evidence=[Evidence("Metric lake", "no data", "lake: urp_trend")], has_data=False)
    assert check_against_live(empty, live(urp=3), END.timestamp()).evidence == empty.evidence
