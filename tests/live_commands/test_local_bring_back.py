"""On the local cluster `kbot run` starts, a lost broker's answer gives the command that brings it
back (issue 36); on any other cluster the runbook's step stays as it is."""

from __future__ import annotations

import pytest
from commandkit import unique_name as _name
from waiting import wait_until

from bot.app import local_settings
from commands.registry import answer
from framework.context import Context
from kbot_settings import load
from live.pool import GatewayPool

pytestmark = pytest.mark.kafka


async def test_a_killed_local_broker_gets_the_command_that_starts_it(kafka_cluster, tmp_path):
    topic = _name("bring-back")
    kafka_cluster.faults.create_topic(topic, partitions=3, replication_factor=3)
    kafka_cluster.faults.kill_broker(102)
    wait_until(
        lambda: all(102 not in p["isr"] for p in kafka_cluster.faults.describe([topic])[topic]),
        60,
        "the ISRs to drop broker 102",
        interval=0.3,
        ignore=(Exception,),
    )
    base = load({"KBOT_HOME": str(tmp_path), "KBOT_STATE_DIR": str(tmp_path)})
    local = local_settings(base, kafka_cluster)  # what `kbot run` and `kbot ask` beside it use
    elsewhere = local.updated(kbot_cluster_name="prod")  # the same brokers under a configured name
    for settings, command in ((local, "kbot cluster start 102"), (elsewhere, None)):
        pool = GatewayPool(settings)
        try:
            reply = (await answer("why URP", Context(live=pool, settings=settings))).reply
        finally:
            await pool.close()
        loss = next(d for d in reply.diagnoses if d.entry_id == "broker-loss")
        back = next(s for s in loss.mitigation if s.text.startswith("Bring the missing broker back"))
        assert back.command == command, (settings.kbot_cluster_name, back)
