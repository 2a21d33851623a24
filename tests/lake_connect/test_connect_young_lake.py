"""The lake in its first minutes through its Spark Connect server (issue 26): `scripts/run.sh` has
started the server and the collector, and a user asks `kbot ask "history URP"` in another terminal
before the first ingest has committed, and while the first commits are being written.  Every
answer is "Not enough data yet (0 min collected)", in text, --json and --png, never a traceback.

A lake on a store only the server reaches (s3a://, abfss://) cannot be looked at from the bot's
process: the server is asked whether a table exists.  It used to be assumed, so a lake without its
minute rollup yet failed `history` with DELTA_TABLE_NOT_FOUND.  Here a local folder stands in for
such a store (the bot's process is told it is one).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os

import pytest
from askkit import kbot, no_traceback, private_cache
from connectkit import free_port

from bot.render import render_text
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings
from lake import connect
from lake.service import LakeService, LakeView
from tools.synthetic import first_commits_in_flight

pytestmark = pytest.mark.spark

NOT_ENOUGH = "Not enough data yet (0 min collected)."


@pytest.fixture(scope="module")
def fresh_home(tmp_path_factory):
    """A state root whose lake holds nothing but its running Connect server (no KBOT_LAKE, no
    KBOT_LAKE_DIR: the defaults `scripts/run.sh` uses); stopped in the teardown."""
    home = tmp_path_factory.mktemp("fresh-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_")) or k == "KBOT_CACHE_DIR"}
    env.update(KBOT_HOME=str(home), HOME=str(home), NO_COLOR="1")
    lake_dir = home / "lake"
    try:
        info = connect.start_server(load_settings(env), free_port(), lake_dir=lake_dir, timeout=300)
        yield info, env, lake_dir
    finally:
        connect.stop_server(load_settings(env), lake_dir)


def test_one_shot_asks_before_and_during_the_first_commits(fresh_home, tmp_path):
    info, env, lake_dir = fresh_home
    env = {**env, "KBOT_CACHE_DIR": private_cache(tmp_path)}
    assert connect.running_url(load_settings(env)) == info.url and not (lake_dir / "samples").exists()
    for state in ("nothing ingested", "first commits being written"):
        if state == "first commits being written":
            first_commits_in_flight(lake_dir)
        png = tmp_path / f"{state.replace(' ', '-')}.png"
        asked = kbot("ask", "--json", "--png", str(png), "history", "URP", env=env)
        assert asked.returncode == 0, (state, asked.stdout[-2000:], asked.stderr[-3000:])
        data = json.loads(asked.stdout)
        assert data["verdict"].startswith(NOT_ENOUGH), (state, data["verdict"])
        assert data["lake"] == {"young": True, "minutes_collected": 0, "first_sample": None}
        assert "not written" in asked.stderr and not png.exists()
        text = kbot("ask", "history URP", env=env)
        assert text.returncode == 0 and text.stdout.splitlines()[1].startswith(NOT_ENOUGH), text.stdout
        hot = kbot("ask", "hot-partitions", env=env)  # no cluster here: the lake's own answer
        assert hot.returncode == 0 and hot.stdout.splitlines()[1].startswith(NOT_ENOUGH), hot.stdout
        no_traceback(asked.stdout, asked.stderr, text.stdout, text.stderr, hot.stdout, hot.stderr)


@pytest.fixture
def as_remote_store(monkeypatch):
    """The bot's process takes the lake's paths for a store only the server reaches."""
    from lake import delta
    from lake import service as lake_service

    monkeypatch.setattr(lake_service, "_is_uri", lambda path: True)
    monkeypatch.setattr(delta, "_is_uri", lambda path: True)


def test_a_remote_lake_without_its_minute_rollup_answers_from_the_raw_samples(fresh_home, tmp_path, as_remote_store):
    """The server says which tables exist: the raw table (written through the server) does, its
    minute rollup does not yet, so `history URP` reads the raw samples instead of failing; a lake
    with no table at all is not enough data yet."""
    from pyspark.sql import SparkSession

    from tools import synthetic as S

    info, _env, _lake_dir = fresh_home
    table = str(tmp_path / "remote" / "samples")
    spark = SparkSession.builder.remote(info.url).create()
    try:
        hour = dt.datetime.now(dt.timezone.utc).replace(minute=0, second=0, microsecond=0)
        S.generate(
            table,
            cluster="cx",
            start=hour - dt.timedelta(hours=1),
            hours=2,
            brokers=3,
            topics=1,
            partitions_per_topic=2,
            resolution_s=60,
            metrics=["UnderReplicatedPartitions"],
            spark=spark,
            rollups=False,
        )
        view = LakeView(spark, table)
        assert view.is_delta() and not view.is_delta("1m") and not view.is_delta("1h")
        assert view.resolution_for(60) == "raw"
        svc = LakeService(table, spark=spark, warm=False, query_timeout_s=240).start()
        never = LakeService(str(tmp_path / "never" / "samples"), spark=spark, warm=False, query_timeout_s=240).start()

        async def ask():
            return (
                await answer("history URP --since 30m", Context(lake=svc)),
                await answer("history URP", Context(lake=never)),
            )

        history, young = asyncio.run(ask())
    finally:
        spark.stop()
    assert history.outcome == "answered", render_text(history.reply)
    assert history.reply.verdict.startswith("UnderReplicatedPartitions: newest"), history.reply.verdict
    assert "Resolution: raw samples." in history.reply.notes
    assert young.outcome == "answered" and young.reply.verdict.startswith(NOT_ENOUGH), young.reply.verdict
    no_traceback(render_text(history.reply), render_text(young.reply))
