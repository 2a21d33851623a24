"""The page-cache cold-reads rule (diagnosis/cold_reads.py) on evidence recorded from the lab's
page-cache-cold-reads mode (broker 103 capped to ~48 MB of page cache, a group catching up on a
192 MB topic it leads): 103 read ~6 MiB/s from disk, 101 and 102 nothing, the group ~1,300
records of 100 kB behind."""

from __future__ import annotations

from diagnosis import cold_reads as cr
from diagnosis import latency
from live import exporters

RATE, LAG = cr.thresholds()


PARTS = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs")


def _p99(broker: int, request: str, total: float, *parts: float) -> latency.Split:
    """A p99 split as diagnosis/latency.py reads it: queue, local, remote and send keyed by their timer."""
    return latency.Split(broker, request, total, dict(zip(PARTS, parts, strict=True)))


RECORDED = [
    cr.BrokerReads(101, 0.0, _p99(101, "Produce", 30, 0, 6, 22, 0), latency.Split(101, "FetchConsumer", 1, {})),
    cr.BrokerReads(102, 0.0, _p99(102, "Produce", 0, 0, 0, 0, 0), None),
    cr.BrokerReads(
        103,
        6.3 * 2**20,
        _p99(103, "Produce", 18, 0, 14, 3, 0),
        _p99(103, "FetchConsumer", 60, 0, 14, 40, 5),
    ),
]
CATCH_UP = cr.GroupBehind("lab-catch-up", 1339, ["lab-cold-reads-0", "lab-cold-reads-1", "lab-cold-reads-2"], [103])


def test_thresholds_come_from_the_runbook():
    assert RATE == 1 << 20 and LAG == 500


def test_a_broker_reading_from_disk_with_a_group_behind_is_cold_reads_on_that_broker():
    f = cr.cold_read_findings(RECORDED, [CATCH_UP], rate_min=RATE, lag_min=LAG)
    assert f.severity == "warning"
    assert f.lead and f.lead[0][0] == "page-cache-cold-reads" and "broker 103" in f.lead[0][1]
    assert f.verdict.startswith("Broker 103 reads 6.3 MiB/s from disk (the others at most 0.0 MiB/s)")
    assert "Group lab-catch-up is 1,339 records behind" in f.verdict
    assert "nothing needs to move" in f.verdict
    by_label = {e.label: e for e in f.evidence}
    assert by_label["Broker 103 disk reads"].status == "bad"
    assert by_label["Broker 101 disk reads"].status == "ok"  # against, on the other brokers
    assert by_label["Group lab-catch-up"].status == "bad"
    assert by_label["Handler saturation"].status == "ok"  # queue 0 of 18 ms: against
    assert by_label["Broker 103 Produce p99"].value.startswith("18 ms (queue 0, local 14")
    assert [a.command for a in f.actions] == ["lag lab-catch-up"]
    assert not any(a.mutating for a in f.actions)


def test_no_disk_reads_argues_against_even_with_a_group_behind():
    cached = [cr.BrokerReads(b.broker, 2048.0, b.produce, b.fetch) for b in RECORDED]
    f = cr.cold_read_findings(cached, [CATCH_UP], rate_min=RATE, lag_min=LAG)
    assert f.severity == "ok" and not f.lead
    assert "not cold reads" in f.verdict and "its reads hit the cache" in f.verdict


def test_disk_reads_without_a_reader_say_what_would_decide():
    f = cr.cold_read_findings(RECORDED, [], rate_min=RATE, lag_min=LAG)
    assert f.severity == "warning" and f.lead[0][0] == "page-cache-cold-reads"
    assert "the reader is not identified" in f.verdict and "What decides it" in f.verdict


def test_unread_gauge_is_not_a_verdict():
    blind = [cr.BrokerReads(b.broker, None) for b in RECORDED]
    f = cr.cold_read_findings(blind, [CATCH_UP], rate_min=RATE, lag_min=LAG)
    assert "unknown" in f.verdict and "/proc/<broker pid>/io" in f.verdict
    assert f.severity == "warning" and f.lead[0][0] == "page-cache-cold-reads"
    f = cr.cold_read_findings(blind, [], rate_min=RATE, lag_min=LAG)
    assert f.severity == "unknown" and not f.lead


def test_disk_read_rate_from_two_readings():
    one = exporters.Reading([exporters.Sample(103, cr.DISK_READ, (), 100.0)], at=10.0)
    two = exporters.Reading(
        [exporters.Sample(103, cr.DISK_READ, (), 100.0 + 3 * 2**20), exporters.Sample(101, cr.DISK_READ, (), 5.0)],
        at=11.5,
    )
    assert cr.disk_read_rates(one, two) == {103: 2 * 2**20}  # 101 was read once: no rate


def test_the_p99_split_is_latencys_reading_of_requestmetrics():
    timers = {"TotalTimeMs": 18, "RequestQueueTimeMs": 0, "LocalTimeMs": 14, "RemoteTimeMs": 3}
    timers |= {"ResponseQueueTimeMs": 1, "ResponseSendTimeMs": 0}
    samples = [
        exporters.Sample(103, "kafka_network_requestmetrics_" + m.lower(), (("quantile", q), ("request", "Produce")), v)
        for m, ms in timers.items()
        for q, v in (("0.5", ms / 4), ("0.99", ms))
    ]
    p99 = latency.p99_splits(exporters.Reading(samples))
    assert latency.timer_series() >= {s.name for s in samples}  # what check_cold_reads asks the exporters for
    broker = cr.BrokerReads(103, 6.3 * 2**20, p99.get((103, "Produce")), p99.get((103, "FetchConsumer")))
    f = cr.cold_read_findings([broker], [CATCH_UP], rate_min=RATE, lag_min=LAG)
    by_label = {e.label: e.value for e in f.evidence}
    assert by_label["Broker 103 Produce p99"] == "18 ms (queue 0, local 14, remote 3, send 0)"  # the shown parts
    assert by_label["Broker 103 FetchConsumer p99"] == "not exported"
