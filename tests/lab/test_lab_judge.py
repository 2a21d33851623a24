"""The lab's judge on hand-written replies (no cluster): what counts as right, named, fast."""

import pytest

from lab.judge import ANSWER_BUDGET_S, answer_budget, judge, names
from runbook_kb import default_kb


@pytest.fixture(scope="module")
def kb():
    return default_kb()


def _reply(kb, entry_id: str, severity: str, verdict: str, evidence=()) -> dict:
    """A reply shaped like Reply.to_dict(), its diagnosis carrying the entry's own mechanism lines."""
    mode = kb.failure_modes[entry_id]
    return {
        "title": "Why URP?",
        "severity": severity,
        "verdict": verdict,
        "evidence": [
            {"label": label, "value": value, "source": "live: metadata", "status": "bad"} for label, value in evidence
        ],
        "diagnoses": [{"entry_id": entry_id, "mechanism": [{"label": r.label} for r in mode.mechanism]}],
    }


def test_a_right_answer_passes(kb):
    reply = _reply(kb, "broker-loss", "warning", "Broker 102 is gone: 3 partitions are under-replicated.")
    j = judge(reply, 0.4, expect_entry="broker-loss", expect_severity="warning", named=["102"], kb=kb)
    assert j.passed and j.failures() == []


def test_each_wrong_part_is_reported(kb):
    reply = _reply(kb, "slow-follower", "ok", "Every broker is up.", [("Brokers registered", "3 of 3")])
    j = judge(
        reply,
        ANSWER_BUDGET_S + 0.5,
        expect_entry="broker-loss",
        expect_severity="warning",
        named=["102"],
        kb=kb,
        budget_s=ANSWER_BUDGET_S,  # the idle machine's budget, whatever this machine's load now
    )
    assert not j.passed
    assert (j.top1_ok, j.named_ok, j.mechanism_ok, j.severity_ok, j.fast) == (False, False, False, False, False)
    assert j.failures() == [
        "top-1 'slow-follower'",
        "does not name 102",
        "mechanism lines differ from the runbook entry's",
        "severity 'ok'",
        f"{ANSWER_BUDGET_S + 0.5:.1f} s > 3 s",
    ]


def test_an_operation_explained_by_a_reference_topic_is_judged_by_that_topic(kb):
    """A reassignment in progress is not a fault: the answer leads with the runbook's reference
    topic (no mechanism lines to compare), and leading with a failure mode is wrong."""
    verdict = "1 partitions are under-replicated by a reassignment in progress; that is expected while it copies."
    right = {"severity": "warning", "verdict": verdict, "evidence": [], "diagnoses": [{"entry_id": "reassignment"}]}
    j = judge(right, 0.4, expect_entry="reassignment", expect_severity="warning", named=[], kb=kb)
    assert j.passed, j.failures()
    wrong = _reply(kb, "broker-loss", "warning", verdict)
    j = judge(wrong, 0.4, expect_entry="reassignment", expect_severity="warning", named=[], kb=kb)
    assert j.failures() == ["top-1 'broker-loss'", "mechanism lines differ from the runbook entry's"]


def test_the_answer_budget_stretches_with_the_machines_load():
    assert answer_budget(load=0.3, cores=2) == ANSWER_BUDGET_S  # idle: the product's target
    assert answer_budget(load=2.0, cores=2) == ANSWER_BUDGET_S
    assert answer_budget(load=15.0, cores=2) == ANSWER_BUDGET_S * 7.5  # a seventh of the CPU each


def test_mechanism_must_be_the_entrys_own_lines(kb):
    reply = _reply(kb, "under-min-isr", "critical", "lab-min-isr-0 is under min ISR")
    reply["diagnoses"][0]["mechanism"] = reply["diagnoses"][0]["mechanism"][:1]  # one line left out
    j = judge(reply, 0.1, expect_entry="under-min-isr", expect_severity="critical", named=["lab-min-isr"], kb=kb)
    assert j.top1_ok and j.named_ok and not j.mechanism_ok


def test_no_diagnosis_is_a_wrong_top1(kb):
    reply = {"severity": "error", "verdict": "Cannot reach the cluster", "evidence": [], "diagnoses": []}
    j = judge(reply, 0.1, expect_entry="broker-loss", expect_severity="warning", named=[], kb=kb)
    assert j.top1 is None and not j.top1_ok and not j.mechanism_ok


@pytest.mark.parametrize(
    "text,entity,found",
    [
        ("Broker 102 is gone", "102", True),
        ("brokers 101, 102.", "102", True),
        ("1,102 partitions", "102", False),  # a count, not the broker
        ("topic lab-102x", "102", False),
        ("lab-min-isr-0, lab-min-isr-1", "lab-min-isr", True),  # a topic named by its partitions
        ("lab-min-isr-other-0", "lab-min-isr", False),  # another topic that starts the same
    ],
)
def test_names_whole_tokens_only(text, entity, found):
    assert names(text, entity) is found


def test_a_mode_without_a_runbook_entry_is_judged_by_its_verdict(kb):
    """Consumers that stopped are no Kafka failure mode: the verdict must say so, and the rebalance
    storm the bot once led with must not come first."""
    stopped = {
        "severity": "warning",
        "verdict": "Group g has no members and is 54 records behind: its consumers stopped (Burrow: STOP).",
        "diagnoses": [],
        "evidence": [],
    }
    j = judge(
        stopped,
        2.0,
        expect_entry="",
        expect_severity="warning",
        named=["g"],
        kb=kb,
        expect_verdict="its consumers stopped (Burrow: STOP)",
        not_top="rebalance-storm",
    )
    assert j.passed, j.failures()
    storm = {
        **stopped,
        "verdict": "Group g is rebalancing again and again.",
        "diagnoses": [{"entry_id": "rebalance-storm", "mechanism": []}],
    }
    wrong = judge(
        storm,
        2.0,
        expect_entry="",
        expect_severity="warning",
        named=["g"],
        kb=kb,
        expect_verdict="its consumers stopped (Burrow: STOP)",
        not_top="rebalance-storm",
    )
    assert not wrong.passed and wrong.failures() == ["top-1 'rebalance-storm'"]
