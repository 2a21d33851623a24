"""decide() and decide_cancel() on their own: pure functions of a record, a user, a clock and a verdict."""

from __future__ import annotations

import pytest

from commands.actions import ActionPlan, Precondition
from gate.confirmation import Record, decide, decide_cancel
from gate.rbac import Verdict

NOW = 1_750_000_000.0


def record(
    *, state="pending", high_risk=False, ready=True, expires_in=600.0, requester="U0ALICE", approvals=None
) -> Record:
    plan = ActionPlan(
        "fake-bump",
        "c1",
        {"topic": "orders"},
        "bump orders",
        preconditions=[Precondition("topic exists", ready, "3 partitions")],
        high_risk=high_risk,
    )
    return Record(
        "tok",
        "fake-bump",
        plan,
        requester,
        "C0OPS",
        NOW - 60,
        NOW + expires_in,
        high_risk,
        state,
        list(approvals or []),
        None,
        NOW - 60,
    )


def test_unknown_token():
    d = decide(None, "U0ALICE", NOW, [])
    assert (d.action, d.code) == ("refuse", "unknown")


def test_requester_confirms_a_normal_action():
    d = decide(record(), "U0ALICE", NOW, [])
    assert (d.action, d.code) == ("execute", "ok")


def test_someone_else_cannot_confirm_a_normal_action():
    d = decide(record(), "U0BOB", NOW, [])
    assert (d.action, d.code) == ("refuse", "wrong_user")
    assert "U0ALICE" in d.reason


@pytest.mark.parametrize("delta,code", [(-1.0, "expired"), (0.0, "expired"), (1.0, "ok")])
def test_expiry_boundary(delta, code):
    # expires_at is exclusive: at the very second of expiry the token is dead.
    d = decide(record(expires_in=delta), "U0ALICE", NOW, [])
    assert d.code == code


@pytest.mark.parametrize(
    "state,code",
    [
        ("cancelled", "cancelled"),
        ("executing", "used"),
        ("executed", "used"),
        ("failed", "used"),
        ("aborted", "used"),
        ("expired", "expired"),
        ("done", "used"),
        ("unknown", "used"),
    ],
)
def test_a_token_works_once(state, code):
    d = decide(record(state=state), "U0ALICE", NOW, [])
    assert (d.action, d.code) == ("refuse", code)


def test_state_wins_over_expiry_in_the_message():
    d = decide(record(state="executed", expires_in=-100), "U0ALICE", NOW, [])
    assert d.code == "used"


def test_failing_preview_cannot_be_confirmed():
    assert decide(record(ready=False), "U0ALICE", NOW, []).code == "not_ready"


def test_rbac_verdict_refuses_and_names_the_rule():
    d = decide(record(), "U0ALICE", NOW, [], permitted=Verdict.no("deny[x]", "denied"))
    assert d.code == "rbac" and "deny[x]" in d.reason
    assert decide(record(), "U0ALICE", NOW, [], permitted=Verdict.ok("grants[a]")).action == "execute"


def test_high_risk_self_approval_is_refused():
    d = decide(record(high_risk=True), "U0ALICE", NOW, [])
    assert (d.action, d.code) == ("refuse", "self_approval")


def test_high_risk_needs_a_different_approver():
    d = decide(record(high_risk=True), "U0BOB", NOW, [])
    assert (d.action, d.code) == ("execute", "ok")


def test_two_approvers_when_configured():
    first = decide(record(high_risk=True), "U0BOB", NOW, [], approvers_required=2)
    assert (first.action, first.code) == ("approve", "approved")
    again = decide(record(high_risk=True, approvals=["U0BOB"]), "U0BOB", NOW, ["U0BOB"], approvers_required=2)
    assert again.code == "already_approved"
    second = decide(record(high_risk=True, approvals=["U0BOB"]), "U0CAROL", NOW, ["U0BOB"], approvers_required=2)
    assert second.action == "execute"


def test_the_requester_never_counts_as_an_approver():
    d = decide(record(high_risk=True, approvals=["U0ALICE"]), "U0BOB", NOW, ["U0ALICE"], approvers_required=2)
    assert d.action == "approve"


def test_cancel_rules():
    assert decide_cancel(record(), "U0ALICE", NOW).action == "execute"
    assert decide_cancel(record(), "U0BOB", NOW).code == "wrong_user"
    assert decide_cancel(record(), "U0BOB", NOW, permitted=Verdict.ok("grants[a]")).action == "execute"
    assert decide_cancel(record(state="executed"), "U0ALICE", NOW).code == "used"
    assert decide_cancel(record(expires_in=-1), "U0ALICE", NOW).code == "expired"
    assert decide_cancel(None, "U0ALICE", NOW).code == "unknown"
