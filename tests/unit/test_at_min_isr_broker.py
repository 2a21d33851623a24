"""`at-min-isr --broker N` (issue 37: "is it safe to restart 103?"): the partitions a broker holds and
what taking it down would do (or, for a broker already gone, what its absence does now)."""

from __future__ import annotations

from action_fakes import FakeGateway, FakePool

from commands.registry import answer
from framework.context import Context
from runbook_kb import default_kb


def _ctx() -> Context:
    """Broker 103 is gone: orders (min ISR 2) is at min ISR on 101 and 102; clicks has a replica on
    101 and 102 only, all in sync."""
    gw = FakeGateway(
        brokers=(101, 102),
        topics={
            "orders": [(101, [101, 102, 103], [101, 102]), (102, [102, 103, 101], [102, 101])],
            "clicks": [(101, [101, 102], [101, 102])],
        },
    )
    return Context(live=FakePool(gw), kb=default_kb())


async def test_restarting_a_broker_that_holds_the_last_spare_replicas_is_not_safe():
    reply = (await answer("at-min-isr --broker 102", _ctx())).reply
    assert reply.severity == "critical"
    assert reply.verdict.startswith("Not safe to take broker 102 down now: 3 partition(s) would go under min ISR")
    rows = {r[0]: r for r in reply.tables[0].rows}
    assert set(rows) == {"orders-0", "orders-1", "clicks-0"} and rows["orders-0"][1] == "101"


async def test_a_broker_already_gone_is_shown_with_what_its_absence_does():
    reply = (await answer("at-min-isr --broker 103", _ctx())).reply
    assert reply.verdict.startswith("Broker 103 is gone: 2 partition(s) it holds are without it")
    assert "none is under its min ISR" in reply.verdict


async def test_a_broker_that_holds_nothing_of_the_topic_changes_nothing():
    reply = (await answer("at-min-isr clicks --broker 103", _ctx())).reply
    assert reply.severity in ("ok", "warning") and "holds no replica of clicks" in reply.verdict
