"""The metadata diff of "what changed?" (live/change_events.py), on snapshots built in code:
a baseline is no burst of changes, each kind of change is one event with its before and after,
many leaderships moving at once are one summary, and a sensitive value is never in an event."""

from dataclasses import replace

from live.change_events import (
    SENSITIVE,
    BrokerState,
    GroupState,
    MetadataSnapshot,
    Move,
    TopicState,
    carry_forward,
    diff,
    sensitive_digest,
)


def snap(at=1_000, **parts):
    base = dict(
        brokers={b: BrokerState(endpoint=f"h:{b}", started_ms=100) for b in (101, 102, 103)},
        controller=1,
        controller_epoch=5,
        topics={"orders": TopicState(3, 3, {"min.insync.replicas": "2"})},
        leaders={("orders", p): 101 + p for p in range(3)},
        replicas={("orders", p): (101, 102, 103) for p in range(3)},
        broker_configs={"cluster": {}, "101": {}},
        acls=frozenset({"ALLOW User:app WRITE TOPIC orders"}),
        quotas={},
        reassignments={},
        groups={"billing": GroupState("STABLE", frozenset({"app-1@h1"}), "range", 4)},
    )
    base.update(parts)
    return MetadataSnapshot(at_ms=at, **base)


def test_a_first_snapshot_is_a_baseline_and_an_unchanged_one_is_silent():
    assert diff(None, snap()) == []
    assert diff(snap(), snap(at=2_000)) == []


def test_each_kind_of_change_is_one_event_with_before_and_after():
    before = snap()
    after = snap(
        at=61_000,
        brokers={**before.brokers, 102: replace(before.brokers[102], started_ms=60_500)},
        controller=2,
        controller_epoch=6,
        topics={
            "orders": TopicState(6, 3, {"min.insync.replicas": "3", "retention.ms": "60000"}),
            "payments": TopicState(1, 3),
        },
        broker_configs={"cluster": {"log.retention.hours": "1"}, "101": {}},
        acls=frozenset(),
        quotas={"client-id=slowapp": {"producer_byte_rate": 1024.0}},
        groups={"billing": GroupState("STABLE", frozenset({"app-1@h1", "app-2@h2"}), "range", 5)},
    )
    events = {(e.kind, e.resource, e.change): (e.before, e.after) for e in diff(before, after)}
    assert events[("broker", "broker 102", "restarted")] == ("started at 100 ms", "started at 60500 ms")
    assert events[("controller", "controller", "active controller 1 -> 2 (epoch 5 -> 6)")] == ("1", "2")
    assert events[("topic", "topic payments", "created")] == (None, "1 partitions, RF 3")
    assert events[("topic", "topic orders", "partitions 3 -> 6")] == ("3", "6")
    assert events[("config", "topic orders", "min.insync.replicas 2 -> 3")] == ("2", "3")
    assert events[("config", "topic orders", "retention.ms set to 60000")] == (None, "60000")
    assert events[("broker_config", "cluster (all brokers)", "log.retention.hours set to 1")] == (None, "1")
    assert events[("acl", "ALLOW User:app WRITE TOPIC orders", "ACL removed")][1] is None
    assert events[("quota", "client-id=slowapp", "quota producer_byte_rate set to 1024")] == (None, "1024")
    assert ("group", "group billing", "1 member(s) joined: app-2@h2") in events


def test_many_leaderships_moving_at_once_are_one_summary():
    n = 1_204
    leaders = {("t", p): 102 for p in range(n)}
    moved = {("t", p): (101 if p % 2 else 103) for p in range(n)}
    events = diff(snap(leaders=leaders), snap(at=2_000, leaders=moved))
    assert len(events) == 1
    assert events[0].change == "1,204 leaderships moved from 102 to 101/103" and events[0].count == n
    few = diff(snap(), snap(at=2_000, leaders={("orders", 0): 102, ("orders", 1): 102, ("orders", 2): 103}))
    assert [e.change for e in few] == ["leadership 101 -> 102"]


def test_a_reassignment_is_seen_starting_and_finishing():
    moving = {("orders", 0): Move((104,), (103,))}
    started = diff(snap(), snap(at=2_000, reassignments=moving))
    assert [e.change for e in started] == ["reassignment started: adding 104, removing 103"]
    replicas = {**snap().replicas, ("orders", 0): (101, 102, 104)}
    finished = diff(snap(reassignments=moving), snap(at=3_000, reassignments={}, replicas=replicas))
    assert "reassignment finished" in [e.change for e in finished]
    cancelled = diff(snap(reassignments=moving), snap(at=3_000, reassignments={}))
    assert "reassignment cancelled (the replicas went back)" in [e.change for e in cancelled]


def test_a_sensitive_value_is_never_in_an_event():
    secret_a, secret_b = "hunter2", "correct horse"
    old = {"orders": TopicState(3, 3, {"sasl.jaas.config": sensitive_digest(secret_a)})}
    new = {"orders": TopicState(3, 3, {"sasl.jaas.config": sensitive_digest(secret_b)})}
    events = diff(snap(topics=old), snap(at=2_000, topics=new))
    assert [e.change for e in events] == ["sasl.jaas.config changed (sensitive: value not kept)"]
    row = str(events[0].to_row())
    assert secret_a not in row and secret_b not in row and "sha256" not in row
    assert events[0].before == events[0].after == SENSITIVE


def test_a_part_not_read_makes_no_events():
    """ACLs not describable this round (None) are not 'every ACL removed'."""
    assert diff(snap(), snap(at=2_000, acls=None, quotas=None, groups=None)) == []


def test_a_restart_seen_a_round_late_is_still_seen():
    """Broker 102's exporter did not answer the round after its restart: that round keeps the old
    start time (no event, no lost state), and the next round sees the restart."""
    first = snap()
    unread = carry_forward(first, snap(at=2_000, brokers={**first.brokers, 102: BrokerState(endpoint="h:102")}))
    assert diff(first, unread) == []
    restarted = carry_forward(
        unread, snap(at=3_000, brokers={**first.brokers, 102: BrokerState(endpoint="h:102", started_ms=2_500)})
    )
    assert [(e.resource, e.change) for e in diff(unread, restarted)] == [("broker 102", "restarted")]


def test_a_quota_is_shown_as_kafka_configs_shows_it():
    before = MetadataSnapshot(at_ms=1, brokers={}, quotas={"client-id=app": {"producer_byte_rate": 1048576.0}})
    after = MetadataSnapshot(
        at_ms=2, brokers={}, quotas={"client-id=app": {"producer_byte_rate": 2097152.0, "request_percentage": 12.5}}
    )
    changes = sorted(e.change for e in diff(before, after))
    assert changes == ["quota producer_byte_rate 1048576 -> 2097152", "quota request_percentage set to 12.5"]
