"""The lake and the live read agree on a stopped group's lag (issue 8, defect 4: the lake said 158
while the live read said 2,438 in the same answer).

Why they differed: the collector writes a group's rows only when a committed offset changes, so the
lake's ``ConsumerLag`` of a stopped group stays at the lag of its last commit while producers keep
writing. The lake now takes Burrow's current lag - the brokers' latest ``LogEndOffset`` sample minus
the last committed offset - which is what the live read computes.

On the real cluster: a group commits and leaves while a producer writes; the collector scrapes
the JMX exporters and samples the group; the producer stops, so the log end stops moving and the
two answers must then be equal, not merely close."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from waiting import async_wait_until

from bot.render import render_json
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lake.collector import Collector, targets_from_urls
from lake.ingest import Ingestor, LakeLayout
from lake.service import LakeService
from live.pool import GatewayPool
from localkafka.groups import stopped_group

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


async def test_stopped_group_lake_lag_equals_live_lag(kafka_cluster, spark, tmp_path):
    group, topic = f"lake-stop-{uuid.uuid4().hex[:6]}", f"lake-stop-t-{uuid.uuid4().hex[:6]}"
    env = {
        "KBOT_BOOTSTRAP": kafka_cluster.bootstrap_servers,
        "KBOT_CLUSTER_NAME": "pytest",
        "KBOT_EXPECTED_BROKERS": ",".join(map(str, kafka_cluster.brokers)),
        "KBOT_ADMIN_TIMEOUT_S": "10",
    }
    pool = GatewayPool(load_settings(env))
    lagging = await asyncio.to_thread(stopped_group, kafka_cluster, group, topic, 30, 40)
    try:
        gw = await pool.get(None)
        layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
        collector = Collector(
            targets_from_urls(kafka_cluster.metrics_urls),
            layout.landing,
            "pytest",
            interval_s=2.0,  # the product's scrape timeout: a busy machine's exporter is slow, not gone
            groups=[group],
            lag_source=gw,
        )
        rounds: list = []
        stop = asyncio.Event()
        collecting = asyncio.create_task(collector.run(stop=stop, on_round=rounds.append))
        try:
            # the producer keeps writing while the collector runs a few rounds
            await async_wait_until(lambda: len(rounds) >= 4, 90, "four collector rounds")
            await asyncio.to_thread(lagging.stop)
            stopped_at = len(rounds)

            def whole_rounds_after_stop() -> int:  # every broker answered: its LogEndOffset is final
                return sum(all(s.ok for s in r.scrapes) for r in rounds[stopped_at + 1 :])

            # two rounds begun after the producer stopped in which every exporter answered; a round
            # with a scrape that timed out would leave the lake's newest LogEndOffset from before
            await async_wait_until(
                lambda: whole_rounds_after_stop() >= 2, 180, "two whole rounds after the producer stopped"
            )
        finally:
            stop.set()
            await collecting
        group_rows = [r for r in rounds if r.group_rows]
        assert group_rows and not any(r.group_errors for r in rounds)
        # the collector saw the one commit once: the lag it wrote then is the lake's frozen figure
        frozen = sum(
            row["value"]
            for r in rounds
            if r.file
            for row in map(json.loads, r.file.read_text().splitlines())
            if row["metric"] == "ConsumerLag" and row["labels"].get("group") == group
        )

        await asyncio.to_thread(Ingestor(spark, layout).run)
        lake = LakeService(layout.table, cluster="pytest", spark=spark, query_timeout_s=120, warm=False).start()
        result = await answer(f"lag {group} --since 10m", Context(live=pool, lake=lake))
    finally:
        lagging.stop()
        await pool.close()
    assert result.outcome == "answered", result.reply.verdict
    data = json.loads(render_json(result.reply))["lag"]
    live_total, lake_total = data["total_lag"], data["lake"]["total_lag"]
    assert live_total > frozen  # the producer wrote after the commit: the frozen lag is stale
    assert lake_total == live_total, (lake_total, live_total, frozen)
    assert (data["status"], data["lake"]["status"], data["lake"]["worst_status"]) == ("STOP", "ERR", "STOP")
    verdict = next(e for e in result.reply.evidence if e.source == "lake: group_lag_status")
    assert verdict.value.endswith(f"lag now {live_total:,}")
    assert data["last_commit"] is not None  # "since when": the lake saw the commit
