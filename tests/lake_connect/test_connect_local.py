"""The lake served warm through Spark Connect: a server started by lake.connect (local[2], the
Delta extension), the bot's LakeService choosing sc:// from the server's state file, every lake
query running through it, and a second process (`kbot ask`) answering from the lake through it
without a Spark of its own."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from connectkit import CLUSTER, HOT_PARTITION, HOT_TOPIC, free_port, recent_lake

from kbot_settings import load as load_settings
from lake import connect
from lake import queries as Q
from lake.service import LakeService
from window_queries.availability import CONTROLLER_QUESTION, OFFLINE_QUESTION, UNDER_MIN_ISR_QUESTION
from window_queries.hot import ask_hot
from window_queries.lag import GROUP_LAG_QUESTION
from window_queries.saturation import SATURATION_QUESTION
from window_queries.txn import HANGING_QUESTION
from window_queries.urp import URP_QUESTION

pytestmark = pytest.mark.spark

KBOT = str(Path(sys.executable).with_name("kbot"))


@pytest.fixture(scope="module")
def served(lake_env):
    """One Connect server for the module, over a small lake written through it; stopped in the
    teardown even when a test failed."""
    lake_dir, env = lake_env
    port = free_port()
    try:
        info = connect.start_server(load_settings(env), port, lake_dir=lake_dir, timeout=300)
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(info.url).create()
        try:
            generated_at = recent_lake(spark, str(Path(lake_dir) / "samples"))
        finally:
            spark.stop()
        yield info, env, generated_at
    finally:
        connect.stop_server(load_settings(env), lake_dir)


def test_the_server_is_found_from_its_state_file_and_stops_cleanly(served):
    info, env, _ = served
    st = connect.status(load_settings(env), env["KBOT_LAKE_DIR"], deep=True)
    assert st is not None and st.state == "running" and st.port == info.port and st.spark_version.startswith("4.")
    assert connect.running_url(load_settings(env)) == info.url
    cmd = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    assert b"spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in cmd
    assert f"spark.connect.grpc.binding.port={info.port}".encode() in cmd
    # a second start finds it instead of starting another
    again = connect.start_server(load_settings(env), info.port, lake_dir=env["KBOT_LAKE_DIR"])
    assert (again.pid, again.started) == (info.pid, False)


def test_lake_service_queries_through_connect(served):
    info, env, now = served
    svc = LakeService.from_settings(load_settings(env), query_timeout_s=240)
    # the server's shared query session (ServerInfo.query_url)
    assert svc.master == info.query_url == f"{info.url}/;session_id={info.session_id}"
    assert svc.fallback_master == "local[*]"
    try:
        assert svc.start().wait_ready_sync(240), svc.status()
        assert svc.status()["master"] == info.query_url
        start, end = now - dt.timedelta(minutes=15), now

        async def ask():
            # hot partitions too: in this process, as hot-partitions asks
            hot = await ask_hot(svc.ask_window, start, end, None, 5, "peak", 2)
            others = {}
            for name, fn, args in [
                ("history", Q.q_history, ("UnderReplicatedPartitions", None, None, None, 60)),
                ("window", Q.q_window_rows, (lambda df: df.groupBy("metric").count(),)),
            ]:
                others[name] = await svc.query(fn, start, end, *args)
            # the window's questions of `why` and `lag` are answered in this process, beside the server
            for name, question, args in [
                ("urp", URP_QUESTION, ()),
                ("under_min_isr", UNDER_MIN_ISR_QUESTION, ()),
                ("offline", OFFLINE_QUESTION, ()),
                ("hanging", HANGING_QUESTION, ()),
                ("saturation", SATURATION_QUESTION, (0.3,)),
                ("controller", CONTROLLER_QUESTION, ()),
                ("group_lag", GROUP_LAG_QUESTION, ("topic-001-consumers",)),
            ]:
                others[name] = await svc.ask_window(question, start, end, *args)
            return hot, others

        hot, others = asyncio.run(ask())
    finally:
        svc.stop()
    first = hot["rows"][0]
    assert (first["cluster"], first["topic"], first["partition"]) == (CLUSTER, HOT_TOPIC, HOT_PARTITION), hot["rows"]
    assert first["skew"] > 3 and hot["series"] and hot["data_end"] is not None
    # every query ran through the server and found the window's samples
    assert others["urp"]["trend"] and others["saturation"]["idle"] and others["history"]["rows"]
    assert others["history"]["resolution"] in ("raw", "1m")
    assert {r["metric"] for r in others["window"]} >= {"LogEndOffset", "UnderReplicatedPartitions"}
    for name in ("under_min_isr", "offline"):
        assert others[name]["rows"], name
    assert others["controller"]["rows"] == []  # one active controller throughout: no anomaly
    assert "growing" in others["hanging"] and "partitions" in others["group_lag"]


def test_a_one_shot_kbot_ask_answers_from_the_lake_through_the_server(served, tmp_path):
    info, env, _ = served
    # no Java for this process: an in-process Spark cannot start, so a lake answer can only
    # have come through the Connect server
    child_env = dict(
        env,
        JAVA_HOME=str(tmp_path / "no-java"),
        PATH=os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not Path(p, "java").exists()),
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        [KBOT, "ask", "--json", "hot-partitions"], env=child_env, capture_output=True, text=True, timeout=600
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout)
    lake_rows = [e for e in answer["evidence"] if e.get("source", "").startswith("lake")]
    assert lake_rows, answer
    assert lake_rows[0]["label"] == f"{HOT_TOPIC}-{HOT_PARTITION}", (answer["verdict"], elapsed)


def test_one_shot_asks_share_the_server_session_and_leave_it_open(served):
    """Every bot process queries in the server's one session (its generated code is compiled and
    JIT-warmed once, not per process); a process that exits must leave it open for the next, and
    a session that was closed anyway must not cost the answer."""
    from lake.spark import build_session

    info, env, _ = served
    assert connect.query_url(load_settings(env)) == info.query_url and len(info.session_id) == 36
    probe = build_session(info.query_url)
    probe.range(3).createOrReplaceTempView("kbot_shared_probe")  # visible to this session only
    probe.stop()
    proc = subprocess.run(
        [KBOT, "ask", "--json", "hot-partitions"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any(e.get("source", "").startswith("lake") for e in json.loads(proc.stdout)["evidence"])
    # the ask's process and the probe's are gone: the session they shared is still open
    again = build_session(info.query_url)
    try:
        assert again.table("kbot_shared_probe").count() == 3
    finally:
        again.stop()

    # closed on the server (an outside client releasing it): the next process queries in a
    # session of its own instead of failing
    from pyspark.sql import SparkSession

    SparkSession.builder.remote(info.query_url).create().stop()  # releases the session
    proc = subprocess.run(
        [KBOT, "ask", "--json", "hot-partitions"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads(proc.stdout)
    assert any(e.get("source", "").startswith("lake") for e in answer["evidence"]), answer


def test_a_dead_server_is_not_used_and_the_cli_says_so(served, tmp_path):
    info, env, _ = served
    # a state file left by a server that is gone (another lake dir, a pid that is not a server)
    other = tmp_path / "other-lake"
    (other / "connect").mkdir(parents=True)
    (other / "connect" / "server.json").write_text(
        json.dumps({"pid": os.getpid(), "port": info.port, "master": "local[2]", "log": "x", "host": "127.0.0.1"})
    )
    other_env = dict(env, KBOT_LAKE_DIR=str(other))
    assert connect.running_url(load_settings(other_env)) is None
    assert LakeService.from_settings(load_settings(other_env)).master == "local[*]"
    st = subprocess.run(
        [KBOT, "lake", "serve", "--status", "--json"], env=other_env, capture_output=True, text=True, timeout=300
    )
    assert st.returncode == 1 and json.loads(st.stdout)["state"] == "dead", st
    ok = subprocess.run(
        [KBOT, "lake", "serve", "--status", "--json"], env=env, capture_output=True, text=True, timeout=300
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["url"] == info.url, ok
    bad = subprocess.run(
        [KBOT, "lake", "serve", "--port", "99999"], env=env, capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: --port") and "Traceback" not in bad.stderr


CHILD = """
import os, signal, sys, time
from waiting import wait_until
from kbot_settings import load
from lake import connect
from lake.spark import build_session
st = connect.status(load(), os.environ["KBOT_LAKE_DIR"])
spark = build_session(st.url)
assert spark.range(5).count() == 5
os.kill(st.pid, signal.SIGKILL)           # the server goes away under a live session
wait_until(lambda: not connect.port_open("127.0.0.1", st.port), 60, "the killed server's port to close", 0.1)
t0 = time.monotonic()
try:
    spark.range(5).count()
except Exception as exc:
    print(f"FAILED {time.monotonic() - t0:.1f} {type(exc).__name__}", flush=True)
"""


def test_a_server_that_dies_fails_a_query_in_seconds_and_the_process_still_exits(tmp_path):
    """Spark Connect's own retry policy waits 10 minutes for a server that does not answer (at
    exit too): the lake's sessions fail fast instead, so `kbot ask` says the lake is unavailable
    and exits."""
    env = {k: v for k, v in os.environ.items() if k != "KBOT_SPARK_MASTER"}
    root = Path(__file__).resolve().parents[2]
    env.update(
        {"KBOT_LAKE_DIR": str(tmp_path / "lake"), "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    )
    connect.start_server(load_settings(env), free_port(), lake_dir=tmp_path / "lake", timeout=300)
    try:
        t0 = time.monotonic()
        child = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
        took = time.monotonic() - t0
    finally:
        connect.stop_server(load_settings(env), tmp_path / "lake")
    failed = [line for line in child.stdout.splitlines() if line.startswith("FAILED ")]
    assert failed, child.stdout + child.stderr[-3000:]
    assert float(failed[0].split()[1]) < 30, failed
    assert child.returncode == 0 and took < 120, (took, child.stderr[-2000:])
