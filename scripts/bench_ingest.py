#!/usr/bin/env python
"""Benchmark: ingest at the issue's scale - B brokers x S series scraped every 15 s - through the
real ``lake.ingest.Ingestor``, on one Spark core (``local[1]``), phase by phase.

Each scrape round is one landing file of B x S rows, written by the collector's own writer
(``lake.landing.write_landing_file``), as ``kbot run`` writes one file per round.  The run
replays them as ``kbot run`` would, back to back: one batch per round, and the deferred rollups
of the minutes touched since every ``--rollup-every`` rounds (60 s of data, ``kbot run``'s
``rollup_every_s``).  Reported, each as rows/s:

* validate: the ingest's check of a landing file (``scan_landing_file``: pyarrow, a block at a
  time on up to 4 threads; pin the run to one core with ``taskset -c 0``), timed alone on the
  same files before the run;
* commit: the batches (validation, which also stages the parsed rows as Parquet for Spark,
  then the Delta append: one commit per round, or per ``--files-per-batch`` rounds, as the
  ingest batches the landing files waiting when it is behind);
* rollups: the rollup runs (the minutes touched, from their raw samples and the previous
  minutes' rollup rows; each touched hour from its minute rows), with each run's seconds
  (a run's cost should not grow as the lake fills);
* hour row: writing the hour rollup once the hour has closed (``flush_rollups(final=True)``),
  timed on the minutes so far and scaled to a whole hour (60 minute rows per series), then
  spread over the hour's 240 rounds;
* sustained: rows over commit + rollups + the rounds' share of the hour row; a round arrives
  every 15 s, so the ingest keeps up when one round takes less than that.

Each phase also reports the CPU seconds it cost (the Spark JVM's, from ``/proc/<pid>/stat``, plus
this process's, pyarrow's threads included) and rows per CPU second: on a shared 2-core machine
the wall-clock figures move with the load (the header line prints it before and after), the CPU
cost per row much less.  ``sustained_per_cpu_s`` is the sustained rate if the ingest had one whole
core to itself: what it can keep up with on an idle core, and, divided by the share of a core it
gets, on a loaded one.

A rollup run reads the touched minutes' raw samples and, before them, up to
``lake.rollups.STALE_S`` of minute rows (5 per series): its cost stops growing after 20 rounds.

Scale-out (``--workers N``): the same ingest, the same rounds and rollups, with the driver on a
Spark standalone cluster started for the run from pyspark's installation - a master and N workers
of one core each on 127.0.0.1 (``bin/spark-class org.apache.spark.deploy.master.Master`` /
``...deploy.worker.Worker``, as tests/lake_connect/test_connect_standalone.py starts them; master
port ``--cluster-port``, default 17177, its web UI on 18281 and the workers' on 18282 up) - in a
classic session whose master is ``spark://127.0.0.1:17177`` (the ingest's documented path on a
cluster: ``KBOT_SPARK_MASTER=spark://...`` for ``kbot lake collect --ingest-every``; the lake's
ingest does not write through Connect).  The CPU figures then add the executors' JVMs (and the
master's and workers' daemons) to the driver's; before the driver stops, the run checks on the
master's JSON status (``/json/``) that the application holds one core on every worker, and on the
driver's own status store and the workers' that every worker's executor ran tasks.  Master and
workers are stopped at the end, also after an error, Ctrl-C or SIGTERM.

Usage::

    .venv/bin/python scripts/bench_ingest.py [--brokers 100] [--series 10000] [--rounds 4] [--json F]
    .venv/bin/python scripts/bench_ingest.py --workers 2 [--executor-memory 2g] [...]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from kbot_settings import load as load_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCRAPE_S = 15
UTC = dt.timezone.utc
#: the standalone cluster's master port (its web UI: + 1104, the workers' after it); below 32768
#: (Linux's ephemeral ports start there) and apart from the tests' (17077, 18181-18182)
CLUSTER_PORT = 17177
APP_NAME = "kbot-bench-ingest"


def round_rows(r: int, brokers: int, series: int, t0: dt.datetime):
    """One scrape round: per broker, ``series`` partition series (LogEndOffset and Size of
    series/2 partitions, as the JMX exporter reports them), values growing round by round."""
    ts = int((t0 + dt.timedelta(seconds=SCRAPE_S * r)).timestamp() * 1_000_000)
    parts = max(1, series // 2)
    for b in range(1, brokers + 1):
        for p in range(parts):
            topic, partition = f"topic-{p // 100:03d}", p % 100
            base = {"ts": ts, "cluster": "bench", "broker": b, "topic": topic, "partition": partition, "labels": None}
            yield {**base, "metric": "LogEndOffset", "value": float(r * 150 + p)}
            yield {**base, "metric": "Size", "value": float((r * 150 + p) * 1024)}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _http_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers (1 core and ``memory`` each) on
    127.0.0.1, started from pyspark's installation, each daemon in a process group of its own;
    ``stop`` ends them all (the workers first, their executors with them)."""

    def __init__(self, workers: int, home: Path, port: int = CLUSTER_PORT, memory: str = "2g") -> None:
        self.workers, self.home, self.port, self.memory = workers, home, port, memory
        self.ui_port = port + 1104  # 18281 for 17177
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def worker_ui(self, i: int) -> int:
        return self.ui_port + 1 + i

    def status(self) -> dict:
        """The master's JSON status (workers, their cores used, the applications)."""
        return _http_json(f"http://127.0.0.1:{self.ui_port}/json/")

    def worker_status(self, i: int) -> dict:
        """Worker ``i``'s JSON status (its executors, by application)."""
        return _http_json(f"http://127.0.0.1:{self.worker_ui(i)}/json/")

    def start(self, timeout: float = 240.0) -> None:
        from lake.connect import port_open, spark_home

        busy = [
            p for p in [self.port, self.ui_port, *map(self.worker_ui, range(self.workers))] if port_open("127.0.0.1", p)
        ]
        if busy:
            raise RuntimeError(f"port(s) {busy} on 127.0.0.1 already in use: choose another --cluster-port")
        self.home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "KBOT_SPARK_MASTER")}
        env.update(
            {
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "384m",
                "SPARK_NO_DAEMONIZE": "1",
                "SPARK_LOCAL_DIRS": str(self.home / "local"),  # the executors' scratch space
            }
        )
        spark_class = str(spark_home() / "bin" / "spark-class")
        daemons = [
            (
                "master",
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port)]
                + ["--webui-port", str(self.ui_port)],
            ),
        ]
        for i in range(self.workers):
            daemons.append(
                (
                    f"worker-{i + 1}",
                    ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "1"]
                    + ["--memory", self.memory, "--webui-port", str(self.worker_ui(i))]
                    + ["--work-dir", str(self.home / f"work-{i + 1}")],
                )
            )
        for name, args in daemons:
            with open(self.home / f"{name}.log", "w") as log:
                self.procs[name] = subprocess.Popen(
                    [spark_class, *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                )
        deadline = time.monotonic() + timeout
        while True:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited (code {p.returncode}); log {self.home / name}.log")
            with contextlib.suppress(OSError, ValueError):  # the UI not up yet, a half-written answer
                alive = [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) == self.workers:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.workers} worker(s) did not register with the master within {timeout:.0f} s")
            time.sleep(0.5)

    def worker_pids(self) -> list[int]:
        return [p.pid for name, p in self.procs.items() if name.startswith("worker-")]

    def executor_pids(self) -> dict[int, list[int]]:
        """Worker index -> the executor JVMs it runs (its descendants)."""
        return {i: descendants(pid) for i, pid in enumerate(self.worker_pids())}

    def daemon_pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    def stop(self) -> None:
        """SIGTERM every daemon's process group (workers first: a worker's executors are in its
        group), SIGKILL what is left after 30 s."""
        for p in reversed(list(self.procs.values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for p in reversed(list(self.procs.values())):
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        self.procs.clear()


def wait_executors(cluster: StandaloneCluster, app_id: str, timeout: float = 180.0) -> dict[int, list[int]]:
    """Wait until the master gives the application a core on every worker and each worker runs
    its executor; worker index -> executor pids."""
    deadline = time.monotonic() + timeout
    while True:
        execs = cluster.executor_pids()
        with contextlib.suppress(OSError, ValueError):
            apps = [a for a in cluster.status().get("activeapps", []) if a.get("id") == app_id]
            if apps and apps[0].get("cores") == cluster.workers and all(execs.values()):
                return execs
        if time.monotonic() > deadline:
            raise RuntimeError(f"the application did not get an executor on each of {cluster.workers} workers: {execs}")
        time.sleep(0.5)


def executor_tasks(spark) -> dict[str, int]:
    """Executor id -> tasks it has finished, from the driver's status store (kept with the UI off)."""
    store = spark.sparkContext._jsc.sc().statusStore().executorList(True)
    return {str(store.apply(i).id()): int(store.apply(i).totalTasks()) for i in range(store.size())}


def executors_ran(spark, cluster: StandaloneCluster, tasks_before: dict[str, int]) -> dict:
    """Where the application's executors are and how many tasks each ran since ``tasks_before``:
    the master's JSON (the application's cores, the cores used on each worker), each worker's JSON
    (its executor ids for the application) and the driver's status store (tasks per executor id).
    Raises when a worker holds no executor of the application or its executor ran no task."""
    app_id = spark.sparkContext.applicationId
    master = cluster.status()
    apps = [a for a in master.get("activeapps", []) if a.get("id") == app_id]
    if not apps:
        raise RuntimeError(f"the master does not list the application {app_id}: {master.get('activeapps')}")
    tasks = executor_tasks(spark)
    by_id = {w.get("id"): w for w in master.get("workers", [])}
    workers = []
    for i in range(cluster.workers):
        ws = cluster.worker_status(i)
        ids = [str(e.get("id")) for e in ws.get("executors", []) if e.get("appid") == app_id]
        ran = sum(tasks.get(x, 0) - tasks_before.get(x, 0) for x in ids)
        cores_used = by_id.get(ws.get("id"), {}).get("coresused")
        if not ids or ran == 0 or cores_used != 1:
            raise RuntimeError(
                f"worker {i + 1} ({ws.get('id')}): executors {ids} of {app_id}, {ran} tasks, "
                f"{cores_used} core(s) used by the master's status: it did not take its share"
            )
        workers.append({"worker": ws.get("id"), "cores_used": cores_used, "executors": ids, "tasks": ran})
    return {"app": app_id, "app_cores": apps[0].get("cores"), "workers": workers}


class CpuClock:
    """CPU seconds (user + system) of this process and of the Spark JVM it started (a classic
    master: the JVM is this process' child, which ``os.times`` counts only once it has exited),
    and of ``others`` (a standalone cluster's executors and daemons: live processes, by pid)."""

    def __init__(self, spark, others: list[int] | None = None) -> None:
        self.others = list(others or [])
        self.jvm_stat: Path | None = None
        try:
            pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
            self.jvm_stat = Path(f"/proc/{pid}/stat")
            self.jvm_stat.read_text()
        except Exception:  # noqa: BLE001 - Spark Connect, or no /proc: the JVM is not counted
            self.jvm_stat = None
        self.tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        t = os.times()
        total = t.user + t.system
        if self.jvm_stat is not None:
            fields = self.jvm_stat.read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime
        return total + sum(proc_cpu_s(p) for p in self.others)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--brokers", type=int, default=100)
    ap.add_argument("--series", type=int, default=10_000, help="series per broker and round (default 10,000)")
    ap.add_argument("--rounds", type=int, default=4, help="scrape rounds, one landing file and batch each")
    ap.add_argument("--rollup-every", type=int, default=4, help="rounds between rollup runs (default 4: 60 s)")
    ap.add_argument(
        "--files-per-batch",
        type=int,
        default=1,
        help="landing files per commit (default 1: keeping up; more: an ingest that is behind takes what waits)",
    )
    ap.add_argument("--master", default=None, help="Spark master (default local[1]: one core)")
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="start a Spark standalone master and this many workers (1 core each) on 127.0.0.1 and ingest "
        "with the driver on that cluster (default 0: no cluster, --master)",
    )
    ap.add_argument(
        "--cluster-port",
        type=int,
        default=CLUSTER_PORT,
        help=f"the standalone master's port (default {CLUSTER_PORT}); its web UI is on port + 1104, "
        "the workers' on the ports after it",
    )
    ap.add_argument("--executor-memory", default="2g", help="each worker's memory and executor's heap (default 2g)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--root", help="work directory (default: a new temporary one, removed after)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    if min(a.brokers, a.series, a.rounds, a.rollup_every, a.files_per_batch) < 1:
        ap.error("--brokers, --series, --rounds, --rollup-every and --files-per-batch must be >= 1")
    if a.workers < 0:
        ap.error("--workers must be >= 0")
    if a.workers and a.master is not None:
        ap.error("--workers starts its own cluster and sets the master: leave out --master")
    if not 1024 <= a.cluster_port <= 65535 - 1105 - a.workers:
        ap.error("--cluster-port: a port from 1024 that leaves room for the web UIs above it (+ 1104 ...)")
    if a.master is None:
        a.master = "local[1]"
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: through the finally blocks that stop Spark and the cluster
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    from lake.ingest import Ingestor, IngestReport, LakeLayout, scan_landing_file
    from lake.landing import write_landing_file
    from lake.spark import build_session
    from tools.machine import cpu_model

    root = Path(a.root or tempfile.mkdtemp(prefix="kbot-bench-ingest-"))
    shutil.rmtree(root / "lake", ignore_errors=True)
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(root / "lake"))
    layout.make_dirs()
    t0 = dt.datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    per_round = a.brokers * max(1, a.series // 2) * 2
    out: dict = {
        "machine": {"cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)), "cpu": cpu_model()},
        "scale": {"brokers": a.brokers, "series": a.series, "rounds": a.rounds, "rows_per_round": per_round},
        "rollup_every_rounds": a.rollup_every,
        "files_per_batch": a.files_per_batch,
        "master": a.master,
        "workers": a.workers,
        "needed_rows_per_s": round(per_round / SCRAPE_S),
    }
    print(f"generating {a.rounds} rounds of {per_round:,} rows ...", file=sys.stderr, flush=True)
    g0 = time.perf_counter()
    files = [
        write_landing_file(layout.landing, round_rows(r, a.brokers, a.series, t0), f"round-{r:04d}.jsonl")
        for r in range(a.rounds)
    ]
    out["generate_s"] = round(time.perf_counter() - g0, 1)
    out["landing_mb"] = round(sum(f.stat().st_size for f in files) / 1e6, 1)

    v0, vc0 = time.perf_counter(), os.times()
    checked = sum(scan_landing_file(f)[0] for f in files)
    validate_s = time.perf_counter() - v0
    vc1 = os.times()
    validate_cpu = (vc1.user + vc1.system) - (vc0.user + vc0.system)

    cluster = (
        StandaloneCluster(a.workers, root / "spark-cluster", a.cluster_port, a.executor_memory) if a.workers else None
    )
    conf = {"spark.driver.memory": a.driver_memory}
    try:
        if cluster is not None:
            print(f"starting a Spark standalone master and {a.workers} worker(s) ...", file=sys.stderr, flush=True)
            os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver binds where the daemons do
            cluster.start()
            out["master"] = cluster.url
            conf.update(
                {
                    "spark.executor.cores": "1",
                    "spark.cores.max": str(a.workers),
                    "spark.executor.memory": a.executor_memory,
                    "spark.local.dir": str(root / "spark-local"),
                }
            )
        spark = build_session(out["master"], app_name=APP_NAME, conf=conf)
        try:
            ingestor = Ingestor(spark, layout, max_files=a.files_per_batch, rollup_every_s=3600.0)
            # warm-up, not timed: the JVM's code paths, the table's creation, a first rollup (one
            # small round an hour before the timed ones, its rollups flushed)
            held = layout.state_dir / "held"
            held.mkdir(exist_ok=True)
            for f in files:
                os.replace(f, held / f.name)
            write_landing_file(layout.landing, round_rows(-240, 2, 100, t0), "warm-up.jsonl")
            ingestor.run(rollups=False)
            ingestor.flush_rollups()
            executors: dict[int, list[int]] = {}
            if cluster is not None:
                executors = wait_executors(cluster, spark.sparkContext.applicationId)
                tasks0 = executor_tasks(spark)
            exec_pids = [p for pids in executors.values() for p in pids]
            cpu = CpuClock(spark, exec_pids + (cluster.daemon_pids() if cluster else []))
            exec_cpu0 = {i: sum(map(proc_cpu_s, pids)) for i, pids in executors.items()}
            out["load_before"] = load()
            commit_s, commit_cpu, rollup_runs, rollup_cpu, batches = 0.0, 0.0, [], 0.0, []
            for i, f in enumerate(files):
                os.replace(held / f.name, f)
                if (i + 1) % a.files_per_batch == 0 or i == len(files) - 1:
                    c0, cc0 = time.perf_counter(), cpu()
                    batches += ingestor.run(rollups=False).batches
                    commit_s += time.perf_counter() - c0
                    commit_cpu += cpu() - cc0
                if (i + 1) % a.rollup_every == 0 or i == len(files) - 1:
                    r0, rc0 = time.perf_counter(), cpu()
                    ingestor.flush_rollups(final=False)  # as kbot run's rollup thread
                    rollup_runs.append(time.perf_counter() - r0)
                    rollup_cpu += cpu() - rc0
            rollup_s = sum(rollup_runs)
            # the hour row, written once an hour has closed: timed here on the minutes so far and
            # scaled to a whole hour below
            h0, hc0 = time.perf_counter(), cpu()
            ingestor.flush_rollups(final=True)
            close_s = time.perf_counter() - h0
            close_cpu = cpu() - hc0
            out["load_after"] = load()
            if cluster is not None:
                exec_cpu = {i: sum(map(proc_cpu_s, pids)) - exec_cpu0[i] for i, pids in executors.items()}
                if cluster.executor_pids() != executors:
                    print(
                        f"the executors changed during the run: {executors} -> {cluster.executor_pids()}",
                        file=sys.stderr,
                    )
                    return 1
                ran = executors_ran(spark, cluster, tasks0)  # raises unless every worker's executor ran tasks
                for i, w in enumerate(ran["workers"]):
                    w["executor_cpu_s"] = round(exec_cpu[i], 2)
                total_cpu = commit_cpu + rollup_cpu + close_cpu
                ran["executors_cpu_s"] = round(sum(exec_cpu.values()), 2)
                ran["driver_and_bench_cpu_s"] = round(total_cpu - sum(exec_cpu.values()), 2)  # the daemons' too
                out["cluster"] = ran
        finally:
            spark.stop()
    finally:
        if cluster is not None:
            cluster.stop()
    report = IngestReport(batches)
    rows = report.rows
    if rows != checked or rows != per_round * a.rounds:
        print(f"ingested {rows:,} rows, expected {per_round * a.rounds:,}", file=sys.stderr)
        return 1
    out["rows"] = rows
    out["batches"] = [round(b.seconds, 2) for b in report.batches]
    out["validate"] = {
        "seconds": round(validate_s, 2),
        "rows_per_s": round(rows / validate_s),
        "cpu_s": round(validate_cpu, 2),
        "rows_per_cpu_s": round(rows / max(validate_cpu, 1e-9)),
    }
    out["commit"] = {
        "seconds": round(commit_s, 2),
        "rows_per_s": round(rows / commit_s),
        "cpu_s": round(commit_cpu, 2),
        "rows_per_cpu_s": round(rows / max(commit_cpu, 1e-9)),
    }
    out["rollups"] = {
        "seconds": round(rollup_s, 2),
        "rows_per_s": round(rows / rollup_s),
        "cpu_s": round(rollup_cpu, 2),
        "rows_per_cpu_s": round(rows / max(rollup_cpu, 1e-9)),
        "runs": len(rollup_runs),
        "runs_s": [round(x, 2) for x in rollup_runs],
    }
    minutes = -(-a.rounds * SCRAPE_S // 60)
    minute_rows = per_round * minutes  # one row per series and minute
    close_per_round = close_s * (60 / minutes) / (3600 / SCRAPE_S)  # a full hour's, spread over its rounds
    out["hour_close"] = {
        "seconds": round(close_s, 2),
        "minute_rows": minute_rows,
        "rows_per_s": round(minute_rows / close_s),
        "full_hour_s": round(close_s * 60 / minutes, 1),
        "per_round_s": round(close_per_round, 2),
        "cpu_s": round(close_cpu, 2),
    }
    sustained = rows / (commit_s + rollup_s + close_per_round * a.rounds)
    out["sustained_rows_per_s"] = round(sustained)  # with each round's share of its hour's close
    out["ratio_to_needed"] = round(sustained / out["needed_rows_per_s"], 3)
    close_cpu_per_round = close_cpu * (60 / minutes) / (3600 / SCRAPE_S)
    sustained_cpu = rows / (commit_cpu + rollup_cpu + close_cpu_per_round * a.rounds)
    out["sustained_per_cpu_s"] = round(sustained_cpu)
    if not a.root:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"ingest of {a.rounds} rounds x {per_round:,} rows ({a.brokers} brokers x {a.series:,} series, "
        f"{a.files_per_batch} landing file(s) per commit, "
        f"{out['landing_mb']} MB of landing files), Spark {out['master']}"
        + (f" ({a.workers} workers x 1 core)" if a.workers else "")
        + f", {len(os.sched_getaffinity(0))} of {os.cpu_count()} cores ({cpu_model()}), "
        f"load {out['load_before']} -> {out['load_after']}"
    )
    for phase in ("validate", "commit", "rollups"):
        print(
            f"  {phase:9s} {out[phase]['seconds']:8.2f} s  {out[phase]['rows_per_s']:>10,} rows/s   "
            f"{out[phase]['cpu_s']:8.2f} CPU s  {out[phase]['rows_per_cpu_s']:>10,} rows per CPU s"
        )
    print(
        f"  batches   {min(out['batches'])}-{max(out['batches'])} s each (a round arrives every {SCRAPE_S} s); "
        f"rollup runs {out['rollups']['runs_s']} s"
    )
    print(
        f"  hour row  {close_s:8.2f} s for {minutes} minute(s) of minute rows: a full hour's "
        f"{out['hour_close']['full_hour_s']} s once an hour, {close_per_round:.2f} s a round"
    )
    print(
        f"  sustained {sustained:,.0f} rows/s against {out['needed_rows_per_s']:,} needed "
        f"({out['ratio_to_needed']:.2f}x); {sustained_cpu:,.0f} rows per CPU second"
    )
    if "cluster" in out:
        c = out["cluster"]
        print(
            f"  cluster   {a.workers} workers: "
            + ", ".join(
                f"#{i + 1} {w['tasks']} tasks in {w['executor_cpu_s']} CPU s" for i, w in enumerate(c["workers"])
            )
            + f" (its executor, a core each on the master's status); driver, bench and daemons "
            f"{c['driver_and_bench_cpu_s']} CPU s"
        )
        print(
            f"  note      the workers share this machine's {os.cpu_count()} cores with the driver: "
            "a scale-out figure only on separate nodes (docs/lake-ingest.md)"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
