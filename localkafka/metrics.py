"""Prometheus metrics of the local cluster: naming, scraping, parsing.

Every node runs the Prometheus JMX exporter javaagent (1.0.1) with the rules
in ``config/jmx_rules.yaml`` on ``http://127.0.0.1:<metrics port>/metrics``.

Naming: the Yammer MBean ``kafka.<domain>:type=<Type>,name=<Name>[,k=v...]``
becomes ``kafka_<domain>_<type>_<name>`` lower-cased, and every MBean tag
after ``name`` becomes a label of the same (lower-cased) name - ``topic``,
``partition``, ``request``, ``error``, ``version``, ``clientid``, ``broker``
- so a collector can map a sample back to its MBean. Per attribute:

    Gauge             Value            -> kafka_d_t_n                 gauge
    Meter (...PerSec) Count            -> kafka_d_t_n_total           counter
    Timer/Histogram   Count            -> kafka_d_t_n_count           gauge
    Meter/Timer       OneMinuteRate    -> kafka_d_t_n_oneminuterate   gauge
    Timer/Histogram   Mean, Max        -> kafka_d_t_n_mean, _max      gauge
    Timer/Histogram   <q>thPercentile  -> kafka_d_t_n{quantile="0.<q>"}

Exception: RequestHandlerAvgIdlePercent (a Meter whose rate is the idle
ratio) is exported as its OneMinuteRate under the plain name (0..1).

Brokers expose replica/partition/log/request metrics; in KRaft the
controller metrics (``kafka_controller_kafkacontroller_*``) exist only on the
controller node (id 1). The constants below are the names the rules produce
for the metrics the bot relies on.
"""

from __future__ import annotations

import urllib.request

# kafka.server:type=ReplicaManager (brokers)
UNDER_REPLICATED = "kafka_server_replicamanager_underreplicatedpartitions"
AT_MIN_ISR = "kafka_server_replicamanager_atminisrpartitioncount"
UNDER_MIN_ISR = "kafka_server_replicamanager_underminisrpartitioncount"
OFFLINE_REPLICAS = "kafka_server_replicamanager_offlinereplicacount"
PARTITION_COUNT = "kafka_server_replicamanager_partitioncount"
LEADER_COUNT = "kafka_server_replicamanager_leadercount"
ISR_SHRINKS = "kafka_server_replicamanager_isrshrinkspersec_total"
ISR_EXPANDS = "kafka_server_replicamanager_isrexpandspersec_total"
LATE_TXN_PARTITIONS = "kafka_server_replicamanager_partitionswithlatetransactionscount"
# kafka.controller:type=KafkaController (controller node only)
ACTIVE_CONTROLLERS = "kafka_controller_kafkacontroller_activecontrollercount"
OFFLINE_PARTITIONS = "kafka_controller_kafkacontroller_offlinepartitionscount"
GLOBAL_PARTITIONS = "kafka_controller_kafkacontroller_globalpartitioncount"
GLOBAL_TOPICS = "kafka_controller_kafkacontroller_globaltopiccount"
FENCED_BROKERS = "kafka_controller_kafkacontroller_fencedbrokercount"
ACTIVE_BROKERS = "kafka_controller_kafkacontroller_activebrokercount"
PREFERRED_IMBALANCE = "kafka_controller_kafkacontroller_preferredreplicaimbalancecount"
UNCLEAN_ELECTIONS = "kafka_controller_controllerstats_uncleanleaderelectionspersec_total"
# kafka.log (per topic/partition labels) and LogManager
LOG_END_OFFSET = "kafka_log_log_logendoffset"
LOG_START_OFFSET = "kafka_log_log_logstartoffset"
LOG_SIZE = "kafka_log_log_size"
OFFLINE_LOG_DIRS = "kafka_log_logmanager_offlinelogdirectorycount"
# kafka.cluster:type=Partition (topic/partition labels; leader-side)
PARTITION_UNDER_REPLICATED = "kafka_cluster_partition_underreplicated"
PARTITION_LSO_LAG = "kafka_cluster_partition_laststableoffsetlag"
PARTITION_AT_MIN_ISR = "kafka_cluster_partition_atminisr"
PARTITION_UNDER_MIN_ISR = "kafka_cluster_partition_underminisr"
# kafka.network:type=RequestMetrics (request label; quantile for percentiles)
REQUEST_TOTAL_TIME = "kafka_network_requestmetrics_totaltimems"
REQUEST_QUEUE_TIME = "kafka_network_requestmetrics_requestqueuetimems"
REQUEST_HANDLER_IDLE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"
# kafka.server:type=BrokerTopicMetrics (topic label; no label = all topics)
BYTES_IN = "kafka_server_brokertopicmetrics_bytesinpersec_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesinpersec_total"


def scrape(url: str, timeout: float = 10.0) -> str | None:
    """The exposition text, or None if the endpoint does not answer within ``timeout`` (Prometheus's
    default scrape timeout: a JVM exporter on a busy host can take seconds to render, and a 3 s
    limit read a live broker as silent at load ~24). A dead broker's port refuses at once."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode()
    except OSError:
        return None


def samples(text: str, name: str) -> list[tuple[dict, float]]:
    """All samples of metric ``name`` as (labels, value)."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, lbl = head.partition("{")
        if metric != name:
            continue
        labels = {}
        for part in lbl.rstrip("}").split('",'):
            if "=" in part:
                k, _, v = part.partition("=")
                labels[k.strip(",")] = v.strip('"')
        out.append((labels, float(value)))
    return out


def metric_value(text: str, name: str, **labels) -> float | None:
    """Sum of the samples of ``name`` whose labels include ``labels``
    (values compared as strings); None if there is no such sample."""
    want = {k: str(v) for k, v in labels.items()}
    hits = [v for lbl, v in samples(text, name) if all(lbl.get(k) == x for k, x in want.items())]
    return sum(hits) if hits else None
