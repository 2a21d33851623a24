"""Collector: scrapes over HTTP (a local aiohttp server standing in for the exporters), maps,
and writes landing files atomically; consumer groups sampled on change."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pytest
import pytest_asyncio
from aiohttp import web

from kbot_settings import load as load_settings
from lake import collector as C
from live.model import GroupLag, PartitionLag

TEXT = {
    101: "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
    "kafka_server_replicamanager_underreplicatedpartitions 2.0\n"
    "# TYPE kafka_log_log_logendoffset gauge\n"
    'kafka_log_log_logendoffset{topic="t",partition="0",} 10.0\n',
    102: "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
    "kafka_server_replicamanager_underreplicatedpartitions 0.0\n",
}


@pytest_asyncio.fixture(loop_scope="function")  # served by the test's own event loop
async def exporters():
    """Two exporters (101, 102) on one local server; a path that 500s; a port nobody listens on."""
    app = web.Application()

    async def metrics(request):
        return web.Response(text=TEXT[int(request.match_info["node"])], content_type="text/plain")

    async def broken(request):
        return web.Response(status=500, text="oops")

    async def slow(request):
        await asyncio.sleep(1.5)  # the scenario: an exporter stalling past the 0.5 s scrape timeout
        return web.Response(text="")

    app.router.add_get("/{node:\\d+}/metrics", metrics)
    app.router.add_get("/broken", broken)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    with socket.socket() as s:  # a free port, closed again: connection refused
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    yield f"http://127.0.0.1:{port}", f"http://127.0.0.1:{dead}/metrics"
    await runner.cleanup()


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_parse_targets():
    assert C.parse_targets("101=http://a:7071/metrics, 102=https://b/metrics") == [
        C.Target(101, "http://a:7071/metrics"),
        C.Target(102, "https://b/metrics"),
    ]
    for bad in ("101", "x=http://a", "1=ftp://a", "1=http://a,1=http://b"):
        with pytest.raises(ValueError):
            C.parse_targets(bad)
    assert C.targets_from_settings(load_settings({"KBOT_METRICS_TARGETS": "1=http://h/metrics"})) == [
        C.Target(1, "http://h/metrics")
    ]
    assert C.targets_from_urls({102: "http://b", 1: "http://a"}) == [C.Target(1, "http://a"), C.Target(102, "http://b")]


def test_write_landing_file_is_atomic(tmp_path, monkeypatch):
    rows = [{"ts": 1, "value": 1.0}, {"ts": 2, "value": 2.0}]
    path = C.write_landing_file(tmp_path, rows, "a.jsonl")
    assert _read(path) == rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]  # no tmp left behind

    # a crash between writing and renaming leaves no visible (or partial) file
    def boom(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(C.os, "replace", boom)
    with pytest.raises(OSError):
        C.write_landing_file(tmp_path, rows, "b.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_write_fsyncs_before_rename(tmp_path, monkeypatch):
    calls = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(C.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd)))
    monkeypatch.setattr(C.os, "replace", lambda a, b: (calls.append("rename"), real_replace(a, b)))
    C.write_landing_file(tmp_path, [{"x": 1}], "c.jsonl")
    assert calls[:2] == ["fsync", "rename"]


def test_stale_tmp_files_are_removed_and_never_look_like_landing_files(tmp_path):
    (tmp_path / ".x.jsonl.tmp").write_text('{"half":')
    assert C.remove_stale_tmp(tmp_path) == 1
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError):
        C.write_landing_file(tmp_path, [], ".hidden.jsonl")


def test_nan_cannot_reach_a_landing_file(tmp_path):
    with pytest.raises(ValueError):
        C.write_landing_file(tmp_path, [{"value": float("nan")}], "n.jsonl")
    assert list(tmp_path.iterdir()) == []


async def test_a_cancel_mid_write_waits_for_the_file_to_land(tmp_path):
    """Ctrl-C or SIGTERM can cancel a round while its worker thread writes the landing file. The
    thread cannot be stopped; if the cancel went on without it, the file could land after the
    stopping collector's last ingest and sit un-ingested. The cancel must wait for it."""
    import threading

    release = threading.Event()

    def rows():  # consumed in the writer thread: the write blocks until released
        release.wait(30)
        yield {"x": 1}

    task = asyncio.ensure_future(C.land(tmp_path, rows(), "slow.jsonl"))
    await asyncio.sleep(0)  # the writer thread has the rows
    task.cancel()
    asyncio.get_running_loop().call_later(0.2, release.set)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (tmp_path / "slow.jsonl").read_text() == '{"x":1}\n'


async def test_round_scrapes_all_targets_into_one_file(tmp_path, exporters):
    base, dead = exporters
    targets = [
        C.Target(101, f"{base}/101/metrics"),
        C.Target(102, f"{base}/102/metrics"),
        C.Target(103, dead),
        C.Target(104, f"{base}/broken"),
    ]
    col = C.Collector(targets, tmp_path / "landing", "dev", interval_s=1, timeout_s=2, clock=lambda: 1_714_557_600.1234)
    report = await col.collect_once()
    assert set(report.failed) == {103, 104}
    assert "HTTP 500" in report.failed[104]
    rows = _read(report.file)
    assert report.rows == len(rows) == 3
    assert {r["ts"] for r in rows} == {1_714_557_600_123_000}  # one instant per round, ms precision
    assert {(r["broker"], r["metric"], r["value"]) for r in rows} == {
        (101, "UnderReplicatedPartitions", 2.0),
        (101, "LogEndOffset", 10.0),
        (102, "UnderReplicatedPartitions", 0.0),
    }
    assert report.file.name.startswith("20240501T100000.123000Z-") and report.file.suffix == ".jsonl"
    assert "2/4 targets" in report.summary()


async def test_slow_target_times_out_without_holding_the_round(tmp_path, exporters):
    base, _ = exporters
    col = C.Collector(
        [C.Target(1, f"{base}/slow"), C.Target(101, f"{base}/101/metrics")], tmp_path, "dev", timeout_s=0.5
    )
    report = await col.collect_once()
    assert report.failed == {1: "no answer within 0.5s"}
    assert report.seconds < 1.4
    assert report.rows == 2


async def test_no_rows_no_file(tmp_path, exporters):
    _, dead = exporters
    report = await C.Collector([C.Target(1, dead)], tmp_path, "dev").collect_once()
    assert report.file is None and report.rows == 0
    assert not any(tmp_path.iterdir())


async def test_run_collects_rounds_on_a_cadence(tmp_path, exporters):
    base, _ = exporters
    (tmp_path / ".old.jsonl.tmp").write_text("x")
    col = C.Collector([C.Target(101, f"{base}/101/metrics")], tmp_path, "dev", interval_s=0.2)
    seen = []
    n = await col.run(rounds=3, on_round=seen.append)
    assert n == 3 and len(seen) == 3
    assert len(list(tmp_path.glob("*.jsonl"))) == 3
    assert not list(tmp_path.glob(".*.tmp"))


class FakeGroups:
    def __init__(self):
        self.committed = {("orders", 0): 10, ("orders", 1): 5}
        self.end = 20

    async def consumer_group_lag(self, group):
        if group == "missing":
            raise LookupError("no such group")
        return GroupLag(
            group,
            "STABLE",
            [PartitionLag(t, p, c, self.end, self.end - c) for (t, p), c in self.committed.items()]
            + [PartitionLag("orders", 2, None, self.end, None)],
        )


async def test_group_sampler_emits_observed_commits_only():
    src = FakeGroups()
    s = C.GroupSampler(src, ["g", "missing"])
    rows, errors = await s.sample(1, "c")
    assert "missing" in errors
    assert {(r["metric"], r["partition"], r["value"]) for r in rows} == {
        ("CommittedOffset", 0, 10.0),
        ("ConsumerLag", 0, 10.0),
        ("CommittedOffset", 1, 5.0),
        ("ConsumerLag", 1, 15.0),
    }
    assert all(r["labels"] == {"group": "g"} and r["broker"] == -1 for r in rows)
    rows, _ = await s.sample(2, "c")
    assert rows == []  # nothing committed since
    src.committed[("orders", 1)] = 8
    rows, _ = await s.sample(3, "c")
    assert {(r["metric"], r["partition"], r["value"]) for r in rows} == {
        ("CommittedOffset", 1, 8.0),
        ("ConsumerLag", 1, 12.0),
    }


async def test_collector_adds_group_rows(tmp_path, exporters):
    base, _ = exporters
    col = C.Collector([C.Target(102, f"{base}/102/metrics")], tmp_path, "dev", groups=["g"], lag_source=FakeGroups())
    report = await col.collect_once()
    assert report.group_rows == 4
    assert {r["metric"] for r in _read(report.file)} == {"UnderReplicatedPartitions", "CommittedOffset", "ConsumerLag"}
