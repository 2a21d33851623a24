"""Prometheus samples of a Kafka node -> lake rows (``lake.schema``).

The brokers run the Prometheus JMX exporter with the rules in
``localkafka/config/jmx_rules.yaml`` (the same naming most Kafka deployments'
exporter configs use): the Yammer MBean ``kafka.<domain>:type=<Type>,name=<Name>[,k=v...]``
becomes ``kafka_<domain>_<type>_<name>`` lower-cased, and every MBean tag after
``name`` becomes a label of the same lower-cased name.  Per attribute:

==================  ===============  ==========================================
MBean kind          attribute        Prometheus sample
==================  ===============  ==========================================
Gauge               Value            ``kafka_d_t_n``
Meter (``*PerSec``) Count            ``kafka_d_t_n_total`` (cumulative)
Timer / Histogram   <q>thPercentile  ``kafka_d_t_n{quantile="0.<q>"}``
Timer / Histogram   Mean / Max       ``kafka_d_t_n_mean`` / ``kafka_d_t_n_max``
==================  ===============  ==========================================

(and ``RequestHandlerAvgIdlePercent``, a Meter whose rate *is* the idle
fraction, exported as a plain gauge 0..1).

The lower-cased name cannot be split back into domain/type/name reliably, so
the mapping is an explicit table of the MBeans the runbook and the queries use
(:data:`MBEANS`), turned into a dict from Prometheus sample name to lake
metric.  Samples of other names are dropped (counted as ``unmapped``): a
broker exports thousands of series the bot never reads.

Row shape (what the collector writes to landing files, one JSON object a line)::

    {"ts": <epoch micros>, "cluster": "...", "broker": 101, "metric": "LogEndOffset",
     "topic": "orders", "partition": 3, "labels": null, "value": 1234.0}

* ``metric`` is the runbook's name (the MBean ``name=`` part);
* the ``topic`` and ``partition`` labels become the topic/partition columns,
  every other label goes into ``labels`` (``request``, ``quantile``, ``clientid``...);
* meters keep their raw cumulative count (see "Counters" in ``lake.schema``);
* timers keep the ``quantile`` label; ``_mean``/``_max`` become ``quantile``
  ``mean``/``max``; their ``_count`` and one-minute rates are not kept;
* NaN and infinite values are dropped (Kafka reports NaN for a percentile
  with no samples yet; JSON has no NaN either).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from lake.schema import CLUSTER_WIDE_BROKER, LABEL_GROUP, LABEL_QUANTILE, LABEL_REQUEST

GAUGE, METER, TIMER = "gauge", "meter", "timer"

#: (domain, type, name, kind) of every MBean the lake keeps.  ``name`` is the
#: lake's metric name; the Prometheus name is derived from the exporter rules.
MBEANS: tuple[tuple[str, str, str, str], ...] = (
    # replication health (brokers)
    ("server", "ReplicaManager", "UnderReplicatedPartitions", GAUGE),
    ("server", "ReplicaManager", "UnderMinIsrPartitionCount", GAUGE),
    ("server", "ReplicaManager", "AtMinIsrPartitionCount", GAUGE),
    ("server", "ReplicaManager", "OfflineReplicaCount", GAUGE),
    ("server", "ReplicaManager", "PartitionCount", GAUGE),
    ("server", "ReplicaManager", "LeaderCount", GAUGE),
    ("server", "ReplicaManager", "PartitionsWithLateTransactionsCount", GAUGE),
    ("server", "ReplicaManager", "IsrShrinksPerSec", METER),
    ("server", "ReplicaManager", "IsrExpandsPerSec", METER),
    ("server", "ReplicaManager", "FailedIsrUpdatesPerSec", METER),
    ("server", "ReplicaFetcherManager", "MaxLag", GAUGE),
    # controller (KRaft: the controller node only)
    ("controller", "KafkaController", "ActiveControllerCount", GAUGE),
    ("controller", "KafkaController", "OfflinePartitionsCount", GAUGE),
    ("controller", "KafkaController", "GlobalPartitionCount", GAUGE),
    ("controller", "KafkaController", "GlobalTopicCount", GAUGE),
    ("controller", "KafkaController", "ActiveBrokerCount", GAUGE),
    ("controller", "KafkaController", "FencedBrokerCount", GAUGE),
    ("controller", "KafkaController", "PreferredReplicaImbalanceCount", GAUGE),
    ("controller", "ControllerStats", "UncleanLeaderElectionsPerSec", METER),
    # logs (topic, partition labels)
    ("log", "Log", "LogEndOffset", GAUGE),
    ("log", "Log", "LogStartOffset", GAUGE),
    ("log", "Log", "Size", GAUGE),
    ("log", "LogManager", "OfflineLogDirectoryCount", GAUGE),
    # transactions (leader side, topic/partition labels)
    ("cluster", "Partition", "LastStableOffsetLag", GAUGE),
    # request path
    ("server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent", GAUGE),
    ("network", "SocketServer", "NetworkProcessorAvgIdlePercent", GAUGE),
    ("network", "RequestMetrics", "RequestQueueTimeMs", TIMER),
    ("network", "RequestMetrics", "TotalTimeMs", TIMER),
    # throughput (topic label; no label = all topics)
    ("server", "BrokerTopicMetrics", "MessagesInPerSec", METER),
    ("server", "BrokerTopicMetrics", "BytesInPerSec", METER),
    ("server", "BrokerTopicMetrics", "BytesOutPerSec", METER),
    ("server", "BrokerTopicMetrics", "FailedProduceRequestsPerSec", METER),
    ("server", "BrokerTopicMetrics", "FailedFetchRequestsPerSec", METER),
)

#: Request types kept for the request-time timers (``labels.request``); a broker
#: reports ~70, most of them never matter in an incident.  None keeps all.
DEFAULT_REQUESTS: frozenset[str] | None = frozenset(
    {
        "Produce",
        "FetchConsumer",
        "FetchFollower",
        "Metadata",
        "ListOffsets",
        "OffsetCommit",
        "OffsetFetch",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "InitProducerId",
        "AddPartitionsToTxn",
        "EndTxn",
        "TxnOffsetCommit",
        "WriteTxnMarkers",
        "ConsumerGroupHeartbeat",
    }
)

#: Quantile label values kept for timers (plus ``mean`` and ``max``).
DEFAULT_QUANTILES: frozenset[str] = frozenset({"0.50", "0.99", "0.999"})


def prometheus_name(domain: str, type_: str, name: str) -> str:
    """``kafka_<domain>_<type>_<name>`` lower-cased, as the exporter rules name it."""
    return f"kafka_{domain}_{type_}_{name}".replace(".", "_").lower()


@dataclass(frozen=True)
class _Target:
    metric: str
    kind: str
    quantile: str | None = None  # set for the _mean / _max samples of a timer


def _sample_table(mbeans: Iterable[tuple[str, str, str, str]]) -> dict[str, _Target]:
    table: dict[str, _Target] = {}
    for domain, type_, name, kind in mbeans:
        base = prometheus_name(domain, type_, name)
        if kind == METER:
            table[base + "_total"] = _Target(name, kind)
        elif kind == TIMER:
            table[base] = _Target(name, kind)
            table[base + "_mean"] = _Target(name, kind, "mean")
            table[base + "_max"] = _Target(name, kind, "max")
        else:
            table[base] = _Target(name, kind)
    return table


SAMPLES: dict[str, _Target] = _sample_table(MBEANS)

#: Lake metric names this mapping can produce, plus the consumer-group rows the
#: collector samples through the admin API.
LAKE_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m[2] for m in MBEANS)) + ("CommittedOffset", "ConsumerLag")

_INT32 = 2**31 - 1


@dataclass
class MapResult:
    rows: list[dict] = field(default_factory=list)
    samples: int = 0  # samples read from the exposition
    unmapped: int = 0  # samples of names the table does not keep
    dropped: int = 0  # mapped but not kept: NaN, filtered request/quantile, bad partition label


class Mapper:
    """Maps one node's samples to lake rows.  Stateless apart from its settings."""

    def __init__(
        self,
        requests: frozenset[str] | None = DEFAULT_REQUESTS,
        quantiles: frozenset[str] | None = DEFAULT_QUANTILES,
        table: dict[str, _Target] | None = None,
    ):
        self.requests = requests
        self.quantiles = quantiles
        self.table = SAMPLES if table is None else table

    def row(
        self, name: str, labels: dict[str, str], value: float, *, broker: int, ts_us: int, cluster: str
    ) -> dict | None:
        """The lake row of one sample, or None when the sample is not kept."""
        target = self.table.get(name)
        if target is None:
            return None
        value = float(value)
        if math.isnan(value) or math.isinf(value):
            return None
        rest = dict(labels)
        topic = rest.pop("topic", None)
        partition: int | None = None
        raw_partition = rest.pop("partition", None)
        if raw_partition is not None:
            try:
                partition = int(raw_partition)
            except ValueError:
                return None
            if not 0 <= partition <= _INT32:
                return None
        if target.kind == TIMER:
            request = rest.get(LABEL_REQUEST)
            if self.requests is not None and request is not None and request not in self.requests:
                return None
            if target.quantile is not None:
                rest[LABEL_QUANTILE] = target.quantile
            elif self.quantiles is not None and rest.get(LABEL_QUANTILE) not in self.quantiles:
                return None
        return {
            "ts": int(ts_us),
            "cluster": cluster,
            "broker": int(broker),
            "metric": target.metric,
            "topic": topic,
            "partition": partition,
            "labels": dict(sorted(rest.items())) or None,
            "value": value,
        }

    def map_samples(
        self, samples: Iterable[tuple[str, dict[str, str], float]], *, broker: int, ts_us: int, cluster: str
    ) -> MapResult:
        out = MapResult()
        for name, labels, value in samples:
            out.samples += 1
            if name not in self.table:
                out.unmapped += 1
                continue
            r = self.row(name, labels, value, broker=broker, ts_us=ts_us, cluster=cluster)
            if r is None:
                out.dropped += 1
            else:
                out.rows.append(r)
        return out

    def map_text(self, text: str, *, broker: int, ts_us: int, cluster: str) -> MapResult:
        """Parse a Prometheus text exposition (``prometheus_client``'s parser) and map it.

        Raises ``ValueError`` when the text is not a valid exposition.
        """
        return self.map_samples(_samples(text), broker=broker, ts_us=ts_us, cluster=cluster)


def _samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            yield s.name, s.labels, s.value


def group_rows(
    group: str, topic: str, partition: int, committed: int, lag: int | None, *, ts_us: int, cluster: str
) -> list[dict]:
    """``CommittedOffset`` (and ``ConsumerLag`` when the log end offset is known) rows of one
    observed commit of ``group`` on a partition: broker -1, ``labels.group``."""
    base = {
        "ts": int(ts_us),
        "cluster": cluster,
        "broker": CLUSTER_WIDE_BROKER,
        "topic": topic,
        "partition": int(partition),
        "labels": {LABEL_GROUP: group},
    }
    rows = [{**base, "metric": "CommittedOffset", "value": float(committed)}]
    if lag is not None:
        rows.append({**base, "labels": {LABEL_GROUP: group}, "metric": "ConsumerLag", "value": float(lag)})
    return rows
