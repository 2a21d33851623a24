"""Evidence accounting (issue 35): what an answer read, and the rule that an OK needs its sources."""

from __future__ import annotations

from framework.reply import Reply
from framework.sources import collecting, honest, lone_silent_nodes, record, summary


def _reads(*states: tuple[str, str, int | None]):
    with collecting() as reads:
        record("admin", "read", 0.2)
        for source, state, node in states:
            record(
                source,
                state,
                1.0 if state == "read" else 6.0,
                "" if state == "read" else "no answer within 6.0 s",
                node=node,
            )
    return reads


def test_an_ok_with_a_source_unread_becomes_cant_tell():
    reads = _reads(
        ("exporter 101", "read", 101), ("exporter 102", "no answer", 102), ("exporter 103", "no answer", 103)
    )
    reply = honest(Reply("t", "ok", "The request handlers have idle time on every broker."), reads)
    assert reply.severity == "unknown" and reply.outcome == "partial"
    assert reply.verdict.startswith("Can't tell: exporter 102 (no answer within 6.0 s), exporter 103"), reply.verdict
    assert reply.evidence[0].label == "Not read" and reply.sources == reads


def test_one_node_alone_silent_is_a_finding_about_it():
    reads = _reads(("exporter 101", "read", 101), ("exporter 102", "read", 102), ("exporter 103", "no answer", 103))
    assert set(lone_silent_nodes(reads)) == {103}
    reply = honest(Reply("t", "ok", "No under-replicated partitions right now."), reads)
    assert reply.severity == "warning" and reply.verdict.startswith("Node 103 alone did not answer"), reply.verdict
    assert "why starved broker" in reply.verdict


def test_a_refused_exporter_is_not_a_starved_one_and_all_read_stays_ok():
    reads = _reads(("exporter 101", "read", 101), ("exporter 102", "failed", 102))
    assert lone_silent_nodes(reads) == {}
    ok = _reads(("exporter 101", "read", 101), ("exporter 102", "read", 102))
    reply = honest(Reply("t", "ok", "fine"), ok)
    assert (reply.severity, reply.verdict) == ("ok", "fine")
    assert summary(ok) == "admin read; exporter 2 read"


def test_outside_a_request_nothing_is_recorded():
    record("admin", "read", 0.1)  # no collecting(): a no-op, no error


def test_a_node_whose_port_refuses_is_dead_not_starved():
    with collecting() as reads:
        record("metadata 101", "read", 0.1, node=101)
        record("metadata 103", "failed", 0.1, "its port refuses connections", node=103)
        record("exporter 101", "read", 0.5, node=101)
        record("exporter 103", "no answer", 6.0, "no answer within 6.0 s", node=103)
    assert lone_silent_nodes(reads) == {}
