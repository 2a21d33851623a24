"""Scale-out on a real Spark cluster: a Spark standalone master and one worker started from
pyspark's installation (spark-class ...Master / ...Worker), a Connect server (lake.connect) whose
master is that cluster, and the lake's own code through it: landing files ingested exactly once
(lake.ingest, Delta's idempotent appends), closed hours compacted (lake.maintenance: OPTIMIZE
ZORDER BY), and a history query, with the executors on the worker doing the work."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import urllib.request

import pytest
from connectkit import free_port
from waiting import wait_until

from kbot_settings import load as load_settings
from lake import connect
from lake import queries as Q
from lake.service import LakeService

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc
MASTER_PORT = int(os.environ.get("KBOT_TEST_SPARK_MASTER_PORT", "17077"))
MASTER_UI = MASTER_PORT + 1104  # 18181 by default
WORKER_UI = MASTER_UI + 1
T0 = dt.datetime(2024, 5, 1, 10, tzinfo=UTC)
TOPIC, HOT = "orders", 1


def _json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _daemons_alive(procs):
    """A wait's check: fail at once when a Spark daemon exits."""

    def check() -> None:
        for name, p in procs.items():
            if p.poll() is not None:
                pytest.fail(f"the Spark {name} exited (code {p.returncode})")

    return check


def _stop(p: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Master + 1 worker (1 core, 1g) on 127.0.0.1 and a Connect server on them; all stopped in
    the teardown, whatever happened."""
    home = tmp_path_factory.mktemp("standalone")
    lake_dir = home / "lake"
    env = {k: v for k, v in os.environ.items() if k not in ("KBOT_SPARK_MASTER", "SPARK_HOME")}
    env.update(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "384m",
            "KBOT_LAKE_DIR": str(lake_dir),
            "SPARK_NO_DAEMONIZE": "1",
        }
    )
    spark_class = str(connect.spark_home() / "bin" / "spark-class")
    procs: dict[str, subprocess.Popen] = {}
    url = f"spark://127.0.0.1:{MASTER_PORT}"
    try:
        for name, cmd in [
            (
                "master",
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(MASTER_PORT),
                    "--webui-port",
                    str(MASTER_UI),
                ],
            ),
            (
                "worker",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(WORKER_UI),
                    "--work-dir",
                    str(home / "work"),
                ],
            ),
        ]:
            log = open(home / f"{name}.log", "w")
            procs[name] = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
            log.close()
        master_json = f"http://127.0.0.1:{MASTER_UI}/json/"
        wait_until(
            lambda: [w for w in _json(master_json).get("workers", []) if w.get("state") == "ALIVE"],
            240,
            "the worker to register with the master",
            interval=0.5,
            ignore=(OSError, ValueError),  # the master's UI not up yet, or a half-written answer
            check=_daemons_alive(procs),
        )
        info = connect.start_server(
            load_settings(env),
            free_port(),
            url,
            lake_dir=lake_dir,
            timeout=300,
            conf={
                "spark.executor.memory": "512m",
                "spark.executor.cores": "1",
                "spark.cores.max": "1",
                "spark.sql.shuffle.partitions": "2",
            },
        )
        yield info, env, master_json, procs
    finally:
        with contextlib.suppress(Exception):
            connect.stop_server(load_settings(env), lake_dir)
        for p in reversed(list(procs.values())):
            _stop(p)


def _land(layout, name: str, minute0: int) -> int:
    """Five minutes of LogEndOffset samples (30 s) of three partitions, one of them hot."""
    from lake.collector import write_landing_file

    rows = []
    for i in range(10):
        ts = T0 + dt.timedelta(minutes=minute0, seconds=30 * i)
        for p in range(3):
            rate = 400.0 if p == HOT else 20.0
            rows.append(
                {
                    "ts": int(ts.timestamp() * 1e6),
                    "cluster": "sa",
                    "broker": 1 + p,
                    "metric": "LogEndOffset",
                    "topic": TOPIC,
                    "partition": p,
                    "labels": None,
                    "value": rate * (minute0 * 60 + 30 * i),
                }
            )
    write_landing_file(layout.landing, rows, name)
    return len(rows)


def test_ingest_compact_and_query_through_connect_on_a_standalone_cluster(cluster):
    from pyspark.sql import SparkSession

    from lake.ingest import Ingestor, LakeLayout
    from lake.maintenance import maintain

    info, env, master_json, procs = cluster
    layout = LakeLayout.from_settings(load_settings(env))
    layout.make_dirs()
    spark = SparkSession.builder.remote(info.url).create()
    try:
        # two ingests of the same hour: two files in its partition, for OPTIMIZE to merge
        landed = _land(layout, "a.jsonl", 0)
        first = Ingestor(spark, layout).run()
        landed += _land(layout, "b.jsonl", 5)
        second = Ingestor(spark, layout).run()
        again = Ingestor(spark, layout).run()  # nothing new: nothing written twice
        assert (first.rows, second.rows, again.rows) == (30, 30, 0)

        rep = maintain(spark, layout.table, now=T0 + dt.timedelta(days=1), vacuum=False)
        assert rep.optimized["raw"] >= 1, rep.summary()
        assert rep.files_after["raw"] < rep.files_before["raw"], rep.summary()
        assert spark.read.format("delta").load(layout.table).count() == landed
    finally:
        spark.stop()

    svc = LakeService.from_settings(load_settings(env), query_timeout_s=240)
    assert svc.master == info.query_url  # the server's shared query session
    try:
        assert svc.start().wait_ready_sync(240), svc.status()
        end = T0 + dt.timedelta(minutes=10)
        history = asyncio.run(svc.query(Q.q_history, T0, end, "LogEndOffset", TOPIC, None, HOT, 60))
    finally:
        svc.stop()
    # the hot partition's log end offset, minute by minute from its broker: 400 records/s
    rows = history["rows"]
    assert {r["broker"] for r in rows} == {1 + HOT} and len(rows) == 10, rows
    assert rows[-1]["value"] - rows[0]["value"] == 400.0 * 9 * 60, rows

    # the work ran on the cluster: the server is the master's application, its executor on the worker
    apps = [a for a in _json(master_json).get("activeapps", []) if a.get("name") == connect.APP_NAME]
    assert apps and apps[0]["cores"] == 1, apps
    worker = _json(f"http://127.0.0.1:{WORKER_UI}/json/")
    assert [e for e in worker.get("executors", []) if e.get("appid") == apps[0]["id"]], worker
    assert all(p.poll() is None for p in procs.values())
