"""The ACLs each of the bot's principals needs, one privilege level per principal - the one table
behind docs/security.md, the local secured cluster's grants (``localkafka.secure.GRANTS``) and the
self-audit (``diagnosis/principals.py``, `kbot audit --principals`).

What Kafka's authorizer lets each right do beyond the call the bot makes with it (checked against
Kafka's sources: ``AclApis.handleCreateAcls`` / ``handleDeleteAcls`` authorize ALTER on the
CLUSTER, ``handleDescribeAcls`` DESCRIBE on the CLUSTER; ``ControllerApis.authorizeAlterResource``
authorizes IncrementalAlterConfigs of a BROKER resource as ALTER_CONFIGS on the CLUSTER):

* ALTER on CLUSTER - ElectLeaders, WriteTxnMarkers (KIP-664) and also CreateAcls / DeleteAcls:
  whoever holds it can grant itself any other right. It is the escalation path to contain, so it
  belongs to the ``operator`` principal alone, used only for elect-leaders and abort-txn.
* ALTER_CONFIGS on CLUSTER - every dynamic broker config (IncrementalAlterConfigs of BROKER
  resources), which is what the throttle rates are; it does NOT allow CreateAcls.
* DESCRIBE on CLUSTER - also DescribeAcls: the observer can read every principal's ACLs (how the
  self-audit reads them).
* Kafka's implications: ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS, READ /
  WRITE / DELETE imply DESCRIBE, and ALL allows every operation on its resource.
"""

from __future__ import annotations

from dataclasses import dataclass

CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True)
class Right:
    role: str  # live.config.ROLES: observer | config | operator
    operation: str  # Kafka ACL operation name (AclOperation)
    resource: str  # Kafka resource type name (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)
    name: str  # the resource name; "*" = every resource of the type (a LITERAL wildcard)
    why: str


def _r(role: str, op: str, res: str, name: str, why: str) -> Right:
    return Right(role, op, res, name, why)


# The audit log's Kafka mirror (KBOT_AUDIT_TOPIC): the topic the local secured cluster grants.
AUDIT_TOPIC = "kbot-audit"

NEEDED: tuple[Right, ...] = (
    _r(
        "observer",
        "DESCRIBE",
        "CLUSTER",
        CLUSTER_NAME,
        "log dirs, reassignments, KRaft quorum, ListGroups/ListTransactions over every broker; DescribeAcls",
    ),
    _r(
        "observer",
        "DESCRIBE_CONFIGS",
        "CLUSTER",
        CLUSTER_NAME,
        "broker configs (audit, throttle preview, quorum voters)",
    ),
    _r("observer", "DESCRIBE", "TOPIC", "*", "metadata, leaders/ISR, log end offsets, ELR"),
    _r("observer", "DESCRIBE_CONFIGS", "TOPIC", "*", "min.insync.replicas, retention.ms, throttled-replica lists"),
    _r("observer", "READ", "TOPIC", "*", "DescribeProducers (open transactions on a partition) is authorized as READ"),
    _r("observer", "DESCRIBE", "GROUP", "*", "consumer lag: DescribeGroups and OffsetFetch"),
    _r("observer", "DESCRIBE", "TRANSACTIONAL_ID", "*", "hanging-txns: ListTransactions / DescribeTransactions"),
    _r(
        "observer",
        "WRITE",
        "TOPIC",
        AUDIT_TOPIC,
        "the audit log's Kafka mirror (KBOT_AUDIT_TOPIC; name your own topic)",
    ),
    _r("config", "ALTER_CONFIGS", "TOPIC", "*", "retention; throttle's leader/follower.replication.throttled.replicas"),
    _r(
        "config",
        "ALTER_CONFIGS",
        "CLUSTER",
        CLUSTER_NAME,
        "throttle's per-broker replication rates (IncrementalAlterConfigs of a BROKER resource)",
    ),
    _r(
        "operator",
        "ALTER",
        "CLUSTER",
        CLUSTER_NAME,
        "elect-leaders (ElectLeaders) and abort-txn (WriteTxnMarkers, KIP-664)",
    ),
    _r(
        "operator",
        "DESCRIBE",
        "TOPIC",
        "*",
        "abort-txn: the client finds the partition's leader in Metadata, which hides undescribable topics",
    ),
)

# Rights that are optional: the bot works without them (it says what is missing).
OPTIONAL = {("observer", "WRITE", "TOPIC", AUDIT_TOPIC)}


def needed(role: str) -> list[Right]:
    return [r for r in NEEDED if r.role == role]
