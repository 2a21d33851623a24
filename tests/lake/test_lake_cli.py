"""`kbot lake collect | ingest | status` (lake.cli), wired as cli/main.py wires it."""

from __future__ import annotations

import argparse
import json

import pytest
import pytest_asyncio
from aiohttp import web
from waiting import wait_until

from kbot_settings import load as load_settings
from lake import cli

TEXT = (
    "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
    "kafka_server_replicamanager_underreplicatedpartitions 1.0\n"
)


def parser():
    p = argparse.ArgumentParser(prog="kbot")
    sub = p.add_subparsers(dest="command")
    cli.register(sub)
    return p


@pytest_asyncio.fixture(loop_scope="function")
async def exporter():
    app = web.Application()

    async def metrics(request):
        return web.Response(text=TEXT, content_type="text/plain")

    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/metrics"
    await runner.cleanup()


def test_register_adds_lake_with_three_actions():
    args = parser().parse_args(["lake", "status", "--lake-dir", "/tmp/x", "--json"])
    assert args.command == "lake" and args.lake_action == "status" and args.func is cli.run
    with pytest.raises(SystemExit):
        parser().parse_args(["lake"])  # an action is required


def test_status_json(tmp_path, capsys):
    args = parser().parse_args(["lake", "status", "--lake-dir", str(tmp_path), "--json"])
    assert cli.run(args) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["landing_files"] == 0 and st["table"] == str(tmp_path / "samples")
    assert st["freshness"] == "no samples yet (nothing ingested)" and st["newest_sample"] is None
    assert set(st["engines"]) == {"incident_window", "history"}


def test_bad_targets_is_one_error_line(tmp_path, capsys):
    args = parser().parse_args(["lake", "collect", "--lake-dir", str(tmp_path), "--targets", "101"])
    assert cli.run(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: metrics target '101'") and err.count("\n") == 1


async def test_collect_rounds_into_landing(tmp_path, exporter, capsys):
    args = parser().parse_args(
        [
            "lake",
            "collect",
            "--lake-dir",
            str(tmp_path),
            "--targets",
            f"7={exporter}",
            "--cluster",
            "c1",
            "--rounds",
            "2",
            "--interval",
            "0.1",
            "--json",
        ]
    )
    assert await cli._collect(args, load_settings()) == 0
    files = sorted((tmp_path / "landing").glob("*.jsonl"))
    assert len(files) == 2
    row = json.loads(files[0].read_text().splitlines()[0])
    assert (row["cluster"], row["broker"], row["metric"], row["value"]) == ("c1", 7, "UnderReplicatedPartitions", 1.0)
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["rows"] for o in out] == [1, 1]


@pytest.mark.spark
def test_ingest_via_cli(spark, tmp_path, monkeypatch, capsys):
    from lake.collector import write_landing_file

    class Borrowed:  # the shared test session must outlive the command's spark.stop()
        def __getattr__(self, name):
            return getattr(spark, name)

        def stop(self):
            pass

    monkeypatch.setattr(cli, "_session", lambda master, settings: Borrowed())
    write_landing_file(
        tmp_path / "landing",
        [
            {
                "ts": 1_714_557_600_000_000,
                "cluster": "c1",
                "broker": 1,
                "metric": "UnderReplicatedPartitions",
                "topic": None,
                "partition": None,
                "labels": None,
                "value": 2.0,
            }
        ],
        "a.jsonl",
    )
    args = parser().parse_args(["lake", "ingest", "--lake-dir", str(tmp_path), "--json"])
    assert cli.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["files"], out["rows"], out["quarantined"]) == (1, 1, [])
    args = parser().parse_args(["lake", "status", "--lake-dir", str(tmp_path)])
    assert cli.run(args) == 0
    text = capsys.readouterr().out
    assert "ingested        1 batch(es), 1 rows" in text and "clusters: c1" in text
    # the one sample is from 2024: nothing in the last two hours
    assert "freshness       no samples in the last 2 h" in text and "answered by     the incident window" in text


@pytest.mark.spark
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_stopped_collector_ingests_the_last_files_and_writes_the_open_hour(spark, tmp_path, signame):
    """`kbot run` stops its collector with SIGTERM, a terminal with Ctrl-C (SIGINT): the collector,
    a separate process here as there, must ingest what is left and write the open hour's row
    before it exits."""
    import queue
    import signal
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from pathlib import Path

    from lake.ingest import LakeLayout

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path))

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self):
            body = TEXT.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "cli.main", "lake", "collect", "--lake-dir", str(tmp_path)]
    cmd += ["--targets", f"7={url}", "--cluster", "c1", "--interval", "1", "--ingest-follow", "--json"]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The first ingest report with rows: the follower's Spark is up. A cold JVM on a machine at
        # load 15-25 takes minutes; a reader thread keeps the deadline even while no line comes.
        lines: queue.Queue[str] = queue.Queue()
        errors: list[str] = []
        threading.Thread(target=lambda: [lines.put(x) for x in iter(proc.stdout.readline, "")], daemon=True).start()
        stderr_reader = threading.Thread(target=lambda: errors.extend(iter(proc.stderr.readline, "")), daemon=True)
        stderr_reader.start()

        def ingest_report_with_rows() -> bool:
            line = lines.get(timeout=1)  # queue.Empty: no line this second
            return '"ingest"' in line and " 0 rows" not in json.loads(line)["ingest"]

        def collector() -> str:
            state = "running" if proc.poll() is None else f"exited {proc.returncode}"
            return f"collector {state}: {''.join(errors)[-1500:]}"

        wait_until(
            ingest_report_with_rows,
            600,
            "an ingest report with rows",
            interval=0,
            ignore=(queue.Empty,),
            detail=collector,
        )
        assert proc.poll() is None, "".join(errors)[-2000:]
        proc.send_signal(getattr(signal, signame))
        proc.wait(timeout=600)
        stderr_reader.join(30)  # the pipe's last lines, after the exit closed it
        err = "".join(errors)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.shutdown()
    assert proc.returncode == 0, err[-2000:]
    assert ("SIGTERM: stopping" in err) == (signame == "SIGTERM") and "Traceback" not in err
    assert not list(layout.landing.glob("*.jsonl")), f"landing files left un-ingested; stderr: {err[-1500:]}"
    pending = json.loads(layout.rollups_pending_file.read_text() or "{}")
    assert pending == {}, pending
    raw = spark.read.format("delta").load(layout.table).where("broker = 7")
    n = raw.count()
    assert n >= 2
    hours = spark.read.format("delta").load(layout.rollup("1h")).where("broker = 7").collect()
    # the open hour's row: written only by the flush at shutdown (an hour closes 5 min after it ends)
    assert sum(r["count"] for r in hours) == n and all(r["max"] == 1.0 for r in hours)
