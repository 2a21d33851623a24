"""The audit log's Kafka mirror (KBOT_AUDIT_TOPIC) against the secured cluster, written as the
observer principal (WRITE on the audit topic only): the records arrive, equal to the file's lines,
and a whole-cluster outage - every broker SIGKILLed from outside, records written meanwhile -
loses none of them: they are delivered after the restart, in the file's order. (The mirror keeps
retrying through the failed logins of a cluster coming back; the secured cluster rewrites the bot's
SCRAM users after a restart, localkafka/secure.py SecureCluster._provision says why.)"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from waiting import wait_until

from gate.audit import open_audit
from kbot_settings import load as load_settings

pytestmark = pytest.mark.kafka
TOPIC = "kbot-audit"  # the observer's WRITE grant names this topic (localkafka/secure.py GRANTS)


@pytest.fixture
def audit_topic(secure):
    from confluent_kafka.admin import NewTopic

    fut = secure.admin().create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC]
    try:
        fut.result(30)
    except Exception as exc:  # made by an earlier run that kept the cluster
        assert "TOPIC_ALREADY_EXISTS" in str(exc), exc
    return TOPIC


def _end_offset(secure, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**secure.client_conf(), "group.id": f"probe-{uuid.uuid4().hex[:6]}"})
    try:
        # a list, so that an end offset of 0 counts as an answer
        return wait_until(
            lambda: [c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]],
            60,
            f"the end offset of {topic}",
            interval=0.5,
            ignore=(Exception,),
        )[0]
    finally:
        c.close()


def _read(secure, topic: str, start: int, want: int, seconds: float = 90) -> list[dict]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {**secure.client_conf(), "group.id": f"audit-reader-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    out: list[dict] = []
    try:
        c.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + seconds
        while len(out) < want and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(json.loads(msg.value()))
    finally:
        c.close()
    return out


def _flush(audit, seconds: float) -> None:
    wait_until(
        lambda: audit.mirror.flush(2) == 0,  # flush itself waits up to 2 s
        seconds,
        "the mirror to deliver its records",
        interval=0,
        detail=lambda: (
            f"delivered {audit.mirror.delivered}, failed {audit.mirror.failed}, last error {audit.mirror.last_error}"
        ),
    )


def test_records_arrive_and_survive_an_outage_in_order(secure, audit_topic, kbot_env, tmp_path, monkeypatch):
    for k, v in kbot_env.items():
        monkeypatch.setenv(k, v)
    start = _end_offset(secure, audit_topic)
    audit = open_audit(tmp_path / "state", audit_topic, "secure", settings=load_settings())
    assert audit.mirror is not None
    try:
        run = uuid.uuid4().hex[:6]
        for i in range(5):
            audit.record("execution", run=run, seq=i, cluster="secure", kind="retention", ok=True)
        _flush(audit, 60)
        assert audit.mirror.delivered == 5 and audit.mirror.failed == 0

        # Outage: every broker killed from outside; the bot goes on auditing meanwhile.
        for b in sorted(secure.brokers):
            secure.faults.kill_broker(b)
        for i in range(5, 12):
            audit.record("execution", run=run, seq=i, cluster="secure", kind="retention", ok=True)
        assert [r["seq"] for r in audit.read()] == list(range(12))  # the file has them at once
        assert audit.mirror.flush(5) > 0  # ... the cluster does not
        secure.faults.heal()
        _flush(audit, 180)
        assert audit.mirror.failed == 0 and audit.mirror.delivered == 12

        mirrored = _read(secure, audit_topic, start, 12)
        assert mirrored == audit.read()  # the same records, in order
    finally:
        audit.close()
