"""Child process for the producer-fencing mode (run as a script, not imported).

A transactional producer that opens a transaction, writes a few records, prints ``READY`` and
then waits for a line on stdin; on it, it tries to commit and prints ``RESULT <error name>``
(or ``RESULT OK``). Meanwhile the lab starts a second producer with the same transactional.id,
whose InitProducerId bumps the epoch: this one is then a zombie and its commit is fenced - the
error a real application sees when two instances share a transactional.id.
"""

import argparse
import sys
import time

from confluent_kafka import KafkaException, Producer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--transactional-id", required=True)
    a = ap.parse_args()
    p = Producer(
        {"bootstrap.servers": a.bootstrap, "transactional.id": a.transactional_id, "transaction.timeout.ms": 60000}
    )
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(a.topic, value=f"zombie-{i}".encode(), partition=0)
    p.flush(30)
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        p.commit_transaction(30)
        print("RESULT OK", flush=True)
    except KafkaException as exc:
        err = exc.args[0]
        print(f"RESULT {err.name()} {err.str()}", flush=True)
    while True:  # stay until the lab kills us, like a stuck application instance
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
