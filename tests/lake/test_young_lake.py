"""The metric lake in an incident's first minutes (issue 26, 1), as a user on a fresh machine meets it.

`scripts/run.sh` starts the collector and the lake's Spark; for a minute or so no ingest has
committed the raw table, then no rollup has committed the minute table.  Delta creates a table's
``_delta_log`` when its first write begins and commits version 0 only once the data files are
written: a reader that took the folder for a table got ``DELTA_TABLE_NOT_FOUND`` (`kbot ask
"history URP"` printed a Python and JVM traceback and "[ERROR] Internal error"; `--png` exited 1).
An empty or young lake answers "Not enough data yet (N min collected)" (N: the minutes of samples
it holds) in the terminal's text, --json, --png and Slack, never a traceback.

The same through the lake's Spark Connect server: tests/lake_connect/test_connect_young_lake.py;
`hot-partitions` on such a lake: test_hot_partitions_live.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import os

import pytest
import pytest_asyncio
from askkit import kbot, no_traceback, private_cache
from lakekit import UTC
from slack_harness import OPS, Harness
from slack_stand_in import running_stand
from waiting import async_wait_until

from bot.render import render_json, render_text
from bot.render_slack import render_blocks
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lake.service import LakeService
from tools.synthetic import first_commits_in_flight

pytestmark = pytest.mark.spark

NOT_ENOUGH = "Not enough data yet (0 min collected)."


@pytest_asyncio.fixture(loop_scope="function")
async def stand():
    async with running_stand() as s:
        yield s


async def test_history_on_a_lake_whose_first_commits_are_being_written(lake_in_flight):
    _table, svc = lake_in_flight
    for question in ("history URP", "history URP --since 2d", "history IsrShrinksPerSec --since 30m"):
        result = await answer(question, Context(lake=svc))
        reply = result.reply
        assert result.outcome == "answered", render_text(reply)
        assert reply.verdict.startswith(NOT_ENOUGH) and "holds no samples yet" in reply.verdict, reply.verdict
        assert not reply.series and not reply.sections
        data = json.loads(render_json(reply))
        assert data["outcome"] == "answered"
        assert data["lake"] == {"young": True, "minutes_collected": 0, "first_sample": None}
        slack = json.dumps(render_blocks(reply))
        assert NOT_ENOUGH in slack and "kbot lake collect" not in slack  # Slack gets Slack's advice
        no_traceback(render_text(reply), slack)


async def test_slack_gets_not_enough_data_in_the_thread(stand, tmp_path, lake_in_flight):
    _table, svc = lake_in_flight
    h = Harness(stand, tmp_path)
    bot = await h.start_bot()
    bot.ctx = dataclasses.replace(bot.ctx, lake=svc)
    try:
        status, _body, _s = await h.slash("history URP", channel=OPS)
        assert status == 200
        await bot.drain(180)
    finally:
        await h.close()
    posted = json.dumps([c.args for c in stand.called("chat.postMessage") + stand.called("chat.update")])
    assert NOT_ENOUGH in posted, posted[-3000:]
    assert "collector's first samples reach it" in posted and "kbot lake collect" not in posted  # Slack's advice
    no_traceback(posted)
    assert not stand.uploads(), "no chart for an answer without a trend"


def test_the_terminal_answers_a_young_lake_in_text_json_and_png(tmp_path):
    """The user's own commands on the in-process Spark (KBOT_LAKE=1, as `scripts/run.sh` sets it),
    while the first commits are being written: the text, then `ask --json --png`."""
    home = tmp_path / "kbot"
    first_commits_in_flight(home / "lake")
    env = {
        "KBOT_HOME": str(home),
        "KBOT_LAKE": "1",
        "HOME": str(tmp_path / "home"),
        "KBOT_CACHE_DIR": private_cache(tmp_path),
        # a cold in-process Spark on a busy 2-core machine takes most of the default 30 s
        "KBOT_LAKE_TIMEOUT_S": "240",
    }
    text = kbot("ask", "history URP", env=env)
    assert text.returncode == 0, text.stderr[-3000:]
    lines = text.stdout.splitlines()
    assert lines[0] == "History of UnderReplicatedPartitions" and lines[1].startswith(NOT_ENOUGH), text.stdout
    assert "kbot lake collect --ingest-follow" in text.stdout  # the terminal's advice
    no_traceback(text.stdout, text.stderr)

    png = tmp_path / "urp.png"
    asked = kbot("ask", "--json", "--png", str(png), "history", "URP", env=env)
    assert asked.returncode == 0, asked.stderr[-3000:]
    data = json.loads(asked.stdout)
    assert data["outcome"] == "answered" and data["verdict"].startswith(NOT_ENOUGH), data
    assert data["lake"]["minutes_collected"] == 0
    assert f"no time series to chart; {png} not written" in asked.stderr and not png.exists()
    no_traceback(asked.stdout, asked.stderr)


@pytest.mark.kafka
async def test_a_lake_with_its_first_minutes_of_real_samples(kafka_cluster, spark, tmp_path):
    """The collector scrapes the real cluster's exporters for a few rounds and the ingest commits
    them (the minute rollup too): `history URP` over an hour says how many minutes the lake holds,
    and shows them with their chart."""
    from lake.collector import Collector, targets_from_urls
    from lake.ingest import Ingestor, LakeLayout

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    collector = Collector(targets_from_urls(kafka_cluster.metrics_urls), layout.landing, "pytest", interval_s=2.0)
    rounds: list = []
    stop = asyncio.Event()
    collecting = asyncio.create_task(collector.run(stop=stop, on_round=rounds.append))
    try:
        await async_wait_until(lambda: sum(bool(r.file) for r in rounds) >= 3, 120, "three rounds with samples")
    finally:
        stop.set()
        await collecting
    minutes = {
        dt.datetime.fromtimestamp(json.loads(line)["ts"] / 1e6, UTC).replace(second=0, microsecond=0)
        for r in rounds
        if r.file
        for line in r.file.read_text().splitlines()
        if line.strip()
    }
    await asyncio.to_thread(Ingestor(spark, layout).run)
    assert os.path.isdir(layout.rollup("1m")), "the ingest rolled the minutes up"
    lake = LakeService(layout.table, cluster="pytest", spark=spark, warm=False, query_timeout_s=120).start()
    try:
        result = await answer("history URP", Context(lake=lake))
    finally:
        lake.stop()
    reply = result.reply
    assert result.outcome == "answered", render_text(reply)
    n = len(minutes)
    assert reply.verdict.startswith(f"Not enough data yet ({n} min collected) for the last 1 h; so far: "), (
        reply.verdict
    )
    assert "UnderReplicatedPartitions" in reply.verdict and reply.series and reply.sections
    assert json.loads(render_json(reply))["lake"]["minutes_collected"] == n
    assert reply.notes[0].startswith(f"The metric lake's samples of cluster pytest begin at {min(minutes):%H:%M}")
    no_traceback(render_text(reply))
