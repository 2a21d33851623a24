"""Shared pieces of the Spark Connect tests (a plain module, like tests/lake/lakekit.py): free
ports, and a synthetic lake written through a Connect server.

Each module starts its own server (lake.connect) and stops it in its fixture's teardown, even
when a test fails; the servers are real spark-submit children of pyspark's installation."""

from __future__ import annotations

import datetime as dt
import os
import socket

UTC = dt.timezone.utc
CLUSTER = "cx"
HOT_TOPIC, HOT_PARTITION = "topic-001", 1


def free_port(first: int | None = None) -> int:
    """A port nothing listens on now, from ``first`` up (default $KBOT_TEST_SPARK_CONNECT_PORT or
    15100): below the kernel's ephemeral range (32768+), where the test clusters of several
    people on this machine keep their ports."""
    port = first or int(os.environ.get("KBOT_TEST_SPARK_CONNECT_PORT", "15100"))
    for candidate in range(port, port + 500):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    raise RuntimeError(f"no free port in {port}..{port + 499}")


def recent_lake(spark, path: str) -> dt.datetime:
    """A small synthetic lake whose samples cover the last 15 minutes (the default window of
    `hot-partitions`), with one hot partition; written through ``spark`` (a Connect session).
    Returns the time it was generated at."""
    from tools import synthetic as S

    now = dt.datetime.now(UTC)
    hours = 1 if now.minute >= 20 else 2  # the hour directories that hold now-15m .. now
    start = now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=hours - 1)
    S.generate(
        path,
        cluster=CLUSTER,
        start=start,
        hours=hours,
        brokers=3,
        topics=2,
        partitions_per_topic=3,
        resolution_s=30,
        seed=11,
        spark=spark,
        leo_replicas=1,
        incidents=[S.hot_key(HOT_TOPIC, HOT_PARTITION, start, f"{hours * 60}m")],
    )
    return now
