"""A real local Apache Kafka (KRaft) cluster from Maven Central jars, plus fault injection."""
from .cluster import LocalCluster, ClusterError
from .fetch import ensure_jars, JarsError

__all__ = ["LocalCluster", "ClusterError", "ensure_jars", "JarsError"]
