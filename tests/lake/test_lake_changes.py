"""What changed? end to end, on the real cluster and real Spark: the collector's metadata rounds
(lake/change_sampler.py) around changes made from outside with the user's own AdminClient, the
events landed and appended to the lake's change table by Spark (lake/changes.py), and `changes`
answering from that table - newest first, narrowed by topic, with before and after - while a
sensitive value never reaches the table."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from commandkit import cluster_env
from confluent_kafka.admin import AdminClient, NewTopic

from bot.render import render_json
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lab.chaos_faults import set_client_quota
from lake.change_sampler import ChangeSampler
from lake.changes import changes_table, ingest_changes
from lake.layout import LakeLayout
from lake.service import LakeService
from live import AdminGateway, ClusterConfig
from live.pool import GatewayPool
from localkafka.testing import drop_other_topics
from runbook_kb import default_kb

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
CLUSTER = "changes-e2e"


def _done(futures) -> None:
    for f in futures.values():
        f.result(30)


async def _ask_live(cluster, lake: LakeService, *questions: str) -> list[dict]:
    """The questions answered with the live cluster beside the lake (as `kbot run` has both)."""
    pool = GatewayPool(load_settings({**cluster_env(cluster), "KBOT_CLUSTER_NAME": CLUSTER}))
    try:
        ctx = Context(kb=default_kb(), lake=lake, live=pool)
        out = []
        for text in questions:
            result = await answer(text, ctx, user="U0TEST")
            reply = await result.reply.later if result.reply.later is not None else result.reply
            out.append(json.loads(render_json(reply)))
        return out
    finally:
        await pool.close()


def test_changes_from_outside_reach_the_lake_and_the_answer(kafka_cluster, spark, tmp_path, request):
    drop_other_topics(kafka_cluster)  # the lost broker's answer below names every topic under min ISR
    unique = uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    orders, other = f"chg-orders-{unique}", f"chg-other-{unique}"
    retained, group = f"chg-retained-{unique}", f"chg-behind-{unique}"
    _done(admin.create_topics([NewTopic(orders, 3, 3, config={"min.insync.replicas": "1"})], request_timeout=30))
    kafka_cluster.faults.wait_for(lambda: orders in admin.list_topics(timeout=10).topics, 30, f"{orders} listed")
    # a group that read a little and stopped while a producer keeps writing: its lag grows
    lagging = kafka_cluster.faults.lagging_consumer_group(group, retained, initial=30, rate=20)
    request.addfinalizer(lagging.stop)
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    sampler = ChangeSampler(layout, CLUSTER, interval_s=60)
    config = ClusterConfig(name=CLUSTER, bootstrap=kafka_cluster.bootstrap_servers, expected_brokers=(101, 102, 103))

    async def sample() -> int:
        async with AdminGateway(config, timeout_s=15) as gw:
            result = await sampler.round(gw)
        assert result.error is None, result.error
        return result.events

    assert asyncio.run(sample()) == 0  # the baseline lands nothing
    assert ingest_changes(spark, layout) == 0

    # the user's own changes: min ISR raised to RF on orders, its retention lowered; another topic
    # made; a produce quota on a client (AlterClientQuotas, what kafka-configs sends); the retention
    # of the lagging group's topic lowered
    kafka_cluster.faults.set_topic_config(orders, {"min.insync.replicas": "3", "retention.ms": "60000"})
    _done(admin.create_topics([NewTopic(other, 1, 3)], request_timeout=30))
    client = f"chg-app-{unique}"
    set_client_quota(kafka_cluster, client, "producer_byte_rate", 1024)
    try:
        kafka_cluster.faults.set_topic_config(retained, {"retention.ms": "120000"})  # under the lagging group
        assert asyncio.run(sample()) >= 3
        assert ingest_changes(spark, layout) >= 3
        assert ingest_changes(spark, layout) == 0  # nothing landed since: nothing written twice

        lake = LakeService(layout.table, cluster=CLUSTER, spark=spark, query_timeout_s=120, warm=False).start()
        ctx = Context(kb=default_kb(), lake=lake)

        def ask(text: str) -> dict:
            result = asyncio.run(answer(text, ctx, user="U0TEST"))
            return json.loads(render_json(result.reply))

        everything = ask("changes --since 1h")
        rows = everything["tables"][0]["rows"]
        seen = {(r["resource"], r["change"]): (r["before"], r["after"]) for r in rows}
        assert seen[(f"topic {orders}", "min.insync.replicas 1 -> 3")] == ("1", "3"), rows
        assert seen[(f"topic {orders}", "retention.ms set to 60000")] == (None, "60000"), rows
        assert seen[(f"topic {other}", "created")] == (None, "1 partitions, RF 3"), rows
        assert seen[(f"client-id={client}", "quota producer_byte_rate set to 1024")] == (None, "1024"), rows
        assert seen[(f"topic {retained}", "retention.ms set to 120000")] == (None, "120000"), rows
        assert "change(s)" in everything["verdict"]

        narrowed = ask(f"changes topic {orders}")
        assert {r["resource"] for r in narrowed["tables"][0]["rows"]} == {f"topic {orders}"}, narrowed

        bad = ask("changes planets")
        assert bad["outcome"] == "bad_input" and "topic, broker, group" in bad["verdict"]

        quotas = ask("changes quotas")
        assert [r["resource"] for r in quotas["tables"][0]["rows"]] == [f"client-id={client}"], quotas

        # the table holds what the answer showed, and nothing else about the topics' values
        table = spark.read.format("delta").load(changes_table(layout))
        assert table.filter(table.cluster == CLUSTER).count() == len(rows)

        # an incident the change caused: retention lowered under a lagging group. `lag` names the
        # change and leads with lag beyond retention (its next offsets may be deleted unread)
        (behind,) = asyncio.run(_ask_live(kafka_cluster, lake, f"lag {group}"))
        assert behind["lag"]["total_lag"] > 0, behind["verdict"]
        assert f"Retention of topic {retained} was lowered" in behind["verdict"], behind["verdict"]
        assert behind["diagnoses"][0]["entry_id"] == "lag-beyond-retention", behind["diagnoses"]
        line = next(e["value"] for e in behind["evidence"] if e["label"] == "Changed recently")
        assert f"topic {retained} retention.ms set to 120000" in line, line

        # an incident the change caused: min ISR raised to the RF, then a broker lost. `why` names
        # the change in its verdict and in a "Changed recently" line (the live read says which
        # topic; the change table, when its min ISR rose)
        kafka_cluster.faults.kill_broker(102)
        kafka_cluster.faults.wait_for(
            lambda: all(102 not in p["isr"] for p in kafka_cluster.faults.describe([orders])[orders]),
            60,
            f"{orders}' ISRs to lose broker 102",
        )
        nenr, quota = asyncio.run(_ask_live(kafka_cluster, lake, "why NotEnoughReplicas", "why producer throttled"))
        assert f"min.insync.replicas of topic {orders} was raised" in nenr["verdict"], nenr["verdict"]
        line = next(e["value"] for e in nenr["evidence"] if e["label"] == "Changed recently")
        assert f"topic {orders} min.insync.replicas 1 -> 3" in line, line
        assert f"topic {other}" not in line, line  # made, but not what this answer is about
        # a quota set on a client is the first cause of a throttled producer, said as a change
        assert quota["diagnoses"][0]["entry_id"] == "client-quota-throttling", quota["diagnoses"]
        line = next(e["value"] for e in quota["evidence"] if e["label"] == "Changed recently")
        assert f"client-id={client} quota producer_byte_rate set to 1024" in line, line
    finally:
        set_client_quota(kafka_cluster, client, "producer_byte_rate", None)
