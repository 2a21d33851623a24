"""`hot-partitions` when the metric lake cannot answer (issue 26, 2): README.md promises "live end
offsets when the lake cannot answer", and on a fresh machine it said "no LogEndOffset samples" and
nothing else.  With no lake, a lake too young to hold samples, one whose samples end before the
window, one that is down and one whose query runs past its limit, it ranks the partitions on two
ListOffsets reads a few seconds apart, with each one's leader, and says that this is a live-only
ranking over those seconds and why the lake did not answer."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from pathlib import Path

import pytest
from askkit import kbot, no_traceback
from commandkit import cluster_env
from waiting import async_wait_until, wait_until

from bot.render import render_json, render_text
from commands.registry import answer
from framework.context import Context
from framework.errors import Unavailable
from kbot_settings import load as load_settings
from lake.service import LakeService
from tools.synthetic import first_commits_in_flight

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NOT_ENOUGH = "Not enough data yet (0 min collected)."


class StuckLake(LakeService):
    """The real service (its time limits, its cancelling) over questions stuck behind others: each
    waits 5 s before it starts, in Spark (``query``) and in the in-process window reader
    (``ask_window``) alike."""

    async def query(self, fn, *args, **kwargs):
        def stuck(view, *a, **k):
            time.sleep(5)  # the scenario: stuck well past the 1 s query limit, which must cancel it
            return fn(view, *a, **k)

        return await super().query(stuck, *args, **kwargs)

    async def ask_window(self, question, *args, **kwargs):
        def stuck(window, *a):
            time.sleep(5)  # the scenario: stuck well past the 1 s query limit, which must cancel it
            return question.answer(window, *a)

        return await super().ask_window(dataclasses.replace(question, answer=stuck), *args, **kwargs)


class DownLake:
    """A lake whose Spark did not start."""

    cluster = None

    async def query(self, fn, *args, **kwargs):
        raise Unavailable("The metric lake is unavailable: Spark did not start (Java is missing).")


def hot_known(producer) -> bool:
    return producer.stats()["hot_partition"] is not None and producer.stats()["sent"] > 300


async def test_hot_partitions_ranks_live_whenever_the_lake_cannot(kafka_cluster, spark, lake_service, tmp_path):
    from live.pool import GatewayPool

    topic = f"young-hot-{uuid.uuid4().hex[:6]}"
    producer = await asyncio.to_thread(kafka_cluster.faults.hot_key_producer, topic, "hot-key", None, 300, 0.9, 6)
    pool = GatewayPool(load_settings(cluster_env(kafka_cluster)))
    in_flight = LakeService(first_commits_in_flight(tmp_path / "lake"), spark=spark, warm=False).start()
    too_slow = StuckLake(lake_service.path, spark=spark, warm=False, query_timeout_s=1).start()
    lakes = {
        "no metric lake is configured": None,
        "not enough data yet, 0 min collected": in_flight,
        "no LogEndOffset samples in its last 15 min": lake_service,  # the synthetic lake of 2024
        "it is unavailable": DownLake(),
        "its query ran past its time limit": too_slow,
    }
    try:
        await async_wait_until(lambda: hot_known(producer), 60, "the hot key's partition to be known")
        hot = producer.stats()["hot_partition"]
        gw = await pool.get(None)
        leaders = {p.partition: p.leader for t in await gw.describe_topics([topic]) for p in t.partitions}
        results = {
            why: await answer(f"hot-partitions {topic}", Context(live=pool, lake=lake)) for why, lake in lakes.items()
        }
        # without a cluster, a young lake says how much it holds and that the cluster would be read
        alone = await answer("hot-partitions", Context(lake=in_flight))
    finally:
        producer.stop()
        await pool.close()
        in_flight.stop()
        too_slow.stop()
    for why, result in results.items():
        reply = result.reply
        assert result.outcome == "answered", (why, render_text(reply))
        assert reply.title == f"Hot partitions (topic {topic}), live"
        assert reply.verdict.startswith(f"{topic}-{hot} is hot:"), (why, reply.verdict)
        assert "Live-only ranking over 3." in reply.verdict
        assert reply.verdict.endswith(f"the metric lake could not answer ({why})."), reply.verdict
        [table] = reply.tables
        first = table.records()[0]
        assert first["partition"] == f"{topic}-{hot}" and first["leader"] == leaders[hot], table.records()
        assert first["rec/s"] > 20 and len(table.rows) == 6
        assert reply.notes[0].startswith("Live-only: each partition's end offset read twice (ListOffsets)")
        data = json.loads(render_json(reply))
        assert data["lake"]["answered"] is False and data["lake"]["reason"] == why
        no_traceback(render_text(reply))
    young = json.loads(render_json(results["not enough data yet, 0 min collected"].reply))["lake"]
    assert young["young"] is True and young["minutes_collected"] == 0
    assert alone.outcome == "answered" and alone.reply.verdict.startswith(NOT_ENOUGH), alone.reply.verdict


def test_hot_partitions_from_the_terminal_without_a_lake(kafka_cluster, tmp_path: Path):
    topic = f"young-hot-cli-{uuid.uuid4().hex[:6]}"
    producer = kafka_cluster.faults.hot_key_producer(topic, "hot-key", None, 300, 0.9, 6)
    env = {**cluster_env(kafka_cluster), "KBOT_LAKE": "0", "KBOT_HOME": str(tmp_path / "kbot")}
    try:
        wait_until(lambda: hot_known(producer), 60, "the hot key's partition to be known", interval=0.3)
        hot = producer.stats()["hot_partition"]
        proc = kbot("ask", "--json", "hot-partitions", topic, env=env, timeout=120)
    finally:
        producer.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["tables"][0]["rows"][0]["partition"] == f"{topic}-{hot}", data["tables"]
    assert "Live-only ranking over" in data["verdict"] and "no metric lake is configured" in data["verdict"]
    no_traceback(proc.stdout, proc.stderr)
