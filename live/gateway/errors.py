"""The gateway's error taxonomy: every exception the gateway raises (``GatewayError`` and its
subclasses) and the tables that turn a broker's authorization error into the grant that is
missing (:class:`NotAuthorized`). No client library is imported here: commands catch these
without knowing which library served the call."""

from __future__ import annotations

from collections.abc import Iterable


class GatewayError(Exception):
    """Base of every error the gateway raises."""

    def __init__(self, message: str, cluster: str | None = None, code: str | None = None):
        super().__init__(message)
        self.cluster = cluster
        self.code = code  # Kafka error name when the broker/librdkafka gave one


class ClusterUnreachable(GatewayError):
    """No broker of the cluster answered within the timeout."""


class Timeout(GatewayError):
    """The cluster is reachable but the call did not complete in time."""


class UnknownTopic(GatewayError):
    def __init__(self, topics: Iterable[str], cluster: str | None = None, detail: str = ""):
        self.topics = sorted(set(topics))
        names = ", ".join(self.topics)
        msg = f"unknown topic{'s' if len(self.topics) > 1 else ''} {names} in cluster {cluster!r}"
        super().__init__(msg + (f" ({detail})" if detail else ""), cluster)


class UnknownGroup(GatewayError):
    def __init__(self, group: str, cluster: str | None = None):
        self.group = group
        super().__init__(
            f"unknown consumer group {group!r} in cluster {cluster!r} (no members and no committed offsets)", cluster
        )


class UnknownTransactionalId(GatewayError):
    def __init__(self, transactional_ids: Iterable[str], cluster: str | None = None, detail: str = ""):
        self.transactional_ids = sorted(set(transactional_ids))
        super().__init__(
            f"unknown transactional id(s) {', '.join(self.transactional_ids)} in cluster "
            f"{cluster!r}" + (f" ({detail})" if detail else ""),
            cluster,
        )


class AuthenticationFailed(GatewayError):
    """SASL/SSL handshake or authorization failure."""


class TlsFailed(AuthenticationFailed):
    """The TLS handshake with the brokers failed (wrong CA, expired or misnamed certificate)."""


class NotAuthorized(AuthenticationFailed):
    """The broker refused a request: the principal lacks an ACL. Names the right that is missing,
    as an operator grants it: ``the operator principal needs ALTER_CONFIGS on TOPIC orders``."""

    def __init__(
        self,
        role: str,
        principal: str,
        operation: str,
        resource_type: str,
        resource_name: str,
        what: str,
        cluster: str | None = None,
        code: str | None = None,
    ):
        self.role, self.principal = role, principal
        self.operation, self.resource_type, self.resource_name = operation, resource_type, resource_name
        self.what = what
        super().__init__(
            f"the {role} principal needs {operation} on {resource_type} {resource_name}: "
            f"{what} was refused for {principal} on cluster {cluster!r}",
            cluster,
            code,
        )

    def role_line(self) -> str:
        """The grant that is missing, as an operator would write it, without the call's details."""
        return f"the {self.role} principal ({self.principal}) needs {self.operation} on {self.resource_type} {self.resource_name}"


# Which ACL operation a request needs, by the gateway's own name for the call (``what``): the
# broker's error says which resource type refused, not which operation, and a grant needs both.
_REQUIRED_OP = (
    ("incremental_alter_configs", "ALTER_CONFIGS"),
    ("describe_configs", "DESCRIBE_CONFIGS"),
    ("elect_leaders", "ALTER"),
    ("abort_transaction", "ALTER"),
    ("describe_producers", "READ"),
)
# Authorization error (librdkafka name / kafka-python class) -> the resource type that refused it.
AUTHZ_RESOURCE = {
    "TOPIC_AUTHORIZATION_FAILED": "TOPIC",
    "TopicAuthorizationFailedError": "TOPIC",
    "GROUP_AUTHORIZATION_FAILED": "GROUP",
    "GroupAuthorizationFailedError": "GROUP",
    "CLUSTER_AUTHORIZATION_FAILED": "CLUSTER",
    "ClusterAuthorizationFailedError": "CLUSTER",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "TRANSACTIONAL_ID",
    "TransactionalIdAuthorizationFailedError": "TRANSACTIONAL_ID",
}
CLUSTER_RESOURCE = "kafka-cluster"  # the one resource name of Kafka's CLUSTER resource type


def required_operation(what: str) -> str:
    for prefix, op in _REQUIRED_OP:
        if what.startswith(prefix):
            return op
    return "DESCRIBE"
