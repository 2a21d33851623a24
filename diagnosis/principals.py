"""audit --principals (`kbot audit --principals`): the bot audits its own Kafka principals.

It reads the ACLs of the principals it is configured with (DescribeAcls, as the observer: Kafka
authorizes it as DESCRIBE on the CLUSTER, which the observer holds) and compares them with what
its actions need (live/acls.py NEEDED), one privilege level per principal:

* an **escalation path** (critical): ALL on anything; ALTER on the CLUSTER on a principal used for
  more than elect-leaders and abort-txn (Kafka accepts cluster ALTER for CreateAcls / DeleteAcls,
  so that principal can grant itself anything); WRITE, ALTER or CREATE on every topic (a LITERAL
  ``*`` or an empty PREFIXED pattern); ACLs for ``User:*`` are held by every principal, so they
  count for the bot's as well;
* a right **beyond need** (warning): an ALLOW binding no action of that principal's roles needs;
* a **missing principal** (warning): a role without credentials of its own on a cluster that
  authenticates clients (its actions are refused up front), or one principal configured for
  two roles (the privilege levels are then not apart);
* a **missing right** (warning): a right the role needs and does not hold (its action will be
  refused by the broker, which names the right then);
* a **needed right that allows more** (info): Kafka has no narrower right for the action, so the
  principal can do more with it than the bot does: ALTER_CONFIGS on the CLUSTER (throttle's broker
  rates) is also how Kafka authorizes AlterClientQuotas, for any user or client id.

Every finding about a right says what the right allows, not only that it is there: CREATE on the
CLUSTER lets a principal create any topic (an escalation path, as CREATE on every topic is).

When the ACLs cannot be read (the observer lacks DESCRIBE on the CLUSTER, or the cluster has no
authorizer), it says what it could not read and states the documented expectation instead.
:func:`evaluate` is the pure part; :func:`audit_principals` reads and answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from framework.context import Context
from framework.errors import Unavailable
from framework.gateways import gateway
from framework.reply import Evidence, Reply, Section, Severity, Table
from kbot_settings import KbotSettings
from live.acls import AUDIT_TOPIC, NEEDED, OPTIONAL, Right
from live.config import ClusterConfig
from live.gateway import GatewayError, NotAuthorized
from live.model import AclBinding

ROLE_ACTIONS = {
    "observer": "reads",
    "config": "retention, throttle",
    "operator": "elect-leaders, abort-txn",
}
# Operations that let a principal change what others see or do on every topic.
_WILD_TOPIC_OPS = {"WRITE", "ALTER", "CREATE"}
WILDCARD_PRINCIPAL = "User:*"
# What a CLUSTER right lets a principal do that its name does not say (Kafka's sources:
# ControllerApis.handleAlterClientQuotas authorizes ALTER_CONFIGS on the CLUSTER; CreateTopics is
# allowed for every topic name by CREATE on the CLUSTER, before the per-topic CREATE check).
CLUSTER_ALSO_ALLOWS = {
    "ALTER_CONFIGS": (
        "AlterClientQuotas for any user or client id (quotas are authorized as ALTER_CONFIGS on the "
        "CLUSTER): it can throttle any producer or consumer to a crawl, cluster-wide through the default "
        "entity, or lift the quotas that protect the brokers"
    ),
    "CREATE": (
        "CreateTopics for any topic name, with any partition count, replication factor and configs "
        "(CREATE on the CLUSTER is checked before the per-topic right), and auto-creation of any topic a "
        "Metadata request names where auto.create.topics.enable is on"
    ),
}


@dataclass(frozen=True)
class Finding:
    # "escalation" | "beyond_need" | "missing_principal" | "shared_principal" | "missing_right" | "allows_more"
    kind: str
    severity: str  # "critical" | "warning" | "info"
    principal: str | None
    text: str


@dataclass
class Assessment:
    """What :func:`evaluate` found: the findings, and each ALLOW binding's verdict for the table."""

    findings: list[Finding] = field(default_factory=list)
    verdicts: list[tuple[AclBinding, str, str]] = field(default_factory=list)  # binding, roles, verdict

    @property
    def severity(self) -> Severity:
        if any(f.severity == "critical" for f in self.findings):
            return "critical"
        if any(f.severity == "warning" for f in self.findings):
            return "warning"
        return "info" if self.findings else "ok"


def _resource(b: AclBinding) -> str:
    name = b.resource_name if b.pattern == "LITERAL" else f"{b.resource_name}* ({b.pattern})"
    return f"{b.resource_type} {name}"


def _every_topic(b: AclBinding) -> bool:
    return b.resource_type == "TOPIC" and (
        (b.pattern == "LITERAL" and b.resource_name == "*") or (b.pattern == "PREFIXED" and b.resource_name == "")
    )


def _covers(right: Right, b: AclBinding, audit_topic: str | None) -> bool:
    """Whether binding ``b`` is (a narrowing of) the needed ``right``."""
    if b.operation != right.operation or b.resource_type != right.resource:
        return False
    if right.name == "*":
        return True  # the wildcard itself, or a narrower name/prefix of it
    if right.resource == "TOPIC" and right.name == AUDIT_TOPIC:
        names = {AUDIT_TOPIC} | ({audit_topic} if audit_topic else set())
        return b.pattern == "LITERAL" and b.resource_name in names
    return b.pattern == "LITERAL" and b.resource_name == right.name


def _escalation(b: AclBinding, roles: Sequence[str]) -> str | None:
    """Why binding ``b`` is an escalation path for a principal serving ``roles``, or None."""
    if b.operation == "ALL":
        return f"ALL on {_resource(b)}: every operation on it" + (
            ", including CreateAcls (it can grant itself anything)" if b.resource_type == "CLUSTER" else ""
        )
    if b.resource_type == "CLUSTER" and b.operation == "ALTER" and set(roles) != {"operator"}:
        used = ", ".join(f"{r} ({ROLE_ACTIONS[r]})" for r in roles) or "every principal"
        return (
            "ALTER on CLUSTER: Kafka also accepts it for CreateAcls/DeleteAcls, so it can grant itself any "
            f"right; it belongs only to the principal used for elect-leaders and abort-txn, and this one serves {used}"
        )
    if _every_topic(b) and b.operation in _WILD_TOPIC_OPS:
        return f"{b.operation} on every topic ({_resource(b)})"
    if b.resource_type == "CLUSTER" and b.operation == "CREATE":
        return f"CREATE on {_resource(b)}, which allows {CLUSTER_ALSO_ALLOWS['CREATE']}: as CREATE on every topic"
    return None


def _also_allows(b: AclBinding) -> str | None:
    """What binding ``b`` allows beyond its name, when Kafka authorizes more with it."""
    return CLUSTER_ALSO_ALLOWS.get(b.operation) if b.resource_type == "CLUSTER" else None


def evaluate(
    principals: Mapping[str, str | None],
    acls: Mapping[str, Sequence[AclBinding]],
    *,
    authenticates: bool = True,
    audit_topic: str | None = None,
) -> Assessment:
    """The findings for ``principals`` (role -> "User:name", None = not configured) holding ``acls``
    (principal -> its bindings; ``User:*`` -> bindings every principal holds). Pure."""
    out = Assessment()
    by_principal: dict[str, list[str]] = {}
    for role, principal in principals.items():
        if principal is None:
            if authenticates:
                env = role.upper()
                out.findings.append(
                    Finding(
                        "missing_principal",
                        "warning",
                        None,
                        f"no {role} principal is configured: {ROLE_ACTIONS[role]} are refused until `{role}:` "
                        f"(clusters.yaml) or KBOT_{env}_SASL_USERNAME / KBOT_{env}_SASL_PASSWORD is set",
                    )
                )
            continue
        by_principal.setdefault(principal, []).append(role)
    for principal, roles in by_principal.items():
        if len(roles) > 1:
            out.findings.append(
                Finding(
                    "shared_principal",
                    "critical" if "operator" in roles else "warning",
                    principal,
                    f"{principal} is configured for {' and '.join(roles)}: one principal per privilege level "
                    "keeps "
                    + (
                        "the cluster ALTER (CreateAcls) of elections and aborts away from everything else"
                        if "operator" in roles
                        else "config changes apart from reads"
                    ),
                )
            )
    everyone = [b for b in acls.get(WILDCARD_PRINCIPAL, ()) if b.permission == "ALLOW"]
    for principal, roles in by_principal.items():
        own = [b for b in acls.get(principal, ()) if b.permission == "ALLOW"]
        rights = [r for r in NEEDED if r.role in roles]
        label = "/".join(roles)
        for b in own + everyone:
            who = principal if b.principal != WILDCARD_PRINCIPAL else f"{principal} (through User:*)"
            why = _escalation(b, roles)
            if why is not None:
                out.findings.append(Finding("escalation", "critical", principal, f"{who} holds {why}"))
                out.verdicts.append((b, label, "escalation path"))
            elif any(_covers(r, b, audit_topic) for r in rights):
                more = _also_allows(b)
                if more is None:
                    out.verdicts.append((b, label, "needed"))
                    continue
                needed_for = "; ".join(r.why for r in rights if _covers(r, b, audit_topic))
                out.findings.append(
                    Finding(
                        "allows_more",
                        "info",
                        principal,
                        f"{who} holds {b.operation} on {_resource(b)}, needed for {needed_for}; Kafka has no "
                        f"narrower right, and it also allows {more}",
                    )
                )
                out.verdicts.append((b, label, f"needed; also allows {more.split(' (')[0]}"))
            else:
                more = _also_allows(b)
                out.findings.append(
                    Finding(
                        "beyond_need",
                        "warning",
                        principal,
                        f"{who} holds {b.operation} on {_resource(b)}, which none of its actions "
                        f"({', '.join(ROLE_ACTIONS[r] for r in roles)}) needs"
                        + (f"; it allows {more}" if more else ""),
                    )
                )
                out.verdicts.append((b, label, "beyond need"))
        held = own + everyone
        for r in rights:
            if (r.role, r.operation, r.resource, r.name) in OPTIONAL:
                continue
            if not any(_covers(r, b, audit_topic) for b in held):
                out.findings.append(
                    Finding(
                        "missing_right",
                        "warning",
                        principal,
                        f"{principal} lacks {r.operation} on {r.resource} {r.name} ({r.why}); the broker will refuse it",
                    )
                )
    # escalations first, then the rest in the order found
    order = {
        "escalation": 0,
        "shared_principal": 1,
        "beyond_need": 2,
        "missing_principal": 3,
        "missing_right": 4,
        "allows_more": 5,
    }
    out.findings.sort(key=lambda f: order[f.kind])
    return out


def may_describe_acls(observer: str, acls: Mapping[str, Sequence[AclBinding]]) -> bool:
    """Whether the bindings read show that ``observer`` may DescribeAcls (DESCRIBE on the CLUSTER,
    or ALTER / ALL there, which imply it). An observer without it gets an empty answer: the brokers
    refuse the request, and librdkafka (2.x) hands that back as an empty list, not as an error - so
    an empty read proves nothing unless the observer's own right to read is among the bindings."""
    held = [*acls.get(observer, ()), *acls.get(WILDCARD_PRINCIPAL, ())]
    return any(
        b.permission == "ALLOW" and b.resource_type == "CLUSTER" and b.operation in ("DESCRIBE", "ALTER", "ALL")
        for b in held
    )


def verdict_line(cluster: str, a: Assessment) -> str:
    """The short verdict: counts, then the first (worst) finding."""
    if not a.findings:
        return f"The bot's principals on cluster {cluster!r} hold exactly what their actions need: no escalation path."
    if a.severity == "info":  # only needed rights that allow more: said, with what they allow
        return (
            f"The bot's principals on cluster {cluster!r} hold only what their actions need, no escalation path; "
            f"{len(a.findings)} needed right{'s' if len(a.findings) > 1 else ''} allow{'' if len(a.findings) > 1 else 's'} "
            f"more than the action: {a.findings[0].text}."
        )
    counts: dict[str, int] = {}
    for f in a.findings:
        if f.severity != "info":  # beside a real finding, rights that allow more are for the Findings list
            counts[f.kind] = counts.get(f.kind, 0) + 1
    names = {
        "escalation": ("escalation path", "escalation paths"),
        "shared_principal": ("shared principal", "shared principals"),
        "beyond_need": ("right beyond need", "rights beyond need"),
        "missing_principal": ("missing principal", "missing principals"),
        "missing_right": ("missing right", "missing rights"),
        "allows_more": ("needed right that allows more", "needed rights that allow more"),
    }
    parts = [f"{n} {names[k][n > 1]}" for k, n in counts.items()]
    first = a.findings[0].text
    return f"{', '.join(parts)} on cluster {cluster!r}: {first}."


def expectation_lines() -> list[str]:
    """The documented expectation (docs/security.md), one line per right."""
    return [f"{r.role}: {r.operation} on {r.resource} {r.name} - {r.why}" for r in NEEDED]


def _principals_section(principals: Mapping[str, str | None]) -> Section:
    return Section(
        "Principals",
        [f"{role}: {p or 'not configured'} - {ROLE_ACTIONS[role]}" for role, p in principals.items()],
    )


CONTAIN = (
    "The operator's ALTER on CLUSTER is also accepted for CreateAcls/DeleteAcls: it is used only for "
    "elect-leaders and abort-txn, and an alert on ACL changes (the authorizer log, kafka.authorizer.logger) "
    "catches its misuse (docs/security.md)."
)


async def audit_principals(ctx: Context, cluster: str | None) -> Reply:
    gw = await gateway(ctx, cluster)
    config = getattr(gw, "config", None)
    if not isinstance(config, ClusterConfig):
        return Reply(
            title="Principals audit", severity="unknown", verdict="This gateway has no configuration to audit."
        )
    principals = config.role_principals()
    if not config.authenticates:
        return Reply(
            title="Principals audit",
            severity="info",
            verdict=f"Cluster {gw.name!r} does not authenticate clients ({config.security_protocol}): every client is "
            "User:ANONYMOUS, so there are no principals to keep apart; on a cluster you care about use SASL_SSL "
            "with one principal per privilege level (docs/security.md).",
            sections=[Section("Documented expectation", expectation_lines())],
        )
    # the settings the pool reads its clusters from (the process's own); the audit topic only widens
    # what counts as needed: without it, the documented one
    settings = getattr(ctx.live, "settings", None)
    audit_topic = settings.kbot_audit_topic if isinstance(settings, KbotSettings) else None
    sasl = {role: p for role, p in principals.items() if p is None or p.startswith("User:")}
    unnamed = [f"{role}: {p}" for role, p in principals.items() if p is not None and role not in sasl]
    acls: dict[str, list[AclBinding]] = {}
    reason = None
    code = None
    try:
        for principal in sorted({p for p in sasl.values() if p} | {WILDCARD_PRINCIPAL}):
            acls[principal] = await gw.describe_acls(principal)
    except GatewayError as exc:
        if not isinstance(exc, NotAuthorized) and exc.code != "SECURITY_DISABLED":
            raise  # unreachable, timed out: dispatch says so
        code = exc.code
        reason = (
            exc.role_line() + " to list ACLs (DescribeAcls is authorized as DESCRIBE on the CLUSTER)"
            if isinstance(exc, NotAuthorized)
            else "the cluster has no authorizer: every principal may do everything"
            if exc.code == "SECURITY_DISABLED"
            else str(exc)
        )
    observer = principals["observer"]
    if reason is None and observer is not None and not may_describe_acls(observer, acls):
        reason = (
            f"the observer principal ({observer}) needs DESCRIBE on CLUSTER kafka-cluster to list ACLs (DescribeAcls "
            "is authorized as DESCRIBE on the CLUSTER; the brokers answered with no binding granting it, which is "
            "also how a refused DescribeAcls comes back - or the observer is a super user, which it should not be)"
        )
    if reason is not None:
        offline = evaluate(principals, {}, authenticates=True, audit_topic=audit_topic)
        config_findings = [f for f in offline.findings if f.kind in ("missing_principal", "shared_principal")]
        return Reply(
            title="Principals audit",
            severity="critical" if code == "SECURITY_DISABLED" else "unknown",
            verdict=f"Cannot read the ACLs of the bot's principals on cluster {gw.name!r}: {reason}. "
            "Check them against the documented expectation below (kafka-acls.sh --list --principal ...).",
            sections=[
                *(
                    [Section("Findings", [f"[{f.severity}] {f.text}" for f in config_findings])]
                    if config_findings
                    else []
                ),
                _principals_section(principals),
                Section("Documented expectation", expectation_lines()),
            ],
            notes=[CONTAIN],
        )
    a = evaluate(sasl, acls, authenticates=True, audit_topic=audit_topic)
    rows: list[list[str | int | float | None]] = [
        [b.principal, roles, b.operation, _resource(b), b.permission, verdict] for b, roles, verdict in a.verdicts
    ]
    denies = [b for bs in acls.values() for b in bs if b.permission == "DENY"]
    notes = [CONTAIN]
    if denies:
        notes.append(f"{len(denies)} DENY binding(s) apply as well; they only take rights away.")
    if unnamed:
        notes.append(
            "Not audited (a client certificate's principal is set by the brokers' ssl.principal.mapping.rules): "
            + "; ".join(unnamed)
        )
    return Reply(
        title="Principals audit",
        severity=a.severity,
        verdict=verdict_line(gw.name, a),
        evidence=[
            Evidence(
                "ACLs read",
                f"{sum(len(v) for v in acls.values())} binding(s) of {', '.join(sorted(acls))}",
                "live: DescribeAcls (as the observer)",
                "ok",
            )
        ],
        sections=[
            *([Section("Findings", [f"[{f.severity}] {f.text}" for f in a.findings])] if a.findings else []),
            _principals_section(principals),
        ],
        tables=[Table("ACLs", ["principal", "roles", "operation", "resource", "permission", "verdict"], rows)],
        notes=notes,
    )


async def startup_line(ctx: Context, cluster: str | None = None) -> tuple[str, str]:
    """The one log line the bot writes about its principals when it starts: ("ok" | "warning",
    text). Never raises: a cluster that cannot be read yet is said so, and the bot starts anyway."""

    try:
        reply = await audit_principals(ctx, cluster)
    except Unavailable as exc:
        return "warning", f"principals audit: not run ({exc})"
    except Exception as exc:  # the start goes on; `kbot audit --principals` can say more later
        return "warning", f"principals audit: not run ({' '.join(str(exc).split())[:300]})"
    level = "ok" if reply.severity in ("ok", "info") else "warning"
    return level, f"principals audit ({reply.severity}): {reply.verdict} `kbot audit --principals` shows the rest."
