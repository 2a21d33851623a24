"""The latency map read live (diagnosis/latency.py): each broker's Produce p99 split into its five
parts, the slowest broker's dominant part named with the failure modes the runbook's map points
it at, and the map's warning line (reference/latency.yaml) deciding the severity."""

from __future__ import annotations

from diagnosis.latency import latency_findings, latency_map, splits
from live import exporters
from runbook_kb import default_kb

PARTS = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs", "ResponseSendTimeMs")


def _reading(p99: dict[tuple[int, str], dict[str, float]], failed: dict[int, str] | None = None) -> exporters.Reading:
    samples = []
    for (node, request), parts in p99.items():
        total = sum(parts.values())
        for metric, value in {**parts, "TotalTimeMs": total}.items():
            for q, v in (("0.5", value / 4), ("0.99", value)):  # only the p99 may count
                samples.append(
                    exporters.Sample(
                        node,
                        "kafka_network_requestmetrics_" + metric.lower(),
                        (("quantile", q), ("request", request)),
                        v,
                    )
                )
    return exporters.Reading(samples=samples, failed=dict(failed or {}))


def _split(queue=0.1, local=1.0, remote=2.0, rqueue=0.1, send=0.1) -> dict[str, float]:
    return dict(zip(PARTS, (queue, local, remote, rqueue, send)))


def test_the_parts_and_the_warning_line_come_from_the_runbooks_latency_map():
    lmap = latency_map(default_kb())
    assert [c.metric for c in lmap.components][:5] == list(PARTS)
    assert lmap.alert_p99_ms["Produce"] == 100
    by = {c.metric: c.entries for c in lmap.components}
    assert by["LocalTimeMs"][0] == "page-cache-cold-reads" and by["RemoteTimeMs"][0] == "slow-follower"


def test_a_slow_leader_disk_is_named_with_the_entries_local_time_points_at():
    reading = _reading(
        {
            (101, "Produce"): _split(),
            (102, "Produce"): _split(remote=3.0),
            (103, "Produce"): _split(local=240.0, remote=5.0),
            (103, "FetchConsumer"): _split(remote=500.0),  # the long-poll wait: shown, never judged
        }
    )
    f = latency_findings(reading)
    assert f.severity == "warning"
    assert f.verdict.startswith("Produce p99 is highest on broker 103: 245 ms; the next 102 4.3 ms, 101 3.3 ms.")
    assert "LocalTimeMs is 240 ms of it (98%): the leader's storage path is slow" in f.verdict
    assert [e for e, _ in f.lead] == ["page-cache-cold-reads", "gc-pauses", "full-disk"]
    lines = {e.label: e.value for e in f.evidence}
    assert lines["Broker 103 Produce"].startswith("p99 245 ms = RequestQueue 0.1 ms, Local 240 ms, Remote 5.0 ms")
    assert lines["Broker 103 Produce"].endswith("LocalTimeMs dominates")
    assert "Broker 103 FetchConsumer" in lines


def test_waiting_on_followers_points_at_the_followers():
    f = latency_findings(_reading({(101, "Produce"): _split(remote=180.0), (102, "Produce"): _split()}))
    assert f.severity == "warning" and "RemoteTimeMs is 180 ms" in f.verdict
    assert [e for e, _ in f.lead] == ["slow-follower", "under-min-isr"]


def test_a_healthy_produce_path_is_ok_and_says_so():
    f = latency_findings(_reading({(101, "Produce"): _split(), (102, "Produce"): _split(local=4.0)}))
    assert f.severity == "ok" and not f.lead
    assert "under the runbook's 100 ms warning line: nothing to chase on latency" in f.verdict


def test_no_produce_timer_and_a_silent_exporter_are_said_not_guessed():
    f = latency_findings(_reading({}, failed={102: "no answer within 10 s"}))
    assert f.severity == "warning" and f.verdict.startswith("No broker reported a Produce latency split")
    assert any(e.label == "Node 102 exporter" and e.status == "bad" for e in f.evidence)
    assert splits(_reading({(101, "FetchConsumer"): _split()}), latency_map(default_kb()).components)[0].request == (
        "FetchConsumer"
    )
