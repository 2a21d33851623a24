"""The lake's lines checked against the live read of the same answer (diagnosis.lake_vs_live)."""

import dataclasses
import datetime as dt

from diagnosis.findings import LiveFacts
from diagnosis.lake_evidence import LakeFindings, Window
from diagnosis.lake_vs_live import check_against_live
from framework.reply import Evidence, Series

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
        "no ISR shrinks or expands [as of 03:14:20 UTC, 40 s old: from before the live read, which finds 18 "
        "partition(s) under-replicated now]"
    )


def test_a_line_about_a_broker_that_left_says_so_and_stops_counting_as_bad():
    trend = Evidence("URP trend, broker 102", "fluctuating: between 0 and 3", "lake: urp_trend", "bad")
    other = Evidence("URP trend, broker 103", "flat: level at 18", "lake: urp_trend", "bad")
    [_, gone, kept] = check_against_live(lake(trend, other), live(urp=18, missing={102}), END.timestamp()).evidence
    assert gone.status == "neutral" and "broker 102 is not in the cluster now" in gone.value
    # consistent with the live read: left as it was, with its data's age
    assert kept == Evidence(other.label, "flat: level at 18 (lake data to 03:14:20 UTC, 40 s old)", other.source, "bad")


def test_an_unhealthy_lake_line_after_recovery_is_marked_past():
    trend = Evidence("URP trend, broker 101", "fluctuating: between 0 and 11, last 11", "lake: urp_trend", "bad")
    [_, line] = check_against_live(lake(trend), live(urp=0), END.timestamp()).evidence
    assert line.status == "neutral" and line.value.endswith(
        "[as of 03:14:20 UTC, 40 s old: the live read finds none under-replicated now: recovered since]"
    )


def test_without_a_live_read_only_the_data_end_is_added():
    trend = Evidence("URP trend, broker 101", "flat", "lake: urp_trend", "bad")
    out = check_against_live(lake(trend), None, END.timestamp())
    assert [e.source for e in out.evidence] == ["lake: freshness", "lake: urp_trend"]
    assert out.evidence[1] == Evidence(trend.label, "flat (lake data to 03:14:20 UTC, 40 s old)", trend.source, "bad")


def test_a_lake_without_data_gets_no_data_end_line():
    empty = LakeFindings(WINDOW, evidence=[Evidence("Metric lake", "no data", "lake: urp_trend")], has_data=False)
    assert check_against_live(empty, live(urp=3), END.timestamp()).evidence == empty.evidence


def test_every_lake_line_shows_its_datas_age():
    lines = [
        Evidence("URP trend, broker 101", "flat: level at 5", "lake: urp_trend", "bad"),
        Evidence("Handler idle, broker 101", "avg 80%", "lake: request_handler_idle", "ok"),
    ]
    out = check_against_live(lake(*lines), live(urp=5), END.timestamp())
    assert all(e.value.endswith("(lake data to 03:14:20 UTC, 40 s old)") for e in out.evidence[1:]), out.evidence


def reported_by(broker: int, share: str = "56%") -> Evidence:
    return Evidence(
        "URP reported mostly by",
        f"broker {broker}: {share} of the cluster's URP (mean 9.0, max 10), as the leader of the partitions "
        "missing a replica: the missing replicas may be on another broker",
        "lake: urp_concentration",
        "bad",
    )


def test_the_broker_reporting_the_urp_is_dropped_when_the_live_read_finds_the_replicas_missing_elsewhere():
    """Broker 102 dead: its partitions' leaders (101, 103) report the URP, and the lake said "URP
    concentrates on broker 103: 56%". The live read knows the missing replicas are 102's."""
    out = check_against_live(lake(reported_by(103)), live(urp=18, missing={102}), END.timestamp())
    assert not [e for e in out.evidence if e.source == "lake: urp_concentration"], out.evidence
    assert out.notes == [
        "Left out the lake's 'URP reported mostly by broker 103: 56% of the cluster's URP (mean 9.0, max 10)': "
        "URP is counted by each partition's leader, and the live read finds the missing replicas on broker(s) "
        "102 (not in the cluster now)."
    ]


def test_a_slow_followers_replicas_out_of_isr_name_where_they_are_missing():
    facts = LiveFacts(under_replicated=6, offline=0, missing_brokers=frozenset(), out_of_isr={103: 6, 101: 1})
    dropped = check_against_live(lake(reported_by(101)), facts, END.timestamp())
    assert not dropped.evidence[1:] and "missing replicas on broker(s) 103." in dropped.notes[0]
    kept = check_against_live(lake(reported_by(103)), facts, END.timestamp())
    assert [e.label for e in kept.evidence[1:]] == ["URP reported mostly by"] and not kept.notes


def chart(values: list[float]) -> Series:
    return Series(
        "UnderReplicatedPartitions",
        "partitions",
        [(f"2026-11-27T03:{10 + i:02d}:00+00:00", v) for i, v in enumerate(values)],
        label="broker 101",
    )


def test_a_chart_whose_now_contradicts_the_live_read_is_dropped_with_the_reason():
    """After a recovery the chart said "now 11" beside the live read's 0."""
    findings = dataclasses.replace(lake(), series=[chart([0, 11, 11])])
    out = check_against_live(findings, live(urp=0), END.timestamp())
    assert out.series == []
    assert out.notes == [
        "The lake's UnderReplicatedPartitions chart is left out: it ends at 11 (its data ends 03:14:20 UTC), "
        "and the live read finds 0 partition(s) under-replicated now."
    ]
    agreeing = check_against_live(findings, live(urp=9), END.timestamp())
    assert agreeing.series == findings.series and not agreeing.notes
    without_live = check_against_live(findings, None, END.timestamp())
    assert without_live.series == findings.series
