"""Windows of hand-made samples for the window questions' tests (no Spark, no files)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from lake.embedded import Window

T0 = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc)

SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("broker", pa.int32()),
        ("metric", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("labels", pa.map_(pa.string(), pa.string())),
        ("value", pa.float64()),
        ("cluster", pa.string()),
    ]
)


def at(minutes: float = 0, seconds: float = 0) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


def sample(metric, value, ts, broker=1, topic=None, partition=None, labels=None, cluster="c1") -> dict:
    return {
        "ts": ts,
        "broker": broker,
        "metric": metric,
        "topic": topic,
        "partition": partition,
        "labels": None if labels is None else list(labels.items()),
        "value": float(value),
        "cluster": cluster,
    }


def window_of(rows: list[dict]) -> Window:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    return Window.over(table, T0 - dt.timedelta(hours=1), T0 + dt.timedelta(hours=1))
