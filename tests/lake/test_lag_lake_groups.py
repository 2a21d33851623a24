"""Lag trends on the default setup (issue 26, 3): the collector samples a group's commits only when
KBOT_LAKE_GROUPS names it, and it is unset by default, so `lag <group>` never had a trend and
nothing said why.  When the lake holds no commits of the group and the setting does not name it,
the answer says how to turn it on (in Slack: who can); when it names the group, it does not."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from askkit import kbot, no_traceback
from commandkit import cluster_env

from bot.render import render_json, render_text
from bot.render_slack import render_blocks
from commands.registry import answer
from framework.context import Context
from kbot_settings import load as load_settings

pytestmark = [pytest.mark.kafka]


def names(prefix: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"{prefix}-{tag}", f"{prefix}-t-{tag}"


@pytest.mark.spark
async def test_lag_says_how_to_get_a_trend_when_the_lake_collects_no_commits_of_the_group(
    kafka_cluster, lake_in_flight
):
    from live.pool import GatewayPool
    from localkafka.groups import stopped_group

    _table, lake = lake_in_flight
    group, topic = names("lake-groups")
    fault = await asyncio.to_thread(stopped_group, kafka_cluster, group, topic, 20, 5)
    pool = GatewayPool(load_settings(cluster_env(kafka_cluster)))
    try:
        # the groups come from the process's settings (Context.settings), loaded at its edge
        unset_settings = load_settings({})
        unset = await answer(f"lag {group}", Context(live=pool, lake=lake, settings=unset_settings))
        no_lake = await answer(f"lag {group}", Context(live=pool, settings=unset_settings))
        named_settings = load_settings({"KBOT_LAKE_GROUPS": f"orders-app,{group}"})
        named = await answer(f"lag {group}", Context(live=pool, lake=lake, settings=named_settings))
        other_settings = load_settings({"KBOT_LAKE_GROUPS": "orders-app"})
        other = await answer(f"lag {group}", Context(live=pool, lake=lake, settings=other_settings))
    finally:
        fault.stop()
        await pool.close()
    for result in (unset, no_lake, named, other):
        assert result.outcome == "answered", render_text(result.reply)
    text = render_text(unset.reply)
    assert f"The metric lake holds no commits of group {group}" in text and "(unset here)" in text, text
    assert f"Set KBOT_LAKE_GROUPS={group} for `kbot run`" in text
    slack = json.dumps(render_blocks(unset.reply))
    assert f"Whoever runs the bot can add {group} to KBOT_LAKE_GROUPS" in slack and "kbot run" not in slack
    assert json.loads(render_json(unset.reply))["lag"]["lake_collects_group"] is False
    assert "The trend over minutes needs the metric lake" in render_text(no_lake.reply)
    assert "KBOT_LAKE_GROUPS" not in render_text(named.reply)  # named: its commits come with the next rounds
    assert json.loads(render_json(named.reply))["lag"]["lake_collects_group"] is True
    assert f"KBOT_LAKE_GROUPS=orders-app,{group}" in render_text(other.reply)
    assert "(it names orders-app)" in render_text(other.reply)


def test_lag_from_the_terminal_on_the_default_setup(kafka_cluster, tmp_path: Path):
    group, topic = names("lake-groups-cli")
    fault = kafka_cluster.faults.lagging_consumer_group(group, topic, initial=20, rate=5)
    env = {**cluster_env(kafka_cluster), "KBOT_LAKE": "0", "KBOT_HOME": str(tmp_path / "kbot")}
    try:
        proc = kbot("ask", f"lag {group}", env=env, timeout=120)
    finally:
        fault.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"KBOT_LAKE_GROUPS={group}" in proc.stdout and "(unset here)" in proc.stdout, proc.stdout
    no_traceback(proc.stdout, proc.stderr)
