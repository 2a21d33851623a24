"""audit's durability rules (issue 27 B): pure logic, and the command on the in-memory gateway."""

import pytest
from action_fakes import FakeGateway, FakePool, cv

from commands.registry import answer
from diagnosis.durability import audit_topic
from framework.context import Context


def _findings(rf, min_isr, unclean=False):
    return [(f.severity, f.text) for f in audit_topic("t", rf, min_isr, unclean)]


@pytest.mark.parametrize("rf", [2, 3, 4, 5])
def test_min_isr_equal_to_rf_is_critical_and_says_what_to_change(rf):
    found = audit_topic("t", rf, rf, False)
    assert [f.severity for f in found] == ["critical"], found
    text = found[0].text
    assert f"min.insync.replicas={rf} = RF={rf}" in text
    assert "one broker down, restarting or lagging stops every acks=all write" in text
    assert found[0].entry == "under-min-isr"
    if rf >= 3:
        assert f"set min.insync.replicas to {rf - 1} (RF - 1), or raise the replication factor to {rf + 1}" in text
    else:  # RF 2: min ISR 1 would be a single copy; more replicas are the fix
        assert "raise the replication factor to 3" in text and "set min.insync.replicas to 2" in text


def test_min_isr_above_rf_is_clamped_and_leaves_no_replica_to_spare():
    ((severity, text),) = _findings(3, 4)
    assert severity == "critical"
    assert "min.insync.replicas=4 > RF=3: silently clamped to 3" in text
    assert "one replica out of the ISR stops every acks=all write" in text
    assert "set min.insync.replicas to 2 (RF - 1), or raise the replication factor to 5" in text


def test_rf1_with_a_higher_min_isr_keeps_both_findings():
    found = _findings(1, 2)
    assert [s for s, _ in found] == ["critical", "critical"]
    assert "min.insync.replicas=2 > RF=1: silently clamped to 1, so acks=all is satisfied by 1 copy" in found[0][1]
    assert "stops every acks=all write" not in found[0][1]  # RF 1 has no replica to lose first
    assert found[1][1].startswith("RF=1:")


@pytest.mark.parametrize(
    "rf,min_isr,expected",
    [
        (3, 2, []),  # the recommended layout
        (5, 3, []),
        (4, 2, []),
        (3, 1, [("warning", "min.insync.replicas=1 with RF=3")]),
        (2, 1, [("warning", "RF=2 with min.insync.replicas=1")]),
        (1, 1, [("critical", "RF=1:")]),
    ],
)
def test_layouts_below_rf(rf, min_isr, expected):
    found = _findings(rf, min_isr)
    assert [s for s, _ in found] == [s for s, _ in expected]
    assert all(needle in text for (_, text), (_, needle) in zip(found, expected))


def test_unclean_is_flagged_beside_the_min_isr_finding():
    found = _findings(3, 3, unclean=True)
    assert [s for s, _ in found] == ["critical", "critical"]
    assert "unclean.leader.election.enable=true" in found[1][1]


async def test_audit_command_flags_min_isr_equal_to_rf_from_the_topic_configs():
    gw = FakeGateway(
        topics={
            "orders": [(101, [101, 102, 103], [101, 102, 103])],
            "payments": [(102, [102, 103, 101], [102, 103, 101])],
        }
    )
    gw.topic_cfg["payments"]["min.insync.replicas"] = cv("3")
    done = await answer("audit", Context(live=FakePool(gw)))
    reply = done.reply
    assert done.outcome == "answered" and reply.severity == "critical", reply.verdict
    lines = next(s.lines for s in reply.sections if s.heading == "Findings")
    assert len(lines) == 1 and lines[0].startswith("[critical] payments: min.insync.replicas=3 = RF=3"), lines
    assert "see /kafka runbook under-min-isr" in lines[0]
