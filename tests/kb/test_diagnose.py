"""Pure diagnosis rules: KIP-427 categories, the effective-min-ISR clamp, URP causes."""

import pytest

from diagnosis.rules import (
    BrokerFacts,
    PartitionState,
    categories,
    effective_min_isr,
    is_under_replicated,
    missing_brokers,
    urp_findings,
)
from runbook_kb import default_kb


def P(isr, replicas=(0, 1, 2), min_isr=2, leader=0, topic="t", partition=0, adding=()):
    return PartitionState(topic, partition, leader, tuple(replicas), tuple(isr), min_isr, tuple(adding))


def test_every_worked_example_of_kip_427_in_the_kb():
    """The KB's worked examples (typed from the KIP) are reproduced by the rules."""
    examples = default_kb().reference["partition_categories"].examples
    assert len(examples) >= 3
    for ex in examples:
        replicas = tuple(ex.initial_isr)
        assert len(replicas) == ex.replication_factor
        for step in ex.steps:
            p = P(step.isr, replicas, ex.min_insync_replicas, leader=step.isr[0] if step.isr else None)
            assert categories(p) == list(step.categories), (ex.title, step.event)


@pytest.mark.parametrize(
    "isr,replicas,min_isr,leader,expected",
    [
        ((0, 1, 2), (0, 1, 2), 2, 0, ["InSync"]),
        ((0, 1), (0, 1, 2), 2, 0, ["UnderReplicated", "AtMinIsr"]),
        ((0,), (0, 1, 2), 2, 0, ["UnderMinIsr"]),
        ((), (0, 1, 2), 2, None, ["Offline"]),
        ((0,), (0,), 2, 0, ["AtMinIsr"]),  # RF=1, min ISR 2: clamped to 1, writes accepted
        ((0, 1), (0, 1), 2, 0, ["AtMinIsr"]),  # RF=2 with min ISR 2: every failure blocks acks=all
        ((0,), (0, 1), 2, 0, ["UnderMinIsr"]),
    ],
)
def test_categories(isr, replicas, min_isr, leader, expected):
    assert categories(P(isr, replicas, min_isr, leader)) == expected


def test_effective_min_isr_clamp():
    assert effective_min_isr(2, 1) == 1
    assert effective_min_isr(2, 3) == 2
    assert effective_min_isr(5, 3) == 3


def test_under_replicated_needs_a_leader():
    assert is_under_replicated(P((0, 1)))
    assert not is_under_replicated(P((0, 1, 2)))
    assert not is_under_replicated(P((), leader=None))


def test_urp_causes_follow_the_triage_order():
    parts = [
        P((0, 1), topic="a", partition=0),  # 2 missing
        P((0, 1), topic="a", partition=1),  # 2 missing
        P((0, 2), topic="b", partition=0),  # 1 missing, broker 1 alive
        P((0, 1, 2), replicas=(0, 1, 2, 3), topic="c", partition=0, adding=(3,)),
        P((1, 2), replicas=(0, 1, 2), topic="d", partition=0, leader=1),  # 0 missing, log dir failed on 0
    ]
    facts = BrokerFacts(
        registered=frozenset({0, 1, 3}), expected=frozenset({0, 1, 2, 3}), failed_log_dirs={0: ("/data/d1",)}
    )
    findings = urp_findings(parts, facts)
    assert [(f.cause, f.broker, f.partitions) for f in findings] == [
        ("broker-loss", 2, (("a", 0), ("a", 1))),
        ("log-dir-failure", 0, (("d", 0),)),
        ("slow-follower", 1, (("b", 0),)),
        ("reassignment", 3, (("c", 0),)),
    ]
    assert "/data/d1" in findings[1].detail
    assert missing_brokers(facts) == [2]


def test_healthy_cluster_has_no_findings():
    assert urp_findings([P((0, 1, 2))], BrokerFacts(frozenset({0, 1, 2}), frozenset({0, 1, 2}))) == []


def test_every_cause_the_rules_give_is_stated_once_in_the_kb():
    """The prose both the reason and the evidence use comes from reference/missing_replicas.yaml:
    every cause (and every network-partition case the probe tells apart) has its row."""
    from typing import get_args

    from diagnosis.rules import URPCause, replica_causes

    rows = {c.id: c for c in replica_causes().causes}
    assert set(get_args(URPCause)) | {"unreachable", "unreachable-registered"} == set(rows)
    for cause in get_args(URPCause):
        assert rows[cause].entry in (cause, None)
