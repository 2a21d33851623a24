"""How much the lake holds (``lake.embedded.collected``), read from the tables' Delta logs alone:
what tells a young lake ("Not enough data yet (N min collected)") from a window without samples.

The tables are written with delta-rs, one append per batch as the ingest commits them (no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import write_deltalake
from windowkit import SCHEMA, T0, at, sample

from lake.embedded import WindowReader, collected
from lake.schema import RAW, partition_values

PARTITIONS = ["cluster", "date", "hour"]


def _append(path, rows: list[dict]) -> None:
    """One batch (one commit, a file per partition) of samples, partitioned as the lake is."""
    for r in rows:
        r["date"], r["hour"] = partition_values(r["ts"])
    schema = SCHEMA.append(pa.field("date", pa.string())).append(pa.field("hour", pa.int32()))
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=schema), mode="append", partition_by=PARTITIONS)


def _batch(start_min: float, rounds: int, cluster: str = "c1", step_s: float = 10) -> list[dict]:
    return [sample("UnderReplicatedPartitions", 0, at(start_min, i * step_s), cluster=cluster) for i in range(rounds)]


def _readers(tmp_path):
    return {RAW: WindowReader(str(tmp_path / "samples")), "1m": WindowReader(str(tmp_path / "samples_1m"), "1m")}


def test_nothing_ingested_yet_holds_nothing(tmp_path):
    got = collected(_readers(tmp_path), T0, T0 + dt.timedelta(hours=1), "c1")
    assert got == {"minutes": 0, "first": None, "last": None, "earlier": False}


def test_a_young_lake_counts_the_minutes_its_batches_cover_and_a_pause_shows(tmp_path):
    # three batches: 10:05:00-10:06:50 (minutes 5, 6), 10:07:00-10:07:50 (7), then a pause until 10:20
    _append(tmp_path / "samples", _batch(5, 12))
    _append(tmp_path / "samples", _batch(7, 6))
    _append(tmp_path / "samples", _batch(20, 3))
    _append(tmp_path / "samples", _batch(3, 6, cluster="other"))  # another cluster's samples do not count
    got = collected(_readers(tmp_path), T0, T0 + dt.timedelta(hours=1), "c1")
    assert got["minutes"] == 4  # 5, 6, 7 and 20
    assert got["first"] == at(5).timestamp() and got["last"] == at(20, 20).timestamp()
    assert got["earlier"] is False


def test_samples_before_the_window_make_it_not_young(tmp_path):
    _append(tmp_path / "samples", _batch(5, 6))
    got = collected(_readers(tmp_path), at(6), at(30), "c1")
    assert got["earlier"] is True
    assert got["minutes"] == 0 and got["first"] is None  # the batch ended at 10:05:50
    # the other cluster's lake began inside the window: young for it
    assert collected(_readers(tmp_path), at(6), at(30), "c2")["earlier"] is False


def test_a_minute_rollup_outliving_the_raw_samples_counts_as_earlier(tmp_path):
    _append(tmp_path / "samples", _batch(40, 3))
    # the minute table's row of two hours ago (its raw samples gone with retention), as the rollup keys it
    schema = pa.schema(
        [
            ("bucket", pa.timestamp("us", tz="UTC")),
            ("broker", pa.int32()),
            ("metric", pa.string()),
            ("cluster", pa.string()),
            ("date", pa.string()),
            ("hour", pa.int32()),
        ]
    )
    date, hour = partition_values(at(-120))
    row = {"bucket": at(-120), "broker": 1, "metric": "UnderReplicatedPartitions", "cluster": "c1"}
    table = pa.Table.from_pylist([{**row, "date": date, "hour": hour}], schema=schema)
    write_deltalake(str(tmp_path / "samples_1m"), table, partition_by=PARTITIONS)
    got = collected(_readers(tmp_path), at(30), at(60), "c1")
    assert got["earlier"] is True and got["minutes"] == 1
