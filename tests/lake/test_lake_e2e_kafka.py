"""End to end on the real local cluster: the collector scrapes every node's JMX exporter, a
broker is killed and a hot-key producer runs, ingest builds the lake, and the answers cite it.

Collection at a 2 s interval until the conditions are seen; the autoheal fixture restarts the broker afterwards.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from waiting import async_wait_until

from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lake.collector import Collector, targets_from_urls
from lake.ingest import Ingestor, LakeLayout
from lake.service import LakeService
from live.pool import GatewayPool

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

KILLED = 102


def _isr_without(cluster, topic: str, broker: int) -> bool:
    parts = cluster.faults.describe([topic])[topic]
    return all(broker not in p["isr"] for p in parts)


async def test_collect_ingest_kill_broker_then_answers_cite_the_lake(kafka_cluster, spark, tmp_path):
    faults = kafka_cluster.faults
    urp_topic, hot_topic = f"lake-urp-{uuid.uuid4().hex[:6]}", f"lake-hot-{uuid.uuid4().hex[:6]}"
    await asyncio.to_thread(faults.create_topic, urp_topic, 6, 3)
    producer = await asyncio.to_thread(faults.hot_key_producer, hot_topic, "hot-key", None, 200, 0.9, 6)

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    # The product's own scrape timeout (Prometheus's 10 s default): a JMX exporter on a loaded
    # machine can take seconds, and the test must not need an idle one.
    collector = Collector(targets_from_urls(kafka_cluster.metrics_urls), layout.landing, "pytest", interval_s=2.0)
    rounds: list = []
    stop = asyncio.Event()
    collecting = asyncio.create_task(collector.run(stop=stop, on_round=rounds.append))

    def last_rounds() -> str:
        return f"last rounds: {[r.summary() for r in rounds[-3:]]}"

    def collector_running() -> None:  # a wait's check: the collector stopped, no round will come
        if collecting.done():
            raise AssertionError(f"the collector stopped; {last_rounds()}")

    every_node = set(kafka_cluster.metrics_urls)
    try:
        # healthy samples first: a few rounds in which every node's exporter answered
        await async_wait_until(
            lambda: sum({s.target.broker for s in r.scrapes if s.ok} == every_node for r in rounds) >= 3,
            120,
            "three rounds with every exporter answering",
            check=collector_running,
            detail=last_rounds,
        )
        before_kill = len(rounds)
        await asyncio.to_thread(faults.kill_broker, KILLED)
        await asyncio.to_thread(
            faults.wait_for,
            lambda: _isr_without(kafka_cluster, urp_topic, KILLED),
            30,
            f"ISRs of {urp_topic} to drop broker {KILLED}",
        )
        after_isr = len(rounds)
        # rounds that saw the shrunken ISRs on the survivors, and the dead broker's exporter gone
        await async_wait_until(
            lambda: len(rounds) >= after_isr + 5,
            120,
            "five rounds after the ISRs shrank",
            check=collector_running,
            detail=last_rounds,
        )
    finally:
        stop.set()
        await collecting
        stats = producer.stop()
    assert any(KILLED in r.failed for r in rounds[before_kill:])  # the dead broker's exporter is gone
    hot_partition = stats["hot_partition"]
    assert hot_partition is not None and stats["hot_sent"] > 100

    report = await asyncio.to_thread(Ingestor(spark, layout).run)
    assert report.files == len([r for r in rounds if r.file]) and not report.quarantined
    assert report.rows == sum(r.rows for r in rounds)

    lake = LakeService(layout.table, cluster="pytest", spark=spark, query_timeout_s=120, warm=False).start()

    def urp_by_broker(view, start, end):
        from pyspark.sql import functions as F

        df = view.window(start, end).filter(F.col("metric") == "UnderReplicatedPartitions")
        return {r["broker"]: r["m"] for r in df.groupBy("broker").agg(F.max("value").alias("m")).collect()}

    now = time.time()
    import datetime as dt

    end = dt.datetime.fromtimestamp(now + 60, dt.timezone.utc)
    urp = await lake.query(urp_by_broker, end - dt.timedelta(minutes=10), end)
    survivors = [b for b in kafka_cluster.brokers if b != KILLED]
    assert any(urp.get(b, 0) > 0 for b in survivors), urp
    nodes = await lake.query(
        lambda v, s, e: sorted(
            {r.broker for r in v.window(s, e).filter("metric = 'ActiveControllerCount'").select("broker").collect()}
        ),
        end - dt.timedelta(minutes=10),
        end,
    )
    assert nodes == [1]  # KRaft: controller metrics come from the controller node

    env = {
        "KBOT_BOOTSTRAP": kafka_cluster.bootstrap_servers,
        "KBOT_CLUSTER_NAME": "pytest",
        "KBOT_EXPECTED_BROKERS": ",".join(map(str, kafka_cluster.brokers)),
        "KBOT_ADMIN_TIMEOUT_S": "10",
    }
    pool = GatewayPool(load_settings(env))
    try:
        ctx = Context(live=pool, lake=lake)
        result = await answer("why URP --since 5m", ctx)
        reply = result.reply
        assert result.outcome == "answered", reply.verdict
        # live: the cluster says broker 102 is gone ...
        brokers = next(e for e in reply.evidence if e.label == "Brokers registered")
        assert brokers.value == f"2 of 3 (missing: {KILLED})"
        assert reply.diagnoses[0].entry_id == "broker-loss"
        # ... and the lake's trend over the window is cited next to it
        trend = [e for e in reply.evidence if e.source == "lake: urp_trend"]
        assert trend and any(e.label.startswith("URP trend, broker") and e.status == "bad" for e in trend), trend
        assert reply.window and reply.window.startswith("last 5 min:")

        hot = await answer(f"hot-partitions {hot_topic} --since 5m", ctx)
        assert hot.outcome == "answered", hot.reply.verdict
        assert hot.reply.verdict.startswith(f"{hot_topic}-{hot_partition} is hot"), hot.reply.verdict
        first = hot.reply.tables[0].records()[0]
        assert first["#"] == 1 and first["partition"] == f"{hot_topic}-{hot_partition}"
        assert first["leader"].endswith("(live)")  # leader from the cluster's metadata
    finally:
        await pool.close()
