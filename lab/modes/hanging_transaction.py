"""Hanging transaction: a transactional producer (a separate process, localkafka/txn_child.py)
writes inside a transaction and is SIGKILLed before commit; the partition's last stable offset
stays pinned at the transaction's first offset, so read_committed consumers stop there.

What one machine can reproduce is the open transaction of a dead producer *within* its
transaction.timeout.ms (10 min here): on a correct broker the coordinator aborts it at the
timeout, and a transaction open past the brokers' transaction.max.timeout.ms (KIP-664's "hanging")
needs a coordinator that lost track of it. So the right answer names the stuck transaction and
says it is still within its timeout: a warning (the coordinator will end it), not a page."""

import time

from diagnosis.active_findings import STALLED_TXN_IDLE_MS
from lab import probes
from lab.mode import Mode
from localkafka.testing import produce_one

TOPIC = "lab-txn"


def inject(cluster):
    info = cluster.faults.hanging_transaction(TOPIC, partition=0, records=5, timeout=90)
    killed_at = time.time()  # its producer is gone once hanging_transaction returns
    # a committed record written after the open transaction: visible to read_uncommitted only

    produce_one(cluster.bootstrap_servers, TOPIC, 0, "after-the-hung-txn")
    return {
        "topic": TOPIC,
        "topics": [TOPIC],
        "partition": 0,
        "transactional_id": info["transactional_id"],
        "producer_id": info["producer_id"],
        "first_offset": info["first_offset"],
        "_killed_at": killed_at,
    }


def wait_for_symptom(cluster, facts):
    # Held for a few seconds with its producer gone: a transaction a second old is every
    # transactional application's normal state, and nothing outside can tell it from a dead one
    # (`status` calls one stalled once its producer has been quiet STALLED_TXN_IDLE_MS).
    held_s = STALLED_TXN_IDLE_MS / 1000

    def pinned():
        lso = probes.end_offsets(cluster, TOPIC, [0], "read_committed")[0]
        leo = probes.end_offsets(cluster, TOPIC, [0])[0]
        # at or before its first offset: another open transaction on the partition may hold it
        # further back (chaos trial 2911:33 drew this mode twice in one pair)
        if not lso <= facts["first_offset"] < leo or time.time() - facts["_killed_at"] < held_s:
            return None
        return {"last_stable_offset": lso, "log_end_offset": leo}

    return cluster.faults.wait_for(
        pinned, 60 + held_s, f"the last stable offset of {TOPIC}-0 to stay behind its end for {held_s:g} s"
    )


MODE = Mode(
    name="hanging-transaction",
    summary="SIGKILL a transactional producer mid-transaction: LSO pinned, read_committed consumers stall",
    expect_entry="hanging-transaction",
    expect_severity="warning",
    questions=("why hanging transaction", "hanging-txns"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    topics=(TOPIC,),
    named=lambda f: [f["transactional_id"]],
)
