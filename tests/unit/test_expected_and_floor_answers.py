"""`why URP` on a reassignment in progress, and `why NotEnoughReplicas` on a topic whose
min.insync.replicas equals its replication factor (issue 27, findings 3 and 5), on the in-memory
gateway: what leads the answer, what it names, and the steps it must never give."""

from __future__ import annotations

from action_fakes import FakeGateway, FakePool, cv

from bot.render import render_text
from commands.registry import answer
from diagnosis.reassignment_checks import move_progress, throttle_lines
from diagnosis.rules import PartitionState
from framework.context import Context
from live.model import LogDir, LogDirPartition, Reassignment


def _moving(throttled: bool = True) -> FakeGateway:
    """moves-0 (RF 2 on 101, 102) is being moved to 101, 103: 103 copies, 16 MB on the leader, 2 MB copied."""
    gw = FakeGateway(
        topics={"moves": [(101, [101, 103, 102], [101, 102])]},
        reassignments=[Reassignment("moves", 0, [101, 103, 102], [103], [102])],
    )
    gw.topic_cfg["moves"]["min.insync.replicas"] = cv("1")
    if throttled:
        for b in gw.brokers:
            for side in ("leader", "follower"):
                gw.broker_cfg[b][f"{side}.replication.throttled.rate"] = cv("1000", "DYNAMIC_BROKER_CONFIG")
        gw.topic_cfg["moves"]["leader.replication.throttled.replicas"] = cv("0:101,0:102")
        gw.topic_cfg["moves"]["follower.replication.throttled.replicas"] = cv("0:103")
    gw.dirs = [
        LogDir(101, "/d", None, [LogDirPartition("moves", 0, 16_000_000, 0)]),
        LogDir(103, "/d", None, [LogDirPartition("moves", 0, 2_000_000, 0)]),
    ]
    return gw


async def test_a_throttled_reassignment_leads_with_the_move_its_progress_and_the_throttle():
    reply = (await answer("why URP", Context(live=FakePool(_moving())))).reply
    assert reply.severity == "warning"
    assert reply.verdict.startswith("1 partitions are under-replicated by a reassignment in progress"), reply.verdict
    assert "moves-0 is adding broker 103 and removing 102, 12% copied (14.0 MB to go)" in reply.verdict
    assert "leader rate 1,000 B/s on broker 101, follower rate 1,000 B/s on broker 103" in reply.verdict
    top = reply.diagnoses[0]
    assert top.entry_id == "reassignment" and top.why_ranked.startswith("live:")
    assert [d.entry_id for d in reply.diagnoses[1:]] and "reassignment" not in [d.entry_id for d in reply.diagnoses[1:]]
    progress = next(e for e in reply.evidence if e.label == "Reassignment of moves-0")
    assert "leader 101 holds 16.0 MB, new replica 103 has 2.0 MB (14.0 MB still to copy)" in progress.value
    labels = [e.label for e in reply.evidence]
    assert "Broker 101, 102, 103 replication throttle" in labels and "Topic moves throttled replicas" in labels
    assert [a.command for a in reply.actions if a.mutating] == ["throttle set 50MB/s", "throttle clear"]
    text = render_text(reply)
    assert "Do now: Reassignment in progress" in text
    assert "`throttle set <rate>` or `throttle clear`" in text
    # the broker-loss steps, and a new reassignment, are what the user was told before
    assert "Do now: Broker loss" not in text and "Bring the missing broker back" not in text
    assert "--execute" not in text and "Run an unthrottled reassignment" not in text
    assert reply.followups[0] == "/kafka runbook reassignment"


async def test_an_unthrottled_reassignment_says_no_throttle_holds_it():
    reply = (await answer("why URP", Context(live=FakePool(_moving(throttled=False))))).reply
    assert "No replication throttle applies to it" in reply.verdict
    assert reply.diagnoses[0].entry_id == "reassignment"
    assert not [a for a in reply.actions if a.mutating]


async def test_a_dead_broker_during_a_reassignment_still_leads_with_the_broker():
    """Only when every missing replica is one being added is the move the answer."""
    gw = FakeGateway(
        brokers=(101, 103),
        topics={"moves": [(101, [101, 103, 102], [101])], "other": [(101, [101, 102], [101])]},
        reassignments=[Reassignment("moves", 0, [101, 103, 102], [103], [102])],
    )
    reply = (await answer("why URP", Context(live=FakePool(gw)))).reply
    assert reply.diagnoses[0].entry_id != "reassignment", reply.verdict


def test_a_throttle_holds_a_copy_only_where_the_topic_lists_the_replica():
    p = PartitionState("moves", 0, 101, (101, 103, 102), (101, 102), adding=(103,), removing=(102,))
    rates = {
        b: {"follower.replication.throttled.rate": cv("1000"), "leader.replication.throttled.rate": cv("2000")}
        for b in (101, 102, 103)
    }
    [m] = move_progress([p], None, rates, {"moves": {"follower.replication.throttled.replicas": cv("*")}})
    assert m.throttles == (
        (103, "follower.replication.throttled.rate", 1000),
    )  # no leader list: the leader is not throttled
    assert m.leader_bytes is None and m.to_copy() is None  # log dirs not read: no progress claimed
    [m] = move_progress([p], [LogDir(103, "/d", None, [])], rates, {})
    assert m.throttles == () and m.new_bytes == {103: 0}  # read, and nothing copied yet
    assert m.leader_bytes is None and m.to_copy() is None  # the leader's size is unknown
    unset = {101: {"leader.replication.throttled.rate": cv("9223372036854775807")}}
    assert throttle_lines(unset) == []


def _floor_gateway(min_isr: str) -> FakeGateway:
    """orders: RF 3, broker 103 gone, so every ISR is 101, 102."""
    gw = FakeGateway(
        brokers=(101, 102),
        topics={"orders": [(101, [101, 102, 103], [101, 102]), (102, [102, 103, 101], [102, 101])]},
    )
    gw.topic_cfg["orders"]["min.insync.replicas"] = cv(min_isr)
    return gw


async def test_min_isr_equal_to_rf_is_named_as_why_one_loss_stops_writes():
    reply = (await answer("why NotEnoughReplicas", Context(live=FakePool(_floor_gateway("3"))))).reply
    assert reply.severity == "critical" and reply.diagnoses[0].entry_id == "under-min-isr"
    assert "On orders min.insync.replicas equals the replication factor (3)" in reply.verdict, reply.verdict
    assert "set min.insync.replicas to 2 (RF - 1), or raise the replication factor to 4" in reply.verdict
    line = next(e for e in reply.evidence if e.label.startswith("min.insync.replicas = replication factor"))
    assert line.value == "orders (3 = 3)"
    assert "audit" in [a.command for a in reply.actions]


async def test_a_floor_below_rf_keeps_the_plain_answer():
    gw = FakeGateway(brokers=(101,), topics={"orders": [(101, [101, 102, 103], [101])]})
    reply = (await answer("why NotEnoughReplicas", Context(live=FakePool(gw)))).reply
    assert reply.verdict.endswith("Restore the missing replicas; do not lower min.insync.replicas."), reply.verdict
    assert not any(e.label.startswith("min.insync.replicas = replication factor") for e in reply.evidence)
