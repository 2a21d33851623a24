"""Issue 29, the pure parts: one principal per privilege level (live/config.py roles), the action
-> principal map, the self-audit's rules (commands/principals.evaluate) and the gate's effective
second-approver rule (gate/confirmation.second_approver_rules, shown by `kbot config`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commands.registry import ROUTER
from diagnosis.principals import evaluate, may_describe_acls, verdict_line
from framework.actions import ActionPlan
from gate.confirmation import needs_second_approver, second_approver_rules
from kbot_settings import load as load_settings
from live.acls import NEEDED
from live.config import ClusterConfig, ConfigError, get_cluster
from live.model import AclBinding

ROOT = Path(__file__).resolve().parents[2]

SASL = dict(
    name="prod",
    bootstrap="k:9093",
    security_protocol="SASL_SSL",
    sasl_mechanism="SCRAM-SHA-512",
    sasl_username="kbot-observer",
    sasl_password="obs",
)


# ---- roles -------------------------------------------------------------------------------------


def test_each_role_connects_as_its_own_principal():
    cfg = ClusterConfig(
        **SASL,
        config_sasl_username="kbot-config",
        config_sasl_password="cfg-pw",
        operator_sasl_username="kbot-operator",
        operator_sasl_password="op-pw",
    )
    changer, operator = cfg.as_config(), cfg.as_operator()
    assert (changer.role, changer.sasl_username, str(changer.sasl_password)) == ("config", "kbot-config", "cfg-pw")
    assert (operator.role, operator.sasl_username, str(operator.sasl_password)) == (
        "operator",
        "kbot-operator",
        "op-pw",
    )
    # a role's config holds no other role's credentials
    assert not changer.has_operator and not operator.has_config and changer.client_id == "kbot-config"
    assert cfg.role_principals() == {
        "observer": "User:kbot-observer",
        "config": "User:kbot-config",
        "operator": "User:kbot-operator",
    }
    for text in (repr(cfg), repr(changer), repr(operator), json.dumps(changer.safe_dict())):
        assert "cfg-pw" not in text and "op-pw" not in text


def test_a_missing_config_principal_is_refused_with_what_to_set_never_the_operator():
    cfg = ClusterConfig(**SASL, operator_sasl_username="kbot-operator", operator_sasl_password="op-pw")
    with pytest.raises(ConfigError) as caught:
        cfg.as_config()
    text = str(caught.value)
    assert "no config principal is configured" in text and "KBOT_CONFIG_SASL_USERNAME" in text
    assert "`config:`" in text and "retention, throttle" in text
    assert cfg.role_principals()["config"] is None and cfg.as_operator().sasl_username == "kbot-operator"


def test_config_principal_from_the_file_and_the_environment(tmp_path):
    path = tmp_path / "clusters.yaml"
    path.write_text(
        "clusters:\n  prod:\n    bootstrap: k:9093\n    security_protocol: SASL_SSL\n"
        "    sasl_mechanism: SCRAM-SHA-512\n    sasl_username: obs\n    sasl_password: a\n"
        "    config:\n      sasl_username: cfg\n      sasl_password: ${CFG_PW}\n"
    )
    cfg = get_cluster("prod", load_settings({"KBOT_CLUSTERS_FILE": str(path), "CFG_PW": "b"}))
    assert cfg.as_config().sasl_username == "cfg" and str(cfg.as_config().sasl_password) == "b"
    env = {
        "KBOT_BOOTSTRAP": "k:9093",
        "KBOT_SECURITY_PROTOCOL": "SASL_SSL",
        "KBOT_SASL_MECHANISM": "SCRAM-SHA-512",
        "KBOT_SASL_USERNAME": "obs",
        "KBOT_SASL_PASSWORD": "a",
        "KBOT_CONFIG_SASL_USERNAME": "cfg",
        "KBOT_CONFIG_SASL_PASSWORD": "c",
    }
    assert get_cluster(None, load_settings(env)).as_config().sasl_username == "cfg"
    path.write_text(path.read_text().replace("      sasl_password: ${CFG_PW}\n", ""))
    with pytest.raises(ConfigError, match="the config principal needs both sasl_username and sasl_password"):
        get_cluster("prod", load_settings({"KBOT_CLUSTERS_FILE": str(path)}))


def test_a_plaintext_cluster_has_one_principal_for_every_role():
    cfg = ClusterConfig(name="plain", bootstrap="k:9092")
    assert cfg.as_config().principal == cfg.as_operator().principal == "User:ANONYMOUS"
    assert cfg.as_config().role == "config"


def test_each_action_runs_as_the_narrowest_principal():
    actions = {c.spec.name: c.action for c in ROUTER.commands if c.action is not None}
    assert {name: a.principal for name, a in actions.items()} == {
        "retention": "config",
        "throttle set": "config",
        "throttle clear": "config",
        "elect-leaders": "operator",
        "abort-txn": "operator",
    }
    # cluster ALTER (CreateAcls in Kafka) is needed by the operator alone
    holders = {r.role for r in NEEDED if (r.operation, r.resource) == ("ALTER", "CLUSTER")}
    assert holders == {"operator"}
    assert {(r.operation, r.resource) for r in NEEDED if r.role == "config"} == {
        ("ALTER_CONFIGS", "TOPIC"),
        ("ALTER_CONFIGS", "CLUSTER"),
    }


# ---- the self-audit ---------------------------------------------------------------------------


def _b(principal, op, rtype, name, pattern="LITERAL", permission="ALLOW"):
    return AclBinding(f"User:{principal}", "*", op, permission, rtype, name, pattern)


ROLES = {"observer": "User:kbot-observer", "config": "User:kbot-config", "operator": "User:kbot-operator"}
USER = {"observer": "kbot-observer", "config": "kbot-config", "operator": "kbot-operator"}


def _kinds(a) -> list[str]:
    """The findings' kinds, less the one the documented grants always carry (the config principal's
    ALTER_CONFIGS on the CLUSTER also allows AlterClientQuotas: an info finding)."""
    return [f.kind for f in a.findings if f.kind != "allows_more"]


def _documented() -> dict[str, list[AclBinding]]:
    out: dict[str, list[AclBinding]] = {p: [] for p in ROLES.values()}
    for r in NEEDED:
        out[ROLES[r.role]].append(_b(USER[r.role], r.operation, r.resource, r.name))
    return out


def test_the_documented_grants_audit_clean_but_for_what_the_config_rights_also_allow():
    a = evaluate(ROLES, _documented())
    # issue 37: the config principal's ALTER_CONFIGS on the CLUSTER (throttle's broker rates) is also
    # Kafka's right for AlterClientQuotas, for any user or client: flagged as what it allows
    assert [(f.kind, f.severity, f.principal) for f in a.findings] == [("allows_more", "info", "User:kbot-config")]
    assert "AlterClientQuotas for any user or client id" in a.findings[0].text
    assert a.severity == "info"
    assert {v for _, _, v in a.verdicts} == {
        "needed",
        "needed; also allows AlterClientQuotas for any user or client id",
    }
    line = verdict_line("prod", a)
    assert line.startswith("The bot's principals on cluster 'prod' hold only what their actions need, no escalation")
    assert "AlterClientQuotas" in line


def test_create_on_the_cluster_is_flagged_as_creating_any_topic():
    acls = _documented()
    acls["User:kbot-observer"].append(_b("kbot-observer", "CREATE", "CLUSTER", "kafka-cluster"))
    a = evaluate(ROLES, acls)
    assert a.severity == "critical" and a.findings[0].kind == "escalation"
    assert "User:kbot-observer holds CREATE on CLUSTER kafka-cluster" in a.findings[0].text
    assert "CreateTopics for any topic name" in a.findings[0].text


def test_cluster_alter_on_the_config_principal_is_an_escalation_path():
    acls = _documented()
    acls["User:kbot-config"].append(_b("kbot-config", "ALTER", "CLUSTER", "kafka-cluster"))
    a = evaluate(ROLES, acls)
    assert a.severity == "critical"
    assert _kinds(a) == ["escalation"]
    assert "CreateAcls" in a.findings[0].text and "User:kbot-config" in a.findings[0].text
    assert verdict_line("prod", a).startswith("1 escalation path on cluster 'prod': User:kbot-config holds ALTER")


@pytest.mark.parametrize(
    "binding, kind",
    [
        (_b("kbot-observer", "ALL", "TOPIC", "orders"), "escalation"),
        (_b("kbot-config", "WRITE", "TOPIC", "*"), "escalation"),
        (_b("kbot-config", "CREATE", "TOPIC", "", pattern="PREFIXED"), "escalation"),
        (_b("kbot-operator", "ALTER", "TOPIC", "*"), "escalation"),
        (_b("kbot-observer", "ALTER_CONFIGS", "TOPIC", "*"), "beyond_need"),
        (_b("kbot-operator", "ALTER_CONFIGS", "CLUSTER", "kafka-cluster"), "beyond_need"),
        (_b("kbot-observer", "WRITE", "TOPIC", "orders"), "beyond_need"),
        (_b("kbot-config", "CREATE", "CLUSTER", "kafka-cluster"), "escalation"),
    ],
)
def test_rights_beyond_need_and_escalations(binding, kind):
    acls = _documented()
    acls[binding.principal].append(binding)
    a = evaluate(ROLES, acls)
    assert _kinds(a) == [kind], a.findings
    assert a.severity == ("critical" if kind == "escalation" else "warning")


def test_narrower_grants_count_as_needed_and_the_configured_audit_topic_too():
    acls = _documented()
    acls["User:kbot-config"] = [
        _b("kbot-config", "ALTER_CONFIGS", "TOPIC", "orders-", pattern="PREFIXED"),
        _b("kbot-config", "ALTER_CONFIGS", "CLUSTER", "kafka-cluster"),
    ]
    acls["User:kbot-observer"].append(_b("kbot-observer", "WRITE", "TOPIC", "ops-audit"))
    assert _kinds(evaluate(ROLES, acls, audit_topic="ops-audit")) == []
    assert _kinds(evaluate(ROLES, acls)) == ["beyond_need"]


def test_every_principal_holds_user_star_bindings():
    acls = _documented()
    acls["User:*"] = [AclBinding("User:*", "*", "ALL", "ALLOW", "CLUSTER", "kafka-cluster", "LITERAL")]
    a = evaluate(ROLES, acls)
    assert _kinds(a) == ["escalation"] * 3
    assert all("through User:*" in f.text for f in a.findings if f.kind != "allows_more")


def test_missing_and_shared_principals_and_missing_rights():
    acls = _documented()
    del acls["User:kbot-config"]
    a = evaluate({**ROLES, "config": None}, acls)
    assert _kinds(a) == ["missing_principal"]
    assert "KBOT_CONFIG_SASL_USERNAME" in a.findings[0].text
    # the operator's credentials used for config changes too: cluster ALTER used for more than elections
    shared = {**ROLES, "config": "User:kbot-operator"}
    acls = _documented()
    acls["User:kbot-operator"] += acls.pop("User:kbot-config")
    kinds = [f.kind for f in evaluate(shared, acls).findings]
    assert kinds[:2] == ["escalation", "shared_principal"], kinds
    # a needed right not held
    acls = _documented()
    acls["User:kbot-operator"] = [b for b in acls["User:kbot-operator"] if b.operation != "ALTER"]
    a = evaluate(ROLES, acls)
    assert _kinds(a) == ["missing_right"] and "elect-leaders" in a.findings[0].text


def test_an_empty_read_proves_nothing_unless_the_observer_may_read():
    assert may_describe_acls("User:kbot-observer", _documented())
    assert not may_describe_acls("User:kbot-observer", {})  # refused, and librdkafka says []
    star = {"User:*": [AclBinding("User:*", "*", "ALL", "ALLOW", "CLUSTER", "kafka-cluster", "LITERAL")]}
    assert may_describe_acls("User:kbot-observer", star)


def test_deny_bindings_take_away_and_are_not_flagged():
    acls = _documented()
    acls["User:kbot-observer"].append(_b("kbot-observer", "ALL", "TOPIC", "*", permission="DENY"))
    assert _kinds(evaluate(ROLES, acls)) == []


# ---- the second-approver rule ---------------------------------------------------------------------


def _plan(kind: str, high_risk: bool = False) -> ActionPlan:
    return ActionPlan(kind=kind, cluster="c", args={}, summary="s", high_risk=high_risk)


def test_the_rule_the_gate_applies_and_the_rule_kbot_config_shows_agree():
    actions = {c.spec.name: c.action for c in ROUTER.commands if c.action is not None}
    kinds = frozenset({"abort-txn"})  # the default KBOT_HIGH_RISK_KINDS
    rules, unknown = second_approver_rules(actions, kinds)
    shown = {r.kind: r.when for r in rules}
    assert shown == {
        "abort-txn": "always",
        "elect-leaders": "never",
        "retention": "when it lowers retention.ms or sets -1",
        "throttle clear": "never",
        "throttle set": "never",
    }
    assert unknown == []
    assert needs_second_approver(_plan("abort-txn", high_risk=True), "abort-txn", frozenset())
    assert needs_second_approver(_plan("retention", high_risk=True), "retention", kinds)  # lowering
    assert not needs_second_approver(_plan("retention"), "retention", kinds)  # raising
    assert not needs_second_approver(_plan("elect-leaders"), "elect-leaders", kinds)
    rules, unknown = second_approver_rules(actions, frozenset({"elect-leaders", "nuke"}))
    assert {r.kind: r.when for r in rules}["elect-leaders"] == "always" and unknown == ["nuke"]
    # abort-txn needs one even when the setting leaves it out: the command marks it high-risk
    assert {r.kind: r.when for r in rules}["abort-txn"] == "always"


def test_kbot_config_shows_the_effective_second_approver_rule(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(HOME=str(tmp_path), KBOT_HOME=str(tmp_path / "kbot"), KBOT_HIGH_RISK_KINDS="abort-txn,elect-leaders")
    run = [sys.executable, "-m", "cli.main", "config"]
    text = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.split("Second approver (effective rule", 1)[1].splitlines()
    assert "1 approver besides the requester" in lines[0]
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    assert rows["abort-txn"].split()[1] == "always" and "KBOT_HIGH_RISK_KINDS lists it" in rows["abort-txn"]
    assert rows["elect-leaders"].split()[1] == "always"
    assert "when it lowers retention.ms or sets -1" in rows["retention"] and "config principal" in rows["retention"]
    shown = subprocess.run([*run, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    rules = {r["kind"]: r for r in json.loads(shown.stdout) if r["section"] == "Second approver (effective)"}
    assert rules["abort-txn"]["value"] == "always" and rules["throttle set"]["value"] == "never"
    assert rules["elect-leaders"]["principal"] == "operator" and rules["retention"]["principal"] == "config"
