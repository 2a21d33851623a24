"""End to end with a real Prometheus (the Debian binary) scraping the real local cluster's
exporters: the collector in ``prometheus`` mode lands rows through ``query_range``, ingest puts
them in the Delta lake, and a lake query sees every node's series.  Then Prometheus is stopped
from outside (SIGTERM), the collector reports it in one line and keeps going, Prometheus is
started again, and the next round catches up: the lake holds exactly the points Prometheus
answers for the whole span, none missing, none twice.

Conditions are awaited with generous deadlines (a loaded 2-core machine stretches everything);
there are no fixed sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
import urllib.parse
import urllib.request
import uuid

import pytest
from promkit import SCRAPE_S
from waiting import async_wait_until

from kbot_settings import load as load_settings
from lake.collector import Collector
from lake.ingest import ContinuousIngest, Ingestor, LakeLayout
from lake.prometheus_source import PrometheusSource
from lake.service import LakeService

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

CLUSTER = "pytest-prom"


def collector_alive(running: asyncio.Task):
    """A wait's check: stop waiting when the collector died, and show why."""

    def check() -> None:
        if running.done():
            running.result()  # the collector's own exception
            raise AssertionError("the collector stopped while waiting")

    return check


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    """``count`` acks=all records from a separate client."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        p.produce(topic, value=f"m{i}".encode(), partition=partition)
    assert p.flush(30) == 0, f"could not produce to {topic}-{partition}"


def source(stack, layout: LakeLayout, **kw) -> PrometheusSource:
    # settle one scrape timeout + 1 s: every scrape started at or before an instant is stored
    # by then, so the instant's value never changes after the collector read it
    return PrometheusSource(
        stack.prometheus_url,
        layout.state_dir,
        CLUSTER,
        step_s=SCRAPE_S,
        timeout_s=10.0,
        settle_s=SCRAPE_S + 1,
        backfill_s=3 * SCRAPE_S,
        **kw,
    )


def lake_rows(spark, layout: LakeLayout, metric: str):
    from pyspark.sql import functions as F

    lake = LakeService(layout.table, cluster=CLUSTER, spark=spark, query_timeout_s=180, warm=False).start()

    def q(view):
        df = view.all(CLUSTER).filter(F.col("metric") == F.lit(metric)).withColumn("ts_us", F.unix_micros("ts"))
        return [r.asDict() for r in df.collect()]

    return asyncio.run(lake.query(q))


async def test_prometheus_mode_lands_every_nodes_series_in_the_lake(
    kafka_cluster, prometheus_stack, spark, tmp_path, caplog
):
    topic = f"prom-lake-{uuid.uuid4().hex[:6]}"
    await asyncio.to_thread(kafka_cluster.faults.create_topic, topic, 1, 3)
    produced = 7
    await asyncio.to_thread(produce, kafka_cluster.bootstrap_servers, topic, 0, produced)

    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    collector = Collector(
        [],
        layout.landing,
        CLUSTER,
        interval_s=SCRAPE_S,
        source="prometheus",
        prometheus=source(prometheus_stack, layout),
    )
    follower = ContinuousIngest(Ingestor(spark, layout, rollup_every_s=30.0)).start()
    rounds: list = []

    def on_round(report) -> None:
        rounds.append(report)
        follower.notify()

    stop = asyncio.Event()
    collecting = asyncio.create_task(collector.run(stop=stop, on_round=on_round))
    nodes = set(kafka_cluster.metrics_urls)

    seen: dict = {}

    def lake_has_everything() -> bool:
        if not follower.runs:
            return False
        leo = lake_rows(spark, layout, "LogEndOffset")
        brokers_with_urp = {r["broker"] for r in lake_rows(spark, layout, "UnderReplicatedPartitions")}
        replicas = {r["broker"] for r in leo if r["topic"] == topic and r["value"] == produced}
        seen.update(urp=sorted(brokers_with_urp), leo={(r["broker"], r["value"]) for r in leo if r["topic"] == topic})
        return brokers_with_urp >= set(kafka_cluster.brokers) and len(replicas) == 3

    def state() -> str:
        return (
            f"(ingest runs {follower.runs}, last error {follower.last_error}; lake: {seen}; "
            f"last rounds: {[r.summary() for r in rounds[-2:]]})"
        )

    try:
        # Prometheus needs a scrape or two first; the rows then reach the lake through ingest
        await async_wait_until(
            lambda: any(r.prometheus and r.prometheus.brokers == nodes for r in rounds),
            180,
            f"a round with every node's series ({sorted(nodes)})",
            interval=0.5,
            check=collector_alive(collecting),
        )
        await async_wait_until(
            lambda: asyncio.to_thread(lake_has_everything),  # Spark reads: off the event loop
            600,  # at load ~19 no ingest had finished after 300 s
            f"the lake to hold every broker's URP and the 3 replicas' LogEndOffset {produced} of {topic}",
            interval=0.5,
            check=collector_alive(collecting),
            detail=state,
        )
    finally:
        stop.set()
        await collecting
        await asyncio.to_thread(follower.stop)
    assert follower.last_error is None
    # the controller's own series come through too (node 1: KRaft controller metrics)
    active = await asyncio.to_thread(lake_rows, spark, layout, "ActiveControllerCount")
    controllers = {r["broker"] for r in active if r["value"] == 1}
    assert controllers == set(kafka_cluster.controllers)
    # Prometheus's target labels are not the exporter's: they stay out of the rows' labels
    urp = await asyncio.to_thread(lake_rows, spark, layout, "UnderReplicatedPartitions")
    assert urp and all(r["labels"] in (None, {}) for r in urp)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "collector round" in r.getMessage()]

    # a URL that is not Prometheus's API (here: a path prefix it does not serve) is an HTTP error
    # in one line, nothing written
    bad = PrometheusSource(
        prometheus_stack.prometheus_url + "/no-such-prefix", tmp_path / "bad", CLUSTER, step_s=SCRAPE_S
    )
    report = await Collector(
        [], tmp_path / "bad" / "landing", CLUSTER, interval_s=SCRAPE_S, source="prometheus", prometheus=bad
    ).collect_once()
    assert report.error is not None and "answered HTTP 404" in report.error and report.rows == 0
    assert "\n" not in report.summary() and not (tmp_path / "bad" / "landing").exists()

    # the digest's trends say how old the lake's data is: its newest instant, and the age at the
    # digest's clock (35 s after it)
    from commands.digest import _lake
    from framework.context import Context

    newest = max(r.prometheus.windows[-1][1] for r in rounds if r.prometheus and r.prometheus.rows)
    lake = LakeService(layout.table, cluster=CLUSTER, spark=spark, query_timeout_s=180, warm=False).start()
    part = await _lake(Context(lake=lake, clock=lambda: newest + 35), CLUSTER, 1)
    hms = time.strftime("%H:%M:%S", time.gmtime(newest))
    assert part.section.heading == f"Trends, last 1 h (metric lake; lake data to {hms} UTC, 35 s old)"
    assert [(e.label, e.status) for e in part.evidence] == [("Metric lake data", "ok")]


def prometheus_points(url: str, query: str, first: float, last: float, step: float) -> dict:
    """What Prometheus itself answers for ``query`` over [first, last]: (broker, ts_ms) -> value."""
    body = urllib.parse.urlencode(
        {"query": query, "start": f"{first:.3f}", "end": f"{last:.3f}", "step": f"{step:g}s"}
    ).encode()
    with urllib.request.urlopen(f"{url}/api/v1/query_range", data=body, timeout=60) as resp:
        doc = json.load(resp)
    out = {}
    for series in doc["data"]["result"]:
        broker = int(series["metric"]["node_id"])
        for ts, value in series["values"]:
            out[(broker, int(round(float(ts) * 1000)))] = float(value)
    return out


async def test_prometheus_down_gives_one_line_and_the_next_round_catches_up(
    kafka_cluster, prometheus_stack, spark, tmp_path, caplog
):
    caplog.set_level(logging.WARNING, logger="lake.collector")
    layout = LakeLayout.from_settings(load_settings({}), lake_dir=str(tmp_path / "lake"))
    collector = Collector(
        [],
        layout.landing,
        CLUSTER,
        interval_s=SCRAPE_S,
        source="prometheus",
        prometheus=source(prometheus_stack, layout),
    )
    rounds: list = []
    stop = asyncio.Event()
    collecting = asyncio.create_task(collector.run(stop=stop, on_round=rounds.append))

    def ok_rounds() -> list:
        return [r for r in rounds if r.prometheus and r.prometheus.rows and not r.error]

    try:
        await async_wait_until(
            lambda: len(ok_rounds()) >= 2, 180, "two rounds with rows", interval=0.5, check=collector_alive(collecting)
        )

        # Prometheus goes away: a signal from outside, as an operator's restart would
        proc = prometheus_stack.procs["prometheus"]
        os.kill(proc.pid, signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 60)
        failed_from = len(rounds)
        await async_wait_until(
            lambda: any(r.error for r in rounds[failed_from:]),
            120,
            "a round that reports Prometheus down",
            interval=0.5,
            check=collector_alive(collecting),
        )
        failed = next(r for r in rounds[failed_from:] if r.error)
        # and another failing round: the collector keeps going, state unchanged
        await async_wait_until(
            lambda: sum(1 for r in rounds[failed_from:] if r.error) >= 2,
            120,
            "a second failed round",
            interval=0.5,
            check=collector_alive(collecting),
        )

        # back again: same port, same data folder (the launcher keeps both)
        await asyncio.to_thread(prometheus_stack.stop)
        await asyncio.to_thread(prometheus_stack.start, 120)
        back_from = len(rounds)
        restart_at = time.time()
        await async_wait_until(
            lambda: any(
                r.prometheus and r.prometheus.windows and r.prometheus.windows[-1][1] > restart_at and not r.error
                for r in rounds[back_from:]
            ),
            180,
            "a round past the restart",
            interval=0.5,
            check=collector_alive(collecting),
        )
        await async_wait_until(
            lambda: len([r for r in rounds[back_from:] if r.prometheus.rows]) >= 2,
            120,
            "two more rounds with rows",
            interval=0.5,
            check=collector_alive(collecting),
        )
    finally:
        stop.set()
        await collecting

    # the clear line: one warning per failed round, naming Prometheus and the retry, no traceback
    down = [r for r in caplog.records if "collector round" in r.getMessage() and "prometheus" in r.getMessage()]
    assert down and all(r.exc_info is None and "\n" not in r.getMessage() for r in down)
    assert "cannot reach" in failed.error and prometheus_stack.prometheus_url in failed.error
    assert "retrying from" in down[0].getMessage()

    # the windows fetched are contiguous: each starts one step after the last one ended
    windows = [w for r in rounds if r.prometheus for w in r.prometheus.windows]
    assert all(b[0] == a[1] + SCRAPE_S for a, b in zip(windows, windows[1:])), windows

    report = await asyncio.to_thread(Ingestor(spark, layout).run)
    assert not report.quarantined and report.rows == sum(r.rows for r in rounds)

    # the lake holds exactly what Prometheus answers for the whole span: no gap, no duplicate
    first, last = windows[0][0], windows[-1][1]
    want = await asyncio.to_thread(
        prometheus_points,
        prometheus_stack.prometheus_url,
        "kafka_server_replicamanager_partitioncount",
        first,
        last,
        SCRAPE_S,
    )
    rows = await asyncio.to_thread(lake_rows, spark, layout, "PartitionCount")
    got: dict = {}
    for r in rows:
        key = (r["broker"], r["ts_us"] // 1000)
        assert key not in got, f"duplicate sample {key}"
        got[key] = r["value"]
    assert got == want
    # ... and the span across the outage has every broker at every instant Prometheus had them
    assert {b for b, _ in got} == set(kafka_cluster.brokers)
