"""decide() and decide_cancel() on their own: pure functions of a record, a user, a clock and a verdict."""

from __future__ import annotations

import pytest

from framework.actions import ActionPlan, Precondition
from gate.confirmation import Record, decide, decide_break_glass, decide_cancel
from gate.rbac import Policy, PolicyError, Verdict

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


# ---- break-glass: the requester alone, on the record -------------------------------------------------

GLASS = Verdict(True, "grants[oncall]", "", break_glass="break_glass[lead]")
REASON = "approver unreachable, writes failing"


@pytest.mark.parametrize(
    "rec,user,reason,verdict,code",
    [
        (None, "U0ALICE", REASON, GLASS, "unknown"),
        (record(high_risk=True, state="cancelled"), "U0ALICE", REASON, GLASS, "cancelled"),
        (record(high_risk=True, expires_in=0.0), "U0ALICE", REASON, GLASS, "expired"),
        (record(high_risk=True, ready=False), "U0ALICE", REASON, GLASS, "not_ready"),
        (record(high_risk=True), "U0ALICE", REASON, Verdict.no("deny[x]", "denied"), "rbac"),
        (record(high_risk=False), "U0ALICE", REASON, GLASS, "not_needed"),
        (record(high_risk=True), "U0BOB", REASON, GLASS, "wrong_user"),
        (record(high_risk=True), "U0ALICE", REASON, Verdict.ok("grants[oncall]"), "no_break_glass"),
        (record(high_risk=True), "U0ALICE", "  too   short ", GLASS, "no_reason"),
    ],
)
def test_break_glass_refusals(rec, user, reason, verdict, code):
    d = decide_break_glass(rec, user, NOW, reason, permitted=verdict)
    assert (d.action, d.code) == ("refuse", code), d.reason


def test_break_glass_lets_the_requester_confirm_alone_with_a_reason():
    d = decide_break_glass(record(high_risk=True), "U0ALICE", NOW, REASON, permitted=GLASS)
    assert (d.action, d.code) == ("execute", "break_glass") and "break_glass[lead]" in d.reason


def test_policy_names_approvers_and_break_glass_rules():
    policy = Policy.from_dict(
        {
            "grants": [
                {"name": "alice", "users": ["U0ALICE"], "commands": ["abort-txn"]},
                {"name": "oncall", "groups": ["S0ONCALL"], "users": ["U0BOB", "U0MAL"], "commands": ["*"]},
                {"name": "elsewhere", "users": ["U0CAROL"], "channels": ["C0OTHER"], "commands": ["abort-txn"]},
                {"name": "not-this", "users": ["U0DAN"], "commands": ["retention"]},
            ],
            "deny": [{"name": "mal", "users": ["U0MAL"], "commands": ["*"]}],
            "break_glass": [{"name": "lead", "groups": ["S0LEADS"], "commands": ["abort-txn"]}],
        }
    )
    assert policy.approvers("abort-txn", "C0OPS") == (["U0ALICE", "U0BOB"], ["S0ONCALL"])
    assert "S0LEADS" in policy.group_ids()  # break-glass membership is read from Slack like the grants'
    allowed = policy.check("U0BOB", {"S0LEADS"}, "C0OPS", "abort-txn", mutating=True)
    assert (
        policy.with_break_glass(allowed, "U0BOB", {"S0LEADS"}, "C0OPS", "abort-txn").break_glass == "break_glass[lead]"
    )
    assert policy.with_break_glass(allowed, "U0BOB", set(), "C0OPS", "abort-txn").break_glass == ""
    assert policy.with_break_glass(allowed, "U0BOB", {"S0LEADS"}, "C0OPS", "retention").break_glass == ""
    refused = policy.check("U0MAL", {"S0LEADS"}, "C0OPS", "abort-txn", mutating=True)
    assert policy.with_break_glass(refused, "U0MAL", {"S0LEADS"}, "C0OPS", "abort-txn") == refused


def test_a_break_glass_rule_without_commands_is_a_policy_error():
    with pytest.raises(PolicyError, match="break_glass"):
        Policy.from_dict({"break_glass": [{"name": "lead", "users": ["U0ALICE"]}]})
