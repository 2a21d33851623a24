"""Spot checks of reference facts against the loaded knowledge base.

Every expected value below was typed in by hand from the seed documents (seed 000's source-line
references, seed 001's tables, KIP-427's worked examples, seed 003's metrics reference). None of it is
computed from the KB, so a wrong or drifted value in a data file fails here.
"""

from __future__ import annotations

import pytest

from runbook_kb import default_kb


def _configs():
    return {c.key: c for c in default_kb().reference["configs"].configs}


def _metrics():
    return {m.name: m for m in default_kb().reference["signals"].metrics}


# ---- config defaults and the source line seed 000 ties each to -------------------------------------

# (key, default, scope, source)
CONFIG_DEFAULTS = [
    ("replica.lag.time.max.ms", "30000", "broker", "ReplicationConfigs.java:55"),
    ("replica.fetch.wait.max.ms", "500", "broker", "ReplicationConfigs.java:75"),
    ("num.replica.fetchers", "1", "broker", "ReplicationConfigs.java:96"),
    ("unclean.leader.election.interval.ms", "300000", "controller", "ReplicationConfigs.java:123"),
    ("unclean.leader.election.enable", "false", "topic", "LogConfig.java:139"),
    ("num.io.threads", "8", "broker", "ServerConfigs.java:51"),
    ("max.incremental.fetch.session.cache.slots", "1000", "broker", "ServerConfigs.java:102"),
    ("num.network.threads", "3", "broker", "SocketServerConfigs.java:152"),
    ("queued.max.requests", "500", "broker", "SocketServerConfigs.java:144"),
    ("transaction.max.timeout.ms", "900000", "broker", "TransactionStateManagerConfig.java:33"),
    ("transaction.timeout.ms", "60000", "producer", "ProducerConfig.java:548"),
    ("controller.quorum.fetch.timeout.ms", "2000", "controller", "QuorumConfig.java:83"),
    ("controller.quorum.election.timeout.ms", "1000", "controller", "QuorumConfig.java:77"),
    ("max.poll.interval.ms", "300000", "consumer", "ConsumerConfig.java:629"),
    ("session.timeout.ms", "45000", "consumer", "ConsumerConfig.java:438"),
    ("heartbeat.interval.ms", "3000", "consumer", "ConsumerConfig.java:443"),
    ("max.poll.records", "500", "consumer", "ConsumerConfig.java:94"),
    ("group.consumer.min.session.timeout.ms", "45000", "broker", "GroupCoordinatorConfig.java:189"),
    ("group.consumer.max.session.timeout.ms", "60000", "broker", "GroupCoordinatorConfig.java:193"),
    # Defaults the seeds state without a source line.
    ("min.insync.replicas", "1", "topic", None),
    ("auto.leader.rebalance.enable", "true", "broker", None),
    ("leader.imbalance.check.interval.seconds", "300", "broker", None),
    ("leader.imbalance.per.broker.percentage", "10", "broker", None),
    ("controlled.shutdown.enable", "true", "broker", None),
    ("controlled.shutdown.max.retries", "3", "broker", None),
    ("replica.fetch.max.bytes", "1048576", "broker", None),
    ("num.recovery.threads.per.data.dir", "1", "broker", None),
    ("offsets.topic.num.partitions", "50", "broker", None),
    ("transaction.state.log.min.isr", "2", "broker", None),
    ("log.retention.hours", "168", "broker", None),
    ("log.segment.bytes", "1073741824", "broker", None),
    ("delete.retention.ms", "86400000", "topic", None),
]


@pytest.mark.parametrize(("key", "default", "scope", "source"), CONFIG_DEFAULTS, ids=[c[0] for c in CONFIG_DEFAULTS])
def test_config_default_and_source(key, default, scope, source):
    cfg = _configs()[key]
    assert cfg.default == default
    assert cfg.scope == scope
    assert cfg.source == source


def test_removed_message_count_setting_is_marked_removed():
    cfg = _configs()["replica.lag.max.messages"]
    assert "removed" in cfg.default.lower()
    assert "KIP-16" in cfg.default


# ---- metric MBeans ---------------------------------------------------------------------------------

MBEANS = [
    ("UnderReplicatedPartitions", "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"),
    ("UnderMinIsrPartitionCount", "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"),
    ("AtMinIsrPartitionCount", "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount"),
    ("IsrShrinksPerSec", "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec"),
    ("IsrExpandsPerSec", "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec"),
    ("FailedIsrUpdatesPerSec", "kafka.server:type=ReplicaManager,name=FailedIsrUpdatesPerSec"),
    ("FailedProduceRequestsPerSec", "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec"),
    ("OfflinePartitionsCount", "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"),
    ("ActiveControllerCount", "kafka.controller:type=KafkaController,name=ActiveControllerCount"),
    ("LeaderElectionRateAndTimeMs", "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"),
    ("UncleanLeaderElectionsPerSec", "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"),
    ("RequestHandlerAvgIdlePercent", "kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent"),
    ("NetworkProcessorAvgIdlePercent", "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent"),
    ("RequestQueueSize", "kafka.network:type=RequestChannel,name=RequestQueueSize"),
    ("ResponseQueueSize", "kafka.network:type=RequestChannel,name=ResponseQueueSize"),
    ("LogFlushRateAndTimeMs", "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs"),
    ("AtMinIsr", "kafka.cluster:type=Partition,name=AtMinIsr,topic=<topic>,partition=<partition>"),
]


@pytest.mark.parametrize(("name", "mbean"), MBEANS, ids=[m[0] for m in MBEANS])
def test_metric_mbean(name, mbean):
    assert _metrics()[name].mbean == mbean


def test_purgatory_mbean_names_both_operations():
    mbean = _metrics()["PurgatorySize"].mbean
    assert mbean.startswith("kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=")
    assert "Produce" in mbean and "Fetch" in mbean


def test_healthy_values():
    metrics = _metrics()
    assert metrics["UnderReplicatedPartitions"].healthy == "0"
    assert metrics["OfflinePartitionsCount"].healthy == "0"
    assert metrics["UncleanLeaderElectionsPerSec"].healthy == "0"
    assert metrics["ActiveControllerCount"].healthy == "SUM == 1"
    assert metrics["RequestHandlerAvgIdlePercent"].healthy == "> 0.3"
    assert metrics["NetworkProcessorAvgIdlePercent"].healthy == "> 0.4"


# ---- request latency decomposition -----------------------------------------------------------------

LATENCY_PARTS = [
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
]


@pytest.mark.parametrize("name", LATENCY_PARTS)
def test_latency_component_mbean(name):
    parts = {c.metric: c for c in default_kb().reference["latency"].components}
    mbean = parts[name].mbean
    assert mbean.startswith(f"kafka.network:type=RequestMetrics,name={name},request=")
    for request in ("Produce", "FetchConsumer", "FetchFollower"):
        assert request in mbean


def test_latency_map_points_at_the_right_threads():
    parts = {c.metric: c for c in default_kb().reference["latency"].components}
    assert "num.io.threads" in parts["RequestQueueTimeMs"].high_means
    assert "num.network.threads" in parts["ResponseQueueTimeMs"].high_means
    assert "min.insync.replicas" in parts["RemoteTimeMs"].high_means


# ---- durability matrix and RF recommendations (seed 001) --------------------------------------------

# (acks, min.insync.replicas, RF, a phrase the outcome must contain)
MATRIX = [
    ("0", "any", "any", "fire-and-forget"),
    ("1", "any", "any", "leader"),
    ("all", "1", "3", "acks=1"),
    ("all", "2", "3", "NotEnoughReplicasException"),
    ("all", "3", "3", "blocks"),
    ("all", "3", "4", "DC"),
    ("all", "2", "1", "min(2, 1) = 1"),
]


@pytest.mark.parametrize(
    ("acks", "min_isr", "rf", "phrase"), MATRIX, ids=[f"acks={m[0]}-min={m[1]}-rf={m[2]}" for m in MATRIX]
)
def test_durability_matrix_row(acks, min_isr, rf, phrase):
    rows = default_kb().reference["durability"].matrix
    matches = [r for r in rows if (r.acks, r.min_insync_replicas, r.replication_factor) == (acks, min_isr, rf)]
    assert len(matches) == 1
    assert phrase in matches[0].outcome


def test_recommended_row_is_marked_recommended():
    rows = default_kb().reference["durability"].matrix
    row = next(r for r in rows if (r.acks, r.min_insync_replicas, r.replication_factor) == ("all", "2", "3"))
    assert "recommended" in row.outcome.lower()


RF_RECOMMENDATIONS = [
    ("Dev/test", 1, 1),
    ("Standard production", 3, 2),
    ("Critical financial data", 3, 2),
    ("Large cluster (>10 brokers)", 3, 2),
    ("Multi-AZ (3 AZs)", 3, 2),
    ("Two-datacenter stretch", 4, 3),
]


def test_rf_recommendations_are_the_six_seed_rows():
    recs = default_kb().reference["durability"].rf_recommendations
    assert [(r.use_case, r.replication_factor, r.min_insync_replicas) for r in recs] == RF_RECOMMENDATIONS


# ---- KIP-427 partition categories and worked examples -----------------------------------------------

CATEGORIES = [
    ("UnderReplicated", "UnderReplicatedPartitions", "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"),
    ("AtMinIsr", "AtMinIsrPartitionCount", "kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount"),
    ("UnderMinIsr", "UnderMinIsrPartitionCount", "kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount"),
    ("Offline", "OfflinePartitionsCount", "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"),
]


@pytest.mark.parametrize(("name", "metric", "mbean"), CATEGORIES, ids=[c[0] for c in CATEGORIES])
def test_partition_category(name, metric, mbean):
    cats = {c.name: c for c in default_kb().reference["partition_categories"].categories}
    assert cats[name].metric == metric
    assert cats[name].mbean == mbean


# (RF, min ISR, initial ISR, [(event, ISR after, categories after)])
EXAMPLES = [
    (
        3,
        2,
        [0, 1, 2],
        [
            ("Broker 0 fails", [1, 2], {"UnderReplicated", "AtMinIsr"}),
            ("Broker 1 fails", [2], {"UnderMinIsr"}),
        ],
    ),
    (
        3,
        1,
        [0, 1, 2],
        [
            ("Broker 0 fails", [1, 2], {"UnderReplicated"}),
            ("Broker 1 fails", [2], {"UnderReplicated", "AtMinIsr"}),
            ("Broker 2 fails", [], {"Offline"}),
        ],
    ),
    (
        4,
        2,
        [0, 1, 2, 3],
        [
            ("Broker 0 fails", [1, 2, 3], {"UnderReplicated"}),
            ("Broker 1 fails", [2, 3], {"UnderReplicated", "AtMinIsr"}),
            ("Broker 2 fails", [3], {"UnderMinIsr"}),
        ],
    ),
]


@pytest.mark.parametrize(("rf", "min_isr", "initial", "steps"), EXAMPLES, ids=["example1", "example2", "example3"])
def test_kip427_worked_example(rf, min_isr, initial, steps):
    examples = default_kb().reference["partition_categories"].examples
    matches = [e for e in examples if (e.replication_factor, e.min_insync_replicas) == (rf, min_isr)]
    assert len(matches) == 1
    example = matches[0]
    assert example.initial_isr == initial
    assert [(s.event, s.isr, set(s.categories)) for s in example.steps] == steps


# ---- alert thresholds (seeds 000 and 001) and the entries they open -----------------------------------

# (metric, severity, a phrase of the condition, a failure-mode id the alert must open)
ALERTS = [
    ("UnderReplicatedPartitions", "warning", "5 minutes", "broker-loss"),
    ("OfflinePartitionsCount", "critical", "> 0", "offline-partitions"),
    ("UnderMinIsrPartitionCount", "critical", "> 0", "under-min-isr"),
    ("UncleanLeaderElectionsPerSec", "critical", "> 0", "unclean-election"),
    ("ActiveControllerCount", "critical", "== 0", "controller-quorum-loss"),
    ("IsrShrinksPerSec", "warning", "sustained", "slow-follower"),
    ("OfflineLogDirectoryCount", "critical", "> 0", "log-dir-failure"),
    ("PartitionsWithLateTransactionsCount", "warning", "> 0", "hanging-transaction"),
]


@pytest.mark.parametrize(("metric", "severity", "phrase", "runbook"), ALERTS, ids=[a[0] for a in ALERTS])
def test_alert(metric, severity, phrase, runbook):
    alerts = [a for a in default_kb().reference["signals"].alerts if a.metric == metric]
    assert alerts, f"no alert on {metric}"
    alert = next(a for a in alerts if a.severity == severity)
    assert phrase in alert.condition
    assert runbook in alert.runbook


@pytest.mark.parametrize(
    ("metric", "warning", "critical"),
    [
        ("disk usage", "> 70 %", "> 85 %"),
        ("RequestHandlerAvgIdlePercent", "< 0.2", "< 0.1"),
        ("GC pause time (p99)", "> 50 ms", "> 200 ms"),
    ],
)
def test_two_level_thresholds(metric, warning, critical):
    alerts = {a.severity: a for a in default_kb().reference["signals"].alerts if a.metric == metric}
    assert alerts["warning"].condition.startswith(warning)
    assert alerts["critical"].condition.startswith(critical)
