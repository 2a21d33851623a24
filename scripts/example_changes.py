"""The README's `changes` example, made for real: a throwaway test cluster (port base 22190, in
/tmp/kbot-example-cluster), the collector's change rounds around changes made from outside
(min.insync.replicas of `orders` raised to its RF, a produce quota on a client, broker 102 killed),
Spark's ingest into a lake in a temporary folder, and the answers printed as the console shows
them. Run: .venv/bin/python scripts/example_changes.py"""

import asyncio
import tempfile
import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from bot.render import render_text
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lab.chaos_faults import set_client_quota
from lake.change_sampler import ChangeSampler
from lake.changes import ingest_changes
from lake.layout import LakeLayout
from lake.service import LakeService
from lake.spark import build_session
from live import AdminGateway, ClusterConfig
from live.pool import GatewayPool
from localkafka.testing import TestCluster
from runbook_kb import default_kb

CLUSTER = "prod-eu"
c = TestCluster(name="example", base_dir="/tmp/kbot-example-cluster", port_base=22190)


def cluster_env(cluster) -> dict:
    return {
        "KBOT_BOOTSTRAP": cluster.bootstrap_servers,
        "KBOT_EXPECTED_BROKERS": ",".join(map(str, cluster.brokers)),
        "KBOT_METRICS_TARGETS": ",".join(f"{n}={u}" for n, u in sorted(cluster.metrics_urls.items())),
    }


c.destroy()
c.up(timeout=300)
try:
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    for f in admin.create_topics(
        [NewTopic("orders", 3, 3, config={"min.insync.replicas": "2"}), NewTopic("payments", 3, 3)]
    ).values():
        f.result(30)
    c.faults.wait_for(lambda: "orders" in admin.list_topics(timeout=10).topics, 30, "orders")
    tmp = tempfile.mkdtemp()
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=tmp + "/lake")
    sampler = ChangeSampler(layout, CLUSTER, interval_s=60)
    config = ClusterConfig(name=CLUSTER, bootstrap=c.bootstrap_servers, expected_brokers=(101, 102, 103))

    async def sample():
        async with AdminGateway(config, timeout_s=15) as gw:
            r = await sampler.round(gw)
        assert r.error is None, r.error
        return r.events

    print("baseline", asyncio.run(sample()))
    entries = [ConfigEntry("min.insync.replicas", "3", incremental_operation=AlterConfigOpType.SET)]
    for f in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=entries)]
    ).values():
        f.result(30)
    set_client_quota(c, "billing-app", "producer_byte_rate", 1048576)
    time.sleep(2)
    print("round", asyncio.run(sample()))
    c.faults.kill_broker(102)
    c.faults.wait_for(lambda: all(102 not in p["isr"] for p in c.faults.describe(["orders"])["orders"]), 60, "isr")
    print("round", asyncio.run(sample()))
    spark = build_session("local[2]", app_name="example", conf={"spark.sql.shuffle.partitions": "2"})
    print("ingested", ingest_changes(spark, layout))
    lake = LakeService(layout.table, cluster=CLUSTER, spark=spark, query_timeout_s=120, warm=False).start()

    async def ask(*qs):
        pool = GatewayPool(load_settings({**cluster_env(c), "KBOT_CLUSTER_NAME": CLUSTER}))
        try:
            ctx = Context(kb=default_kb(), lake=lake, live=pool)
            for q in qs:
                res = await answer(q, ctx)
                reply = await res.reply.later if res.reply.later is not None else res.reply
                print(f"\n===== kafka> {q}\n" + render_text(reply))
        finally:
            await pool.close()

    asyncio.run(ask("changes --since 1h", "why NotEnoughReplicas"))
    lake.stop()
    spark.stop()
finally:
    c.destroy()
