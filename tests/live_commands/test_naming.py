"""What matters is named (issue 35, seen item 5), on the real cluster with faults from outside: the
topics and dead brokers behind NotEnoughReplicas, a missing broker when nothing is offline, a topic
the question names that does not exist, one transaction over three partitions counted once, the
initialisations an epoch allows, and an abort offered that runs as offered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import pytest
from commandkit import unique_name as _name
from waiting import wait_until

from bot.render import render_json
from commands import abort_txn
from commands.registry import ROUTER, answer
from localkafka.testing import drop_other_topics

pytestmark = pytest.mark.kafka


def _registered(cluster) -> set[int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return {n.id for n in admin.describe_cluster(request_timeout=10).result(15).nodes}


def _gone(cluster, *brokers: int) -> None:
    for b in brokers:
        cluster.faults.kill_broker(b)
    wait_until(
        lambda: not set(brokers) & _registered(cluster),
        90,
        f"broker(s) {brokers} to leave the cluster",
        interval=0.5,
        ignore=(Exception,),
    )


async def test_not_enough_replicas_names_the_topic_and_the_dead_brokers(ctx, kafka_cluster):
    await asyncio.to_thread(drop_other_topics, kafka_cluster)  # the answer reads the whole cluster
    from confluent_kafka import Producer

    topic = _name("urp3")
    kafka_cluster.faults.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    _gone(kafka_cluster, 102, 103)
    # the user's acks=all producer fails
    errors: list[str] = []
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all", "message.timeout.ms": 8000})
    for i in range(3):
        p.produce(topic, value=b"x", partition=i, on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    p.flush(20)
    assert errors, "the acks=all producer should have failed"
    reply = (await answer("why NotEnoughReplicas", ctx)).reply
    assert topic in reply.verdict, reply.verdict
    assert "Broker(s) 102, 103 are down" in reply.verdict, reply.verdict
    data = json.loads(render_json(reply))
    assert topic in data["verdict"] and any(topic in e["value"] for e in data["evidence"])


async def test_why_offline_with_a_broker_gone_is_no_ok(ctx, kafka_cluster):
    await asyncio.to_thread(drop_other_topics, kafka_cluster)  # the answer reads the whole cluster
    _gone(kafka_cluster, 103)
    reply = (await answer("why offline", ctx)).reply
    assert reply.severity != "ok", reply.verdict
    assert "broker 103 is missing" in reply.verdict, reply.verdict


async def test_a_topic_the_question_names_that_does_not_exist_is_said_first(ctx, kafka_cluster):
    missing = _name("orders")
    reply = (await answer(f"why consumers on {missing} stuck", ctx)).reply
    assert reply.verdict.startswith(f"Topic `{missing}` does not exist"), reply.verdict
    real = _name("orders-real")
    kafka_cluster.faults.create_topic(real, 1, 3)
    reply = (await answer(f"why consumers on {real} stuck", ctx)).reply
    assert "does not exist" not in reply.verdict, reply.verdict


# Two instances of one transactional id: the first opens a transaction over three partitions and
# is killed mid-transaction; the second initialises the same id. argv: bootstrap, topic, tid, role.
_TXN = r"""
import sys
from confluent_kafka import Producer
bootstrap, topic, tid, role = sys.argv[1:5]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 600000,
              "log_level": 2})
p.init_transactions(120)  # the coordinator first aborts what an earlier instance left open
if role == "open":
    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=b"open", partition=part)
    p.flush(30)
print("READY", flush=True)
sys.stdin.readline()
"""


def _txn_child(cluster, topic: str, tid: str, role: str) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", _TXN, cluster.bootstrap_servers, topic, tid, role],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    line = child.stdout.readline()
    if not line.startswith("READY"):
        child.kill()
        raise AssertionError(f"transactional child ({role}) failed: {child.stderr.read()[-2000:]}")
    return child


async def test_one_transaction_over_three_partitions_counts_once_and_its_abort_runs_as_offered(ctx, kafka_cluster):
    topic, tid = _name("txn3"), _name("txn3-id")
    kafka_cluster.faults.create_topic(topic, 3, 3)
    child = _txn_child(kafka_cluster, topic, tid, "open")
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    kafka_cluster.faults.track_transaction(tid)
    reply = (await answer("hanging-txns", ctx)).reply
    assert reply.verdict.startswith("1 open transaction(s)"), reply.verdict
    assert "3 partitions" in reply.verdict, reply.verdict
    offered = next(a for a in reply.actions if a.mutating and a.command.startswith(f"abort-txn {topic} "))
    assert "--min-age-ms " in offered.command, offered.command
    # runnable now: the plan does not refuse it for being younger than the 900 s default
    plan = await abort_txn.ACTION.plan(ROUTER.parse(offered.command), ctx)
    assert plan.ready, [(p.name, p.detail) for p in plan.preconditions if not p.ok]


async def test_two_initialisations_are_not_reported_as_three(ctx, kafka_cluster):
    topic, tid = _name("fence"), _name("fence-id")
    kafka_cluster.faults.create_topic(topic, 3, 3)
    first = _txn_child(kafka_cluster, topic, tid, "open")  # init_transactions 1, then a transaction left open
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    second = _txn_child(kafka_cluster, topic, tid, "init")  # init_transactions 2: takes the id over
    try:
        reply = (await answer("why PRODUCER_FENCED", ctx)).reply
        row = next(e for e in reply.evidence if e.label == f"Transactional id {tid}")
        assert "initialised at least 2 times" in row.value, row.value
        assert "initialised 3 times" not in row.value
    finally:
        second.kill()
        second.wait(10)
