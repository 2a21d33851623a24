"""Live evidence from a real Kafka cluster: connection settings (``live.config``),
the async admin gateway (``live.gateway``) and what it returns (``live.model``)."""

from live.config import ClusterConfig, ConfigError, Secret, UnknownCluster, get_cluster, load_clusters, load_config
from live.gateway import (
    AdminGateway,
    AuthenticationFailed,
    ClusterUnreachable,
    GatewayError,
    Timeout,
    UnknownGroup,
    UnknownTopic,
    UnknownTransactionalId,
)

__all__ = [
    "AdminGateway",
    "AuthenticationFailed",
    "ClusterConfig",
    "ClusterUnreachable",
    "ConfigError",
    "GatewayError",
    "Secret",
    "Timeout",
    "UnknownCluster",
    "UnknownGroup",
    "UnknownTopic",
    "UnknownTransactionalId",
    "get_cluster",
    "load_clusters",
    "load_config",
]
