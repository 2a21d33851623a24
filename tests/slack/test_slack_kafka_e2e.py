"""End to end, as on call would live it: signed slash commands to the real Bolt app over HTTP, the
local Slack Web API stand-in, the real confirmation gate, and the real local Kafka cluster.

`/kafka why URP` about a killed broker gets an ack and a threaded answer naming it; an `abort-txn`
on a hung transaction needs Confirm and a second approver, executes once however often it is
clicked, is audited, and lets a read_committed consumer past the transaction."""

from __future__ import annotations

import dataclasses
import json
import uuid

import pytest
from slack_harness import POLICY, Harness

from kbot_settings import load as load_settings
from live.pool import GatewayPool
from localkafka.testing import produce_one, read_committed
from runbook_kb import default_kb

pytestmark = pytest.mark.kafka


async def _bot_on_cluster(stand, tmp_path, cluster, grants: list[str]) -> tuple[Harness, GatewayPool]:
    h = Harness(stand, tmp_path)
    h.router = None  # the real command registry
    policy = (
        {**POLICY, "grants": [{"name": "sre", "users": ["U0ALICE", "U0BOB"], "commands": grants}]} if grants else POLICY
    )
    await h.start_bot(policy=policy)
    pool = GatewayPool(
        load_settings(
            {
                "KBOT_BOOTSTRAP": cluster.bootstrap_servers,
                "KBOT_CLUSTER_NAME": "local",
                "KBOT_EXPECTED_BROKERS": ",".join(map(str, cluster.brokers)),
                "KBOT_ADMIN_TIMEOUT_S": "10",
            }
        )
    )
    h.bot.ctx = dataclasses.replace(h.bot.ctx, live=pool, kb=default_kb())
    return h, pool


def _thread_text(stand) -> str:
    return json.dumps([c.args for c in stand.called("chat.postMessage") + stand.called("chat.update")])


async def test_why_urp_over_signed_http_names_the_killed_broker(stand, tmp_path, kafka_cluster):
    topic = f"slack-urp-{uuid.uuid4().hex[:6]}"
    kafka_cluster.faults.create_topic(topic, partitions=3, replication_factor=3)
    kafka_cluster.faults.kill_broker(102)
    kafka_cluster.faults.wait_for(
        lambda: all(102 not in p["isr"] for p in kafka_cluster.faults.describe([topic])[topic]), 60, "ISR to shrink"
    )
    h, pool = await _bot_on_cluster(stand, tmp_path, kafka_cluster, [])
    try:
        status, _body, ack_s = await h.slash("why URP")
        assert status == 200 and ack_s < 3
        await h.bot.drain(60)
        text = _thread_text(stand)
        assert "Broker 102 is gone" in text
        assert "Partition.scala:232" in text
        threaded = [c.args for c in stand.called("chat.postMessage") if c.args.get("thread_ts")]
        assert threaded, "the answer goes in a thread under the working message"
    finally:
        await h.close()
        await pool.close()


async def test_abort_txn_needs_a_second_approver_runs_once_and_unblocks_the_consumer(stand, tmp_path, kafka_cluster):
    bs = kafka_cluster.bootstrap_servers
    topic = f"slack-txn-{uuid.uuid4().hex[:6]}"
    txn = kafka_cluster.faults.hanging_transaction(topic, 0, records=3)
    produce_one(bs, topic, 0, "after-the-hang")
    assert read_committed(bs, topic, 0, 4) == []  # stuck at the hung transaction's first offset

    h, pool = await _bot_on_cluster(stand, tmp_path, kafka_cluster, ["abort-txn"])
    try:
        message, buttons = await h.preview(f"abort-txn {topic} 0 --min-age-ms 0")
        preview_text = json.dumps(message["blocks"])
        assert "second approver" in preview_text and str(txn["first_offset"]) in preview_text

        await h.click(buttons["Confirm"], message, user="U0ALICE")  # the requester approving herself
        await h.bot.drain(30)
        assert "Self-approval is refused" in _thread_text(stand)
        assert read_committed(bs, topic, 0, 3) == []  # nothing ran

        for _ in range(3):  # a double (triple) click by the approver
            await h.click(buttons["Confirm"], message, user="U0BOB")
        await h.bot.drain(60)
        executions = h.audit("execution")
        assert len(executions) == 1, executions
        assert executions[0]["user"] == "U0BOB" and executions[0]["requester"] == "U0ALICE"
        assert executions[0]["cluster"] == "local" and executions[0]["ok"] is True

        assert read_committed(bs, topic, 0, 30, want="after-the-hang") == ["after-the-hang"]
    finally:
        await h.close()
        await pool.close()
