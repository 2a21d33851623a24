"""A real local Apache Kafka (KRaft) cluster from Maven Central jars, plus fault injection."""

from localkafka.cluster import ClusterError, LocalCluster
from localkafka.fetch import JarsError, ensure_jars

__all__ = ["LocalCluster", "ClusterError", "ensure_jars", "JarsError"]
