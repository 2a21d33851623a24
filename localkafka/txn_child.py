"""Child process for faults.hanging_transaction (run as a script, not imported).

Opens a transaction, produces and flushes records so they sit in the log
uncommitted, prints one ``READY {json}`` line and then waits to be SIGKILLed:
a producer that dies mid-transaction without commit/abort is exactly what
leaves a hanging transaction (the partition's last stable offset is pinned at
the transaction's first offset until the coordinator times it out).

transaction.timeout.ms=600000 keeps the coordinator from aborting it for 10
minutes, longer than any test that looks at it.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Producer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partition", type=int, required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--records", type=int, default=5)
    ap.add_argument("--timeout-ms", type=int, default=600000)
    ap.add_argument("--client-conf", help="JSON file of extra client settings (SASL/TLS of a secured cluster)")
    a = ap.parse_args()
    extra = {}
    if a.client_conf:
        with open(a.client_conf) as f:
            extra = json.load(f)

    p = Producer(
        {
            **extra,
            "bootstrap.servers": a.bootstrap,
            "transactional.id": a.transactional_id,
            "transaction.timeout.ms": a.timeout_ms,
        }
    )
    p.init_transactions(30)
    p.begin_transaction()
    offsets = []

    def on_delivery(err, msg):
        if err is None:
            offsets.append(msg.offset())

    for i in range(a.records):
        p.produce(
            a.topic, key=b"txn", value=f"uncommitted-{i}".encode(), partition=a.partition, on_delivery=on_delivery
        )
    if p.flush(30) != 0 or len(offsets) != a.records:
        print(f"FAILED delivered={len(offsets)}/{a.records}", flush=True)
        return 1
    print("READY " + json.dumps({"first_offset": min(offsets), "last_offset": max(offsets)}), flush=True)
    while True:  # never commit: the parent SIGKILLs us
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
