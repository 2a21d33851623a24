"""Prometheus exposition (as the JMX exporter rules in localkafka/config name it) -> lake rows."""

from __future__ import annotations

import pytest

from lake.mapping import LAKE_METRICS, Mapper, group_rows, prometheus_name

TS = 1_714_557_600_000_000  # 2024-05-01T10:00:00Z in micros

EXPOSITION = """\
# HELP kafka_server_replicamanager_underreplicatedpartitions Attribute exposed for management
# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge
kafka_server_replicamanager_underreplicatedpartitions 3.0
# TYPE kafka_server_replicamanager_isrshrinkspersec_total counter
kafka_server_replicamanager_isrshrinkspersec_total 17.0
# TYPE kafka_server_replicamanager_isrexpandspersec_total counter
kafka_server_replicamanager_isrexpandspersec_total 2.0
# TYPE kafka_server_replicamanager_isrshrinkspersec_oneminuterate gauge
kafka_server_replicamanager_isrshrinkspersec_oneminuterate 0.2
# TYPE kafka_log_log_logendoffset gauge
kafka_log_log_logendoffset{topic="orders",partition="0",} 1200.0
kafka_log_log_logendoffset{topic="orders",partition="1",} 45.0
# TYPE kafka_log_log_size gauge
kafka_log_log_size{topic="orders",partition="0",} 123456.0
# TYPE kafka_cluster_partition_laststableoffsetlag gauge
kafka_cluster_partition_laststableoffsetlag{topic="payments",partition="2",} 9.0
# TYPE kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent gauge
kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent 0.87
# TYPE kafka_network_requestmetrics_requestqueuetimems gauge
kafka_network_requestmetrics_requestqueuetimems{request="Produce",quantile="0.50",} 0.4
kafka_network_requestmetrics_requestqueuetimems{request="Produce",quantile="0.75",} 0.6
kafka_network_requestmetrics_requestqueuetimems{request="Produce",quantile="0.99",} 2.5
kafka_network_requestmetrics_requestqueuetimems{request="DescribeAcls",quantile="0.99",} 1.0
kafka_network_requestmetrics_requestqueuetimems{request="FetchConsumer",quantile="0.99",} NaN
# TYPE kafka_network_requestmetrics_requestqueuetimems_mean gauge
kafka_network_requestmetrics_requestqueuetimems_mean{request="Produce",} 0.5
# TYPE kafka_network_requestmetrics_requestqueuetimems_count gauge
kafka_network_requestmetrics_requestqueuetimems_count{request="Produce",} 1000.0
# TYPE kafka_server_brokertopicmetrics_messagesinpersec_total counter
kafka_server_brokertopicmetrics_messagesinpersec_total 5000.0
kafka_server_brokertopicmetrics_messagesinpersec_total{topic="orders",} 4000.0
# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge
kafka_controller_kafkacontroller_activecontrollercount 1.0
# TYPE jvm_memory_bytes_used gauge
jvm_memory_bytes_used{area="heap",} 1.0E8
"""


def _by(rows, metric, **match):
    return [r for r in rows if r["metric"] == metric and all(r.get(k) == v for k, v in match.items())]


def test_maps_runbook_metrics_with_topic_partition_and_labels():
    res = Mapper().map_text(EXPOSITION, broker=101, ts_us=TS, cluster="dev")
    rows = res.rows
    assert all(r["ts"] == TS and r["cluster"] == "dev" and r["broker"] == 101 for r in rows)
    assert _by(rows, "UnderReplicatedPartitions") == [
        {
            "ts": TS,
            "cluster": "dev",
            "broker": 101,
            "metric": "UnderReplicatedPartitions",
            "topic": None,
            "partition": None,
            "labels": None,
            "value": 3.0,
        }
    ]
    # meters: the raw cumulative count of the _total sample; the one-minute rate is not kept
    assert [r["value"] for r in _by(rows, "IsrShrinksPerSec")] == [17.0]
    assert [r["value"] for r in _by(rows, "IsrExpandsPerSec")] == [2.0]
    leo = _by(rows, "LogEndOffset")
    assert {(r["topic"], r["partition"], r["value"]) for r in leo} == {("orders", 0, 1200.0), ("orders", 1, 45.0)}
    assert all(r["labels"] is None for r in leo)
    assert _by(rows, "Size")[0]["value"] == 123456.0
    lso = _by(rows, "LastStableOffsetLag")
    assert (lso[0]["topic"], lso[0]["partition"], lso[0]["value"]) == ("payments", 2, 9.0)
    assert _by(rows, "RequestHandlerAvgIdlePercent")[0]["value"] == 0.87
    assert _by(rows, "ActiveControllerCount")[0]["value"] == 1.0


def test_timers_keep_chosen_quantiles_and_mean_and_drop_nan():
    rows = Mapper().map_text(EXPOSITION, broker=1, ts_us=TS, cluster="c").rows
    q = {(r["labels"]["request"], r["labels"]["quantile"]): r["value"] for r in _by(rows, "RequestQueueTimeMs")}
    # 0.75 not kept by default, DescribeAcls not an incident request type, NaN dropped, _count not kept
    assert q == {("Produce", "0.50"): 0.4, ("Produce", "0.99"): 2.5, ("Produce", "mean"): 0.5}


def test_topic_label_is_optional_for_broker_topic_metrics():
    rows = Mapper().map_text(EXPOSITION, broker=1, ts_us=TS, cluster="c").rows
    assert {(r["topic"], r["value"]) for r in _by(rows, "MessagesInPerSec")} == {(None, 5000.0), ("orders", 4000.0)}


def test_counts_unmapped_and_dropped_samples():
    res = Mapper().map_text(EXPOSITION, broker=1, ts_us=TS, cluster="c")
    # jvm_memory_bytes_used, the one-minute rate and the _count sample are not in the table
    assert res.unmapped == 3
    assert res.dropped == 3  # quantile 0.75, DescribeAcls, NaN
    assert res.samples == len(res.rows) + res.unmapped + res.dropped


def test_every_request_type_when_asked():
    rows = Mapper(requests=None, quantiles=None).map_text(EXPOSITION, broker=1, ts_us=TS, cluster="c").rows
    assert len(_by(rows, "RequestQueueTimeMs")) == 5  # 3 Produce quantiles + DescribeAcls + mean (NaN still dropped)


def test_bad_partition_label_is_dropped_not_fatal():
    text = '# TYPE kafka_log_log_logendoffset gauge\nkafka_log_log_logendoffset{topic="t",partition="x"} 1\n'
    res = Mapper().map_text(text, broker=1, ts_us=TS, cluster="c")
    assert res.rows == [] and res.dropped == 1


def test_invalid_exposition_raises_value_error():
    with pytest.raises(ValueError):
        Mapper().map_text("kafka_server_replicamanager_underreplicatedpartitions{ 3\n", broker=1, ts_us=TS, cluster="c")


def test_names_follow_the_exporter_rules():
    assert (
        prometheus_name("server", "ReplicaManager", "UnderReplicatedPartitions")
        == "kafka_server_replicamanager_underreplicatedpartitions"
    )
    assert (
        prometheus_name("coordinator.group", "GroupMetadataManager", "NumGroups")
        == "kafka_coordinator_group_groupmetadatamanager_numgroups"
    )
    from lake.schema import METRICS

    # every metric the lake schema documents (except the consumer-group rows) has a mapping
    assert set(METRICS) <= set(LAKE_METRICS)


def test_localkafka_constants_are_mapped():
    """The names localkafka/metrics.py documents for the bot are the ones the table maps."""
    from lake.mapping import SAMPLES
    from localkafka import metrics as M

    for const in (
        M.UNDER_REPLICATED,
        M.ISR_SHRINKS,
        M.ISR_EXPANDS,
        M.AT_MIN_ISR,
        M.UNDER_MIN_ISR,
        M.LATE_TXN_PARTITIONS,
        M.ACTIVE_CONTROLLERS,
        M.OFFLINE_PARTITIONS,
        M.LOG_END_OFFSET,
        M.LOG_SIZE,
        M.PARTITION_LSO_LAG,
        M.REQUEST_QUEUE_TIME,
        M.REQUEST_HANDLER_IDLE,
        M.MESSAGES_IN,
    ):
        assert const in SAMPLES, const


def test_group_rows():
    rows = group_rows("g1", "orders", 3, 100, 7, ts_us=TS, cluster="c")
    assert [(r["metric"], r["value"], r["broker"], r["labels"]) for r in rows] == [
        ("CommittedOffset", 100.0, -1, {"group": "g1"}),
        ("ConsumerLag", 7.0, -1, {"group": "g1"}),
    ]
    assert [r["metric"] for r in group_rows("g1", "orders", 3, 100, None, ts_us=TS, cluster="c")] == ["CommittedOffset"]
