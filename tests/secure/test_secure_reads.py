"""Every read command against the secured cluster, as the observer principal (Describe /
DescribeConfigs rights, READ on topics for DescribeProducers), with real data behind the answers:
a consumer group with committed offsets and lag, and an open transaction left by a killed
producer. A read never opens a connection with the operator's credentials."""

from __future__ import annotations

import json
import uuid

import pytest

from commands.registry import answer
from localkafka.secure import OBSERVER

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def data(secure, topic):
    """Records and a group that committed part of them (lag), made by the super user, from
    outside the bot."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({**secure.client_conf(), "acks": "all"})
    for i in range(30):
        p.produce(topic, value=f"v{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    group = f"billing-{uuid.uuid4().hex[:6]}"
    c = Consumer({**secure.client_conf(), "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, n, 2) for n in range(3)], asynchronous=False)
    c.close()
    return {"group": group}


async def ask(ctx, text: str):
    result = await answer(f"{text} --json", ctx, user="U0OBSERVER")
    return result, json.loads(_json(result))


def _json(result) -> str:
    from bot.render import render_json

    return render_json(result.reply)


@pytest.mark.parametrize("text", ["status", "at-min-isr", "audit", "why URP", "digest"])
async def test_cluster_wide_reads_answer_as_the_observer(ctx, data, text):
    result, doc = await ask(ctx, text)
    assert result.outcome == "answered", doc
    assert "authoriz" not in json.dumps(doc).lower(), doc
    assert ctx.live.connected() == [("secure", "observer")]
    gw = await ctx.live.get("secure")
    assert gw.config.sasl_username == OBSERVER and gw.config.role == "observer"


async def test_describe_shows_the_topic_layout(ctx, topic, data):
    result, doc = await ask(ctx, f"describe {topic}")
    assert result.outcome == "answered", doc
    text = json.dumps(doc)
    assert topic in text and "min.insync.replicas" in text
    assert ctx.live.connected() == [("secure", "observer")]


async def test_lag_reads_committed_offsets_of_the_group(ctx, topic, data):
    result, doc = await ask(ctx, f"lag {data['group']}")
    assert result.outcome == "answered", doc
    text = json.dumps(doc)
    assert data["group"] in text
    # 30 records over 3 partitions, 2 committed on each: 24 behind in total
    assert "24" in text, text
    every, edoc = await ask(ctx, "lag")
    assert every.outcome == "answered" and data["group"] in json.dumps(edoc)
    assert ctx.live.connected() == [("secure", "observer")]


async def test_hanging_txns_finds_the_open_transaction(ctx, secure):
    # made here, not in a module fixture: the autoheal after each test aborts hanging transactions
    txn_topic = f"payments-{uuid.uuid4().hex[:6]}"
    txn = secure.faults.hanging_transaction(txn_topic, 0, records=4)
    result, doc = await ask(ctx, "hanging-txns --full")
    assert result.outcome == "answered", doc
    text = json.dumps(doc)
    assert txn["transactional_id"] in text and f"{txn_topic}-0" in text, text
    assert ctx.live.connected() == [("secure", "observer")]
