"""ContinuousIngest on a real SparkSession: a landing file is committed without any timer, the
rollups wait in rollups.pending (a file, so a crash cannot lose them) and are flushed at stop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from waiting import wait_until

from kbot_settings import load as load_settings
from lake.collector import landing_name, write_landing_file
from lake.ingest import ContinuousIngest, Ingestor, LakeLayout
from lake.schema import table_path

pytestmark = pytest.mark.spark

T0_US = 1_714_557_600_000_000  # 2024-05-01 10:00:00 UTC


def rows(ts_us: int, value: float) -> list[dict]:
    return [
        {
            "ts": ts_us,
            "cluster": "ci",
            "broker": b,
            "metric": "UnderReplicatedPartitions",
            "topic": None,
            "partition": None,
            "labels": None,
            "value": value,
        }
        for b in (101, 102, 103)
    ]


def test_files_are_ingested_as_they_land_and_rollups_flushed_at_stop(spark, tmp_path):
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    ingestor = Ingestor(spark, layout, rollup_every_s=3600.0)  # never due during the test
    reports = []
    follower = ContinuousIngest(ingestor, poll_s=0.5, on_report=reports.append).start()
    try:
        write_landing_file(layout.landing, rows(T0_US, 0.0), landing_name(T0_US))
        follower.notify()
        wait_until(lambda: sum(r.rows for r in reports) == 3, 240, "the first file's 3 rows to be committed")
        # the second file is picked up by the poll alone (no notify)
        write_landing_file(layout.landing, rows(T0_US + 60_000_000, 2.0), landing_name(T0_US + 60_000_000))
        wait_until(lambda: sum(r.rows for r in reports) == 6, 240, "the second file's rows to be committed")
        raw = spark.read.format("delta").load(layout.table)
        assert raw.count() == 6 and raw.filter("value = 2.0").count() == 3
        # rollups deferred: the two minutes are recorded, the 1-minute table not built yet
        assert ingestor.pending_minutes() == ["2024-05-01T10:00", "2024-05-01T10:01"]
        assert ingestor.pending_hours() == ["2024-05-01T10"]
        assert json.loads(layout.rollups_pending_file.read_text()) == {
            "2024-05-01T10": 2,  # 2 batches
            "2024-05-01T10:00": 1,
            "2024-05-01T10:01": 1,
        }
        assert not Path(table_path(layout.table, "1m"), "_delta_log").exists()
    finally:
        follower.stop(timeout=240)
    assert follower.last_error is None and ingestor.pending_minutes() == [] == ingestor.pending_hours()
    minutes = spark.read.format("delta").load(table_path(layout.table, "1m"))
    assert minutes.filter("metric = 'UnderReplicatedPartitions'").select("broker").distinct().count() == 3
    assert not list(layout.landing.glob("*.jsonl"))
