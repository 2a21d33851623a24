"""Fault injection against the real cluster; kafka_autoheal heals after each test."""

import time

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, OffsetSpec, ResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin._transactions import TransactionState
from waiting import wait_until

from localkafka.cluster import BROKER_IDS, metric_value, scrape

pytestmark = pytest.mark.kafka


def urp(cluster, broker_id):
    text = scrape(cluster.brokers[broker_id].metrics_url)
    return metric_value(text, "kafka_server_replicamanager_underreplicatedpartitions") if text else None


def offsets(cluster, topic, partition):
    """(high watermark, last stable offset) of one partition."""
    tp = TopicPartition(topic, partition)
    admin = cluster.admin()
    hw = (
        admin.list_offsets(
            {tp: OffsetSpec.latest()}, request_timeout=10, isolation_level=IsolationLevel.READ_UNCOMMITTED
        )[tp]
        .result()
        .offset
    )
    lso = (
        admin.list_offsets(
            {tp: OffsetSpec.latest()}, request_timeout=10, isolation_level=IsolationLevel.READ_COMMITTED
        )[tp]
        .result()
        .offset
    )
    return hw, lso


def test_kill_broker_shrinks_isr_and_raises_urp(kafka_cluster):
    f = kafka_cluster.faults
    f.create_topic("kill-rf3", 3, 3)
    t0 = time.monotonic()
    info = f.kill_broker(102)
    assert info["broker_id"] == 102 and kafka_cluster.brokers[102].pid() is None
    parts = f.wait_for(
        lambda: (lambda d: d if all(102 not in p["isr"] for p in d) else None)(f.describe(["kill-rf3"])["kill-rf3"]),
        30,
        "ISR without broker 102",
    )  # ~5 s: broker.session.timeout.ms=4000
    shrink_s = time.monotonic() - t0
    assert all(len(p["isr"]) == 2 and len(p["replicas"]) == 3 for p in parts)
    print(f"ISR shrank {shrink_s:.1f}s after SIGKILL")
    f.wait_for(
        lambda: (urp(kafka_cluster, 101) or 0) + (urp(kafka_cluster, 103) or 0) > 0,
        20,
        "UnderReplicatedPartitions > 0 on a surviving broker",
    )
    ctl = scrape(kafka_cluster.controller.metrics_url)
    assert metric_value(ctl, "kafka_controller_kafkacontroller_fencedbrokercount") == 1
    st = kafka_cluster.status()
    assert not st["healthy"] and 102 not in st["registered_brokers"]
    assert {n["id"]: n["state"] for n in st["nodes"]}[102] == "dead"


def test_pause_and_resume_broker(kafka_cluster):
    f = kafka_cluster.faults
    f.create_topic("pause-rf3", 3, 3)
    f.pause_broker(103)
    node = {n["id"]: n for n in kafka_cluster.status()["nodes"]}[103]
    assert node["state"] == "paused" and node["pid"] and not node["alive"]
    # the frozen JVM stops heartbeating -> fenced -> out of every ISR
    f.wait_for(
        lambda: all(103 not in p["isr"] for p in f.describe(["pause-rf3"])["pause-rf3"]),
        30,
        "ISR without paused broker 103",
    )
    f.wait_for(lambda: 103 not in kafka_cluster.registered_brokers(timeout=3), 20, "paused broker 103 fenced")
    f.resume_broker(103)
    f.wait_for(lambda: kafka_cluster.registered_brokers() == list(BROKER_IDS), 30, "broker 103 back after SIGCONT")
    f.wait_for(
        lambda: all(sorted(p["isr"]) == sorted(p["replicas"]) for p in f.describe(["pause-rf3"])["pause-rf3"]),
        30,
        "ISR expanded again",
    )


def test_restart_broker(kafka_cluster):
    f = kafka_cluster.faults
    old = kafka_cluster.brokers[101].pid()
    info = f.restart_broker(101)
    assert info["old_pid"] == old and info["pid"] != old
    assert kafka_cluster.brokers[101].pid() == info["pid"]
    assert 101 in kafka_cluster.registered_brokers()


def test_hanging_transaction_stays_open(kafka_cluster):
    f = kafka_cluster.faults
    txn = f.hanging_transaction("payments-txn", partition=1, records=5)
    tid = txn["transactional_id"]
    assert (txn["first_offset"], txn["last_offset"]) == (0, 4)
    assert txn["state"] == "Ongoing" and txn["producer_id"] >= 0 and txn["producer_epoch"] >= 0
    ka = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
    try:
        desc = ka.describe_transactions([tid])[tid]
        assert desc.state == TransactionState.ONGOING
        assert desc.transaction_timeout_ms == 600000
        assert TopicPartition("payments-txn", 1) in {
            TopicPartition(tp.topic, tp.partition) for tp in desc.topic_partitions
        }
        listed = [t for txns in ka.list_transactions().values() for t in txns if t.transactional_id == tid]
        assert listed and listed[0].state == TransactionState.ONGOING
    finally:
        ka.close()
    # records are in the log but read_committed readers are stuck at the txn start
    hw, lso = offsets(kafka_cluster, "payments-txn", 1)
    assert (hw, lso) == (5, 0)
    lags = [
        metric_value(
            scrape(kafka_cluster.brokers[b].metrics_url),
            "kafka_cluster_partition_laststableoffsetlag",
            topic="payments-txn",
            partition="1",
        )
        for b in BROKER_IDS
    ]
    assert max(v for v in lags if v is not None) == 5
    # heal() fences the dead producer by re-initialising its transactional.id
    healed = f.heal()
    assert tid in healed["aborted_transactions"]
    # 5 aborted records + the abort marker; LSO catches up with the HW
    f.wait_for(lambda: offsets(kafka_cluster, "payments-txn", 1) == (6, 6), 15, "LSO == HW after the abort")


def test_offline_partitions(kafka_cluster):
    f = kafka_cluster.faults
    info = f.offline_partitions("offline-rf1", broker_id=103, partitions=2)
    assert info["broker_id"] == 103 and info["partitions"] == [0, 1]
    assert all(p["leader"] is None and p["replicas"] == [103] for p in info["describe"])
    f.wait_for(
        lambda: (
            metric_value(
                scrape(kafka_cluster.controller.metrics_url), "kafka_controller_kafkacontroller_offlinepartitionscount"
            )
            >= 2
        ),
        15,
        "controller OfflinePartitionsCount >= 2",
    )


def test_clamped_topic_accepts_acks_all_with_one_replica(kafka_cluster):
    f = kafka_cluster.faults
    info = f.create_clamped_topic("clamped-rf1")
    assert info["replication_factor"] == 1 and info["min_insync_replicas"] == 2
    (part,) = info["partitions"]
    assert len(part["replicas"]) == 1
    cfg = _topic_config(kafka_cluster, "clamped-rf1")
    assert cfg["min.insync.replicas"] == "2"
    # effective min ISR = min(min.insync.replicas, replicas) = 1: acks=all succeeds
    errors = []
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all", "message.timeout.ms": 10000})
    p.produce("clamped-rf1", b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors == [None]
    text = scrape(kafka_cluster.brokers[part["leader"]].metrics_url)
    assert metric_value(text, "kafka_cluster_partition_atminisr", topic="clamped-rf1") == 1
    assert metric_value(text, "kafka_cluster_partition_underminisr", topic="clamped-rf1") == 0


def _topic_config(cluster, topic):
    """The topic's configs. DescribeConfigs goes to any broker, and one that has not applied the
    new topic's metadata yet answers UNKNOWN_TOPIC_OR_PART: ask again for up to 15 s."""
    res = ConfigResource(ResourceType.TOPIC, topic)

    def configs() -> dict | None:
        try:
            entries = cluster.admin().describe_configs([res], request_timeout=10)[res].result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
            return None  # not yet: only this error means "not applied yet"
        return {k: v.value for k, v in entries.items()}

    return wait_until(configs, 15, f"a broker to describe {topic}'s configs", interval=0.5)


def test_unclean_topic(kafka_cluster):
    info = kafka_cluster.faults.create_unclean_topic("unclean-rf3")
    assert info["unclean_leader_election"] and len(info["partitions"]) == 3
    assert _topic_config(kafka_cluster, "unclean-rf3")["unclean.leader.election.enable"] == "true"


def test_hot_key_producer_makes_one_partition_hot(kafka_cluster):
    f = kafka_cluster.faults
    hot = f.hot_key_producer("hot-topic", key="customer-42", duration=3, rate=300)
    hot.join(20)
    st = hot.stop()
    assert st["errors"] == 0 and st["sent"] >= 300
    assert st["hot_partition"] is not None
    total = sum(st["per_partition"].values())
    assert total == st["sent"]
    assert st["per_partition"][st["hot_partition"]] / total > 0.8
    others = [n for p, n in st["per_partition"].items() if p != st["hot_partition"]]
    assert max(others) < 0.1 * total


def test_lagging_consumer_group(kafka_cluster):
    f = kafka_cluster.faults
    lg = f.lagging_consumer_group("lagging-group", "orders-lag", initial=60, rate=50)
    assert lg.group == "lagging-group" and sum(lg.committed.values()) == 60
    first = sum(lg.lag().values())
    f.wait_for(lambda: sum(lg.lag().values()) > first + 20, 20, "consumer lag to grow")
    lg.stop()


def test_heal_restores_everything(kafka_cluster):
    f = kafka_cluster.faults
    f.create_topic("heal-rf3", 3, 3)
    f.kill_broker(101)
    f.pause_broker(102)
    f.wait_for(lambda: f.under_replicated(), 20, "under-replicated partitions")
    result = f.heal()
    assert sorted(result["actions"]) == ["resumed 102", "started 101"]
    assert f.under_replicated() == {}
    assert kafka_cluster.status()["healthy"]
    for b in BROKER_IDS:
        assert urp(kafka_cluster, b) == 0
