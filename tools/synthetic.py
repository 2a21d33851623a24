"""Synthetic metric lake: realistic samples, with incidents, at any scale.

Writes the layout of ``lake.schema`` one UTC hour at a time: a Delta Lake table partitioned
``cluster=/date=/hour=`` with its 1-minute and 1-hour rollups (the default), or, with
``table_format="parquet"``, the bare ``cluster=/date=/hour=`` directories of Parquet the lake
used before Delta (kept for benchmarks and for reading old lakes).  Rows are computed by Spark from
``spark.range``: each row's value is a closed-form function of (partition,
replica, time) plus hash-based noise, so there is no state to carry between
rows, no Python per row, and generation scales with the cores (the venv has
no numpy/pandas/pyarrow, and would not need them).  Values are deterministic
for a given ``seed`` whatever the partitioning.

The model
---------
* Brokers ``1..brokers``; topics ``topic-000``...; replica ``i`` of partition
  ``p`` of topic ``k`` is on broker ``(k + p + i) % brokers + 1``; replica 0
  is the preferred leader; the leader is the first live replica.
* Each partition has a base write rate (records/s) with a diurnal swing
  (lowest at 00:00 UTC, highest at 12:00).  ``LogEndOffset`` is its integral
  since 2020-01-01 (so consecutive runs continue each other); followers trail
  the leader by up to half a second of records.  ``Size`` is the bytes of the
  records still retained (7 days, deleted a segment (1 h) at a time), so it
  grows at the write rate and drops when a segment is deleted.
* Counters (``IsrShrinksPerSec``, ``IsrExpandsPerSec``) are cumulative since
  the broker process started, so a broker that comes back from a loss
  restarts them from 0.  A healthy cluster has no ISR churn: the counters
  only move during incidents.
* Every 4th topic is transactional: its ``LastStableOffsetLag`` jitters a
  little; others report 0.
* Each topic has one consumer group ``<topic>-consumers`` committing every
  sample; lag is 0..5 s worth of records (so Burrow sees it at 0 now and then).
* The active controller is the lowest live broker id.

Incidents (``incidents=[...]``)
-------------------------------
* ``broker_loss(broker, at, duration)``: the broker sends nothing; every
  partition with a replica on it is under-replicated on its (new) leader, a
  constant count (flat URP), at min ISR with RF 3 / min.insync 2; leaders
  record one ISR shrink per such partition; the controller reports
  ``OfflineReplicaCount``; after it returns, followers catch up over
  ``catchup`` seconds, URP ramps down and the leaders record the expands.
* ``slow_follower(broker, at, duration)``: leaders of partitions it follows
  report a URP that jumps around (fluctuating), with as many expands as
  shrinks; the slow broker itself keeps shrinking the ISRs it leads and never
  expands them (shrinks without expands); its follower replicas trail by up
  to 30 s of records; its handler idle drops to ~0.45.
* ``hot_key(topic, partition, at, duration, factor=20)``: one partition
  written ``factor`` times as fast; its leader's handler idle drops to ~0.2
  (saturated) and its Produce queue time rises.
* ``hanging_transaction(topic, partition, at, late_after=900, duration=None)``:
  the LSO stops at ``at``, so ``LastStableOffsetLag`` grows with the log; after
  ``late_after`` seconds (transaction.max.timeout.ms, 15 min) the leader
  reports ``PartitionsWithLateTransactionsCount`` = 1.
* ``rebalance_storm(group, at, duration)``: the group keeps committing the same
  offset for the first half (stall), then commits an offset a minute older
  (rewind) for the second half; its lag grows throughout; afterwards it
  catches up at 3x the write rate.

CLI::

    python -m tools.synthetic --out /tmp/lake --hours 24 --partitions 3000 \\
        --incident broker_loss:broker=2,at=2024-05-01T10:00,duration=30m
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import delta
from lake.rollups import hour_minutes, update_rollups
from lake.schema import (
    DATA_COLUMNS,
    LABEL_GROUP,
    LABEL_QUANTILE,
    LABEL_REQUEST,
    PARTITION_COLUMNS,
    partition_path,
    to_utc,
)
from lake.spark import build_session

ORIGIN = 1_577_836_800  # 2020-01-01T00:00:00Z: offsets and counters count from here
DAY = 86_400
DIURNAL = 0.3  # +-30% around the mean rate over the day
RETENTION_S = 7 * DAY
SEGMENT_S = 3_600
MIN_INSYNC = 2

BROKER_METRICS = (
    "UnderReplicatedPartitions",
    "IsrShrinksPerSec",
    "IsrExpandsPerSec",
    "UnderMinIsrPartitionCount",
    "AtMinIsrPartitionCount",
    "OfflinePartitionsCount",
    "OfflineReplicaCount",
    "ActiveControllerCount",
    "RequestHandlerAvgIdlePercent",
    "RequestQueueTimeMs",
    "PartitionsWithLateTransactionsCount",
)
REPLICA_METRICS = ("LogEndOffset", "Size")
PARTITION_METRICS = ("LastStableOffsetLag",)
CONSUMER_METRICS = ("CommittedOffset", "ConsumerLag")
ALL_METRICS = BROKER_METRICS + REPLICA_METRICS + PARTITION_METRICS + CONSUMER_METRICS

REQUEST_TYPES = {"Produce": 0.5, "FetchConsumer": 0.3, "FetchFollower": 0.2, "Metadata": 0.1, "OffsetCommit": 0.3}
QUANTILES = {"0.50": 1.0, "0.99": 8.0}

ROWS_PER_TASK = 2_000_000  # Spark partitions per hour job: about this many rows each


# --------------------------------------------------------------------------- incidents


def _seconds(d: _dt.timedelta | float | int | str) -> float:
    """timedelta, seconds, or '90s' / '30m' / '2h' / '1d' -> seconds."""
    if isinstance(d, _dt.timedelta):
        return d.total_seconds()
    if isinstance(d, str):
        units = {"s": 1, "m": 60, "h": 3600, "d": DAY}
        if d and d[-1] in units:
            return float(d[:-1]) * units[d[-1]]
        return float(d)
    return float(d)


def _epoch(ts: _dt.datetime | str) -> float:
    return to_utc(ts).timestamp()


@dataclass(frozen=True)
class BrokerLoss:
    broker: int
    start: float
    end: float
    catchup_s: float = 120.0


@dataclass(frozen=True)
class SlowFollower:
    broker: int
    start: float
    end: float


@dataclass(frozen=True)
class HotKey:
    topic: str
    partition: int
    start: float
    end: float
    factor: float = 20.0


@dataclass(frozen=True)
class HangingTransaction:
    topic: str
    partition: int
    start: float
    late_after_s: float = 900.0
    end: float = math.inf


@dataclass(frozen=True)
class RebalanceStorm:
    group: str
    start: float
    end: float


def broker_loss(broker: int, at, duration, catchup=120) -> BrokerLoss:
    s = _epoch(at)
    return BrokerLoss(int(broker), s, s + _seconds(duration), _seconds(catchup))


def slow_follower(broker: int, at, duration) -> SlowFollower:
    s = _epoch(at)
    return SlowFollower(int(broker), s, s + _seconds(duration))


def hot_key(topic: str, partition: int, at, duration, factor: float = 20.0) -> HotKey:
    s = _epoch(at)
    return HotKey(topic, int(partition), s, s + _seconds(duration), float(factor))


def hanging_transaction(topic: str, partition: int, at, late_after=900, duration=None) -> HangingTransaction:
    s = _epoch(at)
    end = math.inf if duration is None else s + _seconds(duration)
    return HangingTransaction(topic, int(partition), s, _seconds(late_after), end)


def rebalance_storm(group: str, at, duration) -> RebalanceStorm:
    s = _epoch(at)
    return RebalanceStorm(group, s, s + _seconds(duration))


Incident = BrokerLoss | SlowFollower | HotKey | HangingTransaction | RebalanceStorm


# --------------------------------------------------------------------------- topology


@dataclass
class Topology:
    brokers: int
    topics: list[str]
    partitions_per_topic: int
    rf: int = field(init=False)

    def __post_init__(self):
        if self.brokers < 1 or self.partitions_per_topic < 1 or not self.topics:
            raise ValueError("need at least one broker, topic and partition")
        self.rf = min(3, self.brokers)

    @property
    def partitions(self) -> int:
        return len(self.topics) * self.partitions_per_topic

    def replicas(self, k: int, part: int) -> list[int]:
        return [(k + part + i) % self.brokers + 1 for i in range(self.rf)]

    def all_partitions(self) -> Iterable[tuple[int, int, list[int]]]:
        for k in range(len(self.topics)):
            for part in range(self.partitions_per_topic):
                yield k, part, self.replicas(k, part)

    def topic_index(self, topic: str) -> int:
        try:
            return self.topics.index(topic)
        except ValueError:
            raise ValueError(f"unknown topic {topic!r}") from None

    def group_name(self, k: int) -> str:
        return f"{self.topics[k]}-consumers"


# --------------------------------------------------------------------------- expressions


def _clamp(x: Column, lo, hi) -> Column:
    return F.least(F.greatest(x, F.lit(lo)), F.lit(hi))


def _between(T: Column, start: float, end: float) -> Column:
    c = T >= F.lit(start)
    return c & (T < F.lit(end)) if math.isfinite(end) else c


def _lookup(values: Sequence[float], index: Column) -> Column:
    """values[index - 1] for index 1..len(values) (broker ids)."""
    return F.element_at(F.array(*[F.lit(float(v)) for v in values]), index)


class _Model:
    """Column expressions of the model for one generation run."""

    def __init__(self, topo: Topology, incidents: Sequence[Incident], seed: int, resolution_s: int):
        self.topo, self.seed, self.res = topo, int(seed), resolution_s
        self.losses = [i for i in incidents if isinstance(i, BrokerLoss)]
        self.slows = [i for i in incidents if isinstance(i, SlowFollower)]
        self.hots = [i for i in incidents if isinstance(i, HotKey)]
        self.hangs = [i for i in incidents if isinstance(i, HangingTransaction)]
        self.storms = [i for i in incidents if isinstance(i, RebalanceStorm)]
        for inc in self.losses + self.slows:
            if not 1 <= inc.broker <= topo.brokers:
                raise ValueError(f"{type(inc).__name__}: no broker {inc.broker}")
        for inc in self.hots + self.hangs:
            topo.topic_index(inc.topic)
            if not 0 <= inc.partition < topo.partitions_per_topic:
                raise ValueError(f"{type(inc).__name__}: no partition {inc.topic}-{inc.partition}")
        groups = {topo.group_name(k): k for k in range(len(topo.topics))}
        for inc in self.storms:
            if inc.group not in groups:
                raise ValueError(f"rebalance_storm: unknown group {inc.group!r} (groups are '<topic>-consumers')")
        self.group_topic = groups
        self._precompute()

    # ---- per-broker counts the broker-level metrics need (plain Python, once)
    def _precompute(self):
        B = self.topo.brokers
        self.loss_led = {}  # loss -> [partitions led by b during the outage that had a replica on the lost broker]
        self.loss_replicas = {}  # loss -> replicas hosted on the lost broker
        for loss in self.losses:
            led = [0] * B
            hosted = 0
            for _, _, reps in self.topo.all_partitions():
                if loss.broker in reps:
                    hosted += 1
                    survivors = [b for b in reps if b != loss.broker]
                    if survivors:
                        led[survivors[0] - 1] += 1
            self.loss_led[loss], self.loss_replicas[loss] = led, hosted
        self.slow_led = {}  # slow -> [partitions led by b that the slow broker follows]
        self.leads = [0] * B
        for _, _, reps in self.topo.all_partitions():
            self.leads[reps[0] - 1] += 1
        for slow in self.slows:
            led = [0] * B
            for _, _, reps in self.topo.all_partitions():
                if slow.broker in reps[1:]:
                    led[reps[0] - 1] += 1
            self.slow_led[slow] = led

    # ---- noise
    def u(self, salt: str, *cols: Column) -> Column:
        """Uniform [0, 1) from a hash of (seed, salt, cols): deterministic per row."""
        h = F.xxhash64(F.lit(self.seed), F.lit(salt), *cols)
        return F.pmod(h, F.lit(1 << 40)).cast("double") / F.lit(float(1 << 40))

    # ---- liveness and leadership
    def alive(self, broker: Column, T: Column) -> Column:
        dead = [(broker == F.lit(loss.broker)) & _between(T, loss.start, loss.end) for loss in self.losses]
        if not dead:
            return F.lit(True)
        any_dead = dead[0]
        for d in dead[1:]:
            any_dead = any_dead | d
        return ~any_dead

    def replica(self, k: Column, part: Column, i: int | Column) -> Column:
        i = F.lit(i) if isinstance(i, int) else i
        return (F.pmod(k + part + i, F.lit(self.topo.brokers)) + 1).cast("int")

    def leader(self, k: Column, part: Column, T: Column) -> Column:
        if not self.losses:
            return self.replica(k, part, 0)
        expr = self.replica(k, part, self.topo.rf - 1)
        for i in reversed(range(self.topo.rf - 1)):
            b = self.replica(k, part, i)
            expr = F.when(self.alive(b, T), b).otherwise(expr)
        return expr

    def controller(self, T: Column) -> Column:
        dying = sorted({loss.broker for loss in self.losses})
        expr = F.lit(None).cast("int")
        candidates = list(range(1, self.topo.brokers + 1))
        # lowest live id; only brokers with a loss incident can be dead
        for b in reversed(candidates):
            if b in dying:
                expr = F.when(self.alive(F.lit(b), T), F.lit(b)).otherwise(expr)
            else:
                expr = F.lit(b)
        return expr

    def process_start(self, broker: Column, T: Column) -> Column:
        """When the broker's JVM (and so its counters) started."""
        expr = F.lit(float(ORIGIN))
        for loss in sorted(self.losses, key=lambda loss: loss.end):
            expr = F.when((broker == F.lit(loss.broker)) & (T >= F.lit(loss.end)), F.lit(loss.end)).otherwise(expr)
        return expr

    # ---- write rates and offsets
    def rate(self, k: Column, part: Column) -> Column:
        """Mean records/s of a partition: topic rate 5..500/s, partition +-50%."""
        topic_rate = F.lit(5.0) * F.pow(F.lit(100.0), self.u("topic-rate", k))
        return topic_rate * (F.lit(0.5) + self.u("part-rate", k, part))

    def record_size(self, k: Column) -> Column:
        return F.lit(200.0) + F.lit(1800.0) * self.u("rec-size", k)

    @staticmethod
    def cum(T: Column) -> Column:
        """Integral of the diurnal rate multiplier 1 - A cos(wT) from ORIGIN to T."""
        w = 2 * math.pi / DAY
        return (T - F.lit(float(ORIGIN))) - F.lit(DIURNAL / w) * F.sin(F.lit(w) * T)

    def leo(self, k: Column, part: Column, T: Column, r: Column | None = None) -> Column:
        """Leader log end offset (records) at time T (``r``: the partition's rate column, if computed)."""
        r = self.rate(k, part) if r is None else r
        base = F.floor(self.u("leo0", k, part) * F.lit(1e6)) + r * self.cum(T)
        for h in self.hots:
            kk = self.topo.topic_index(h.topic)
            extra = F.lit(h.factor - 1) * r * _clamp(T - F.lit(h.start), 0.0, h.end - h.start)
            base = base + F.when((k == F.lit(kk)) & (part == F.lit(h.partition)), extra).otherwise(F.lit(0.0))
        return F.floor(base)

    def follower_lag(
        self, k: Column, part: Column, broker: Column, T: Column, t_idx: Column, r: Column, leo_now: Column
    ) -> Column:
        lag = F.floor(r * F.lit(0.5) * self.u("flag", k, part, broker, t_idx))
        for s in self.slows:
            slow = F.floor(r * F.lit(30.0) * self.u("slow-lag", k, part, t_idx))
            lag = F.when((broker == F.lit(s.broker)) & _between(T, s.start, s.end), slow).otherwise(lag)
        for loss in self.losses:
            behind = (
                (leo_now - self.leo(k, part, F.lit(loss.start), r))
                * (F.lit(loss.end + loss.catchup_s) - T)
                / F.lit(loss.catchup_s)
            )
            lag = F.when(
                (broker == F.lit(loss.broker)) & _between(T, loss.end, loss.end + loss.catchup_s), F.floor(behind)
            ).otherwise(lag)
        return lag

    # ---- broker-level values
    def _loss_frac(self, loss: BrokerLoss, T: Column) -> Column:
        """1 while the broker is away, ramping to 0 while it catches up."""
        ramp = (F.lit(loss.end + loss.catchup_s) - T) / F.lit(loss.catchup_s)
        return (
            F.when(_between(T, loss.start, loss.end), F.lit(1.0))
            .when(_between(T, loss.end, loss.end + loss.catchup_s), ramp)
            .otherwise(F.lit(0.0))
        )

    def urp(self, broker: Column, T: Column, t_idx: Column) -> Column:
        v = F.lit(0.0)
        for loss in self.losses:
            v = v + F.round(_lookup(self.loss_led[loss], broker) * self._loss_frac(loss, T))
        for s in self.slows:
            n = F.when(broker == F.lit(s.broker), F.lit(float(self.leads[s.broker - 1]))).otherwise(
                _lookup(self.slow_led[s], broker)
            )
            wobble = F.floor(n * self.u("slow-urp", broker, t_idx))
            v = v + F.when(_between(T, s.start, s.end), wobble).otherwise(F.lit(0.0))
        return v

    def isr_counter(self, broker: Column, T: Column, expands: bool) -> Column:
        """Cumulative shrinks/expands since the broker process started."""
        start = self.process_start(broker, T)
        # a healthy cluster has no ISR churn: counts carried from before the data
        # starts, unless the process restarted since
        carried = F.floor(self.u("isr-carried", broker, F.lit(expands)) * F.lit(50.0))
        v = F.when(start == F.lit(float(ORIGIN)), carried).otherwise(F.lit(0.0))
        for loss in self.losses:
            at = loss.end + loss.catchup_s if expands else loss.start
            n = _lookup(self.loss_led[loss], broker)
            v = v + F.when((T >= F.lit(at)) & (start <= F.lit(at)), n).otherwise(F.lit(0.0))
        for s in self.slows:
            since = F.greatest(F.lit(s.start), start)
            steps = F.greatest(F.least(T, F.lit(s.end)) - since, F.lit(0.0)) / F.lit(float(self.res))
            others = F.when(_lookup(self.slow_led[s], broker) > 0, F.floor(steps * F.lit(0.5))).otherwise(F.lit(0.0))
            if expands:
                v = v + F.when(broker == F.lit(s.broker), F.lit(0.0)).otherwise(others)
            else:
                v = v + F.when(broker == F.lit(s.broker), F.floor(steps * F.lit(1.5))).otherwise(others)
        return v

    def idle(self, broker: Column, T: Column, t_idx: Column) -> Column:
        v = F.lit(0.75) + F.lit(0.15) * (self.u("idle", broker, t_idx) - F.lit(0.5))
        for s in self.slows:
            low = F.lit(0.4) + F.lit(0.1) * self.u("idle-slow", broker, t_idx)
            v = F.when((broker == F.lit(s.broker)) & _between(T, s.start, s.end), F.least(v, low)).otherwise(v)
        for h in self.hots:
            kk = self.topo.topic_index(h.topic)
            lead = self.leader(F.lit(kk), F.lit(h.partition), T)
            low = F.lit(0.15) + F.lit(0.1) * self.u("idle-hot", broker, t_idx)
            v = F.when((broker == lead) & _between(T, h.start, h.end), F.least(v, low)).otherwise(v)
        return v

    def late_txn(self, broker: Column, T: Column) -> Column:
        v = F.lit(0.0)
        for h in self.hangs:
            kk = self.topo.topic_index(h.topic)
            lead = self.leader(F.lit(kk), F.lit(h.partition), T)
            late = (broker == lead) & _between(T, h.start + h.late_after_s, h.end)
            v = v + F.when(late, F.lit(1.0)).otherwise(F.lit(0.0))
        return v

    def offline_replicas(self, T: Column) -> Column:
        v = F.lit(0.0)
        for loss in self.losses:
            v = v + F.when(_between(T, loss.start, loss.end), F.lit(float(self.loss_replicas[loss]))).otherwise(
                F.lit(0.0)
            )
        return v


# --------------------------------------------------------------------------- frames


def _no_labels() -> Column:
    return F.lit(None).cast("map<string,string>")


def _emit(base: DataFrame, metrics: list[tuple[str, Column, Column]]) -> DataFrame:
    """One row per (input row, metric): metrics = [(name, value, labels)]."""
    entries = F.array(
        *[
            F.struct(F.lit(m).alias("metric"), lab.alias("labels"), v.cast("double").alias("value"))
            for m, v, lab in metrics
        ]
    )
    return base.select("ts", "broker", "topic", "partition", F.explode(entries).alias("e")).select(
        "ts",
        F.col("broker").cast("int").alias("broker"),
        F.col("e.metric").alias("metric"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("e.labels").alias("labels"),
        F.col("e.value").alias("value"),
    )


def _range(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(0, rows, 1, max(1, math.ceil(rows / ROWS_PER_TASK)))


class _Generator:
    def __init__(self, spark, topo, model, resolution_s, metrics, leo_replicas):
        self.spark, self.topo, self.m, self.res = spark, topo, model, resolution_s
        self.metrics, self.n_t = metrics, 3600 // resolution_s
        self.leo_replicas = max(1, min(int(leo_replicas), topo.rf))
        self._topic_names = F.array(*[F.lit(t) for t in topo.topics])
        self._hosted = [0] * topo.brokers  # replicas reporting LEO/Size, per broker
        for _, _, reps in topo.all_partitions():
            for b in reps[: self.leo_replicas]:
                self._hosted[b - 1] += 1

    def _time(self, hour_start: int, t_idx: Column) -> Column:
        return F.lit(float(hour_start)) + t_idx.cast("double") * F.lit(float(self.res))

    def topic(self, k: Column) -> Column:
        return F.element_at(self._topic_names, (k + 1).cast("int"))

    def broker_frame(self, hour_start: int) -> DataFrame | None:
        wanted = [m for m in BROKER_METRICS if m in self.metrics]
        if not wanted:
            return None
        m, B, n_t = self.m, self.topo.brokers, self.n_t
        df = _range(self.spark, B * n_t)
        t_idx = F.pmod(F.col("id"), F.lit(n_t))
        df = df.select(
            (F.floor(F.col("id") / F.lit(n_t)) + 1).cast("int").alias("broker"),
            t_idx.alias("t_idx"),
        )
        T = self._time(hour_start, F.col("t_idx"))
        df = df.withColumn("T", T).filter(m.alive(F.col("broker"), F.col("T")))
        b, T, ti = F.col("broker"), F.col("T"), F.col("t_idx")
        df = df.withColumn("urp", m.urp(b, T, ti)).withColumn("idle", m.idle(b, T, ti))
        df = df.withColumn("is_controller", b == m.controller(T))
        urp, idle, ctl = F.col("urp"), F.col("idle"), F.col("is_controller")
        rf = self.topo.rf
        values: dict[str, list[tuple[Column, Column]]] = {
            "UnderReplicatedPartitions": [(urp, _no_labels())],
            "IsrShrinksPerSec": [(m.isr_counter(b, T, expands=False), _no_labels())],
            "IsrExpandsPerSec": [(m.isr_counter(b, T, expands=True), _no_labels())],
            "UnderMinIsrPartitionCount": [(urp if rf - 1 < MIN_INSYNC else F.lit(0.0), _no_labels())],
            "AtMinIsrPartitionCount": [(urp if rf - 1 == MIN_INSYNC else F.lit(0.0), _no_labels())],
            "OfflinePartitionsCount": [(F.lit(0.0), _no_labels())],
            "OfflineReplicaCount": [(F.when(ctl, m.offline_replicas(T)).otherwise(F.lit(0.0)), _no_labels())],
            "ActiveControllerCount": [(ctl.cast("double"), _no_labels())],
            "RequestHandlerAvgIdlePercent": [(idle, _no_labels())],
            "PartitionsWithLateTransactionsCount": [(m.late_txn(b, T), _no_labels())],
            "RequestQueueTimeMs": [],
        }
        # queue time: grows sharply once handler threads are saturated (idle < 0.3)
        pressure = F.when(idle < F.lit(0.3), F.lit(25.0)).otherwise(F.lit(1.0))
        for req, base in REQUEST_TYPES.items():
            for q, mult in QUANTILES.items():
                noise = F.lit(1.0) + m.u("rq", b, ti, F.lit(req), F.lit(q))
                labels = F.create_map(F.lit(LABEL_REQUEST), F.lit(req), F.lit(LABEL_QUANTILE), F.lit(q))
                values["RequestQueueTimeMs"].append((F.lit(base * mult) * noise * pressure, labels))
        df = (
            df.withColumn("ts", F.timestamp_seconds(T.cast("long")))
            .withColumn("topic", F.lit(None).cast("string"))
            .withColumn("partition", F.lit(None).cast("int"))
        )
        return _emit(df, [(name, v, lab) for name in wanted for v, lab in values[name]])

    def _partition_base(self, rows_per_partition: int, hour_start: int) -> DataFrame:
        """Rows (p, r, t) with p outermost so a series' rows are contiguous (compresses well)."""
        n_t = self.n_t
        df = _range(self.spark, self.topo.partitions * rows_per_partition * n_t)
        per_p = rows_per_partition * n_t
        p = F.floor(F.col("id") / F.lit(per_p))
        rest = F.pmod(F.col("id"), F.lit(per_p))
        df = df.select(
            F.floor(p / F.lit(self.topo.partitions_per_topic)).alias("k"),
            F.pmod(p, F.lit(self.topo.partitions_per_topic)).alias("partition"),
            F.floor(rest / F.lit(n_t)).alias("r"),
            F.pmod(rest, F.lit(n_t)).alias("t_idx"),
        )
        return df.withColumn("T", self._time(hour_start, F.col("t_idx"))).withColumn(
            "ts", F.timestamp_seconds(F.col("T").cast("long"))
        )

    def replica_frame(self, hour_start: int) -> DataFrame | None:
        wanted = [m for m in REPLICA_METRICS if m in self.metrics]
        if not wanted:
            return None
        m = self.m
        df = self._partition_base(self.leo_replicas, hour_start)
        k, part, T, ti = F.col("k"), F.col("partition"), F.col("T"), F.col("t_idx")
        df = df.withColumn("broker", m.replica(k, part, F.col("r"))).filter(m.alive(F.col("broker"), T))
        b = F.col("broker")
        # Columns referenced more than once are computed in their own projection
        # (Catalyst does not inline non-trivial expressions used twice), so each
        # is evaluated once per row.
        df = df.withColumn("r", m.rate(k, part))
        r = F.col("r")
        df = df.withColumn("leader_leo", m.leo(k, part, T, r))
        lag = F.when(b == m.leader(k, part, T), F.lit(0.0)).otherwise(
            m.follower_lag(k, part, b, T, ti, r, F.col("leader_leo"))
        )
        df = df.withColumn("value_leo", F.col("leader_leo") - lag)
        # retained bytes: records since the retention cut-off, rounded down to whole segments
        cutoff = F.lit(float(ORIGIN)) + F.floor(
            (T - F.lit(float(ORIGIN + RETENTION_S))) / F.lit(float(SEGMENT_S))
        ) * F.lit(float(SEGMENT_S))
        size = m.record_size(k) * (F.col("value_leo") - m.leo(k, part, cutoff, r))
        df = df.withColumn("topic", self.topic(k))
        values = {"LogEndOffset": F.col("value_leo"), "Size": F.floor(size)}
        return _emit(df, [(name, values[name], _no_labels()) for name in wanted])

    def lso_frame(self, hour_start: int) -> DataFrame | None:
        if "LastStableOffsetLag" not in self.metrics:
            return None
        m = self.m
        df = self._partition_base(1, hour_start)
        k, part, T, ti = F.col("k"), F.col("partition"), F.col("T"), F.col("t_idx")
        df = df.withColumn("r", m.rate(k, part))
        r = F.col("r")
        jitter = F.when(F.pmod(k, F.lit(4)) == 0, F.floor(r * F.lit(0.2) * m.u("lso", k, part, ti))).otherwise(
            F.lit(0.0)
        )
        v = jitter
        for h in m.hangs:
            kk = self.topo.topic_index(h.topic)
            stuck = m.leo(k, part, T, r) - m.leo(k, part, F.lit(h.start), r)
            on = (k == F.lit(kk)) & (part == F.lit(h.partition)) & _between(T, h.start, h.end)
            v = F.when(on, stuck + jitter).otherwise(v)
        df = df.withColumn("broker", m.leader(k, part, T)).withColumn("topic", self.topic(k))
        return _emit(df, [("LastStableOffsetLag", v, _no_labels())])

    def consumer_frame(self, hour_start: int) -> DataFrame | None:
        wanted = [x for x in CONSUMER_METRICS if x in self.metrics]
        if not wanted:
            return None
        m = self.m
        df = self._partition_base(1, hour_start)
        k, part, T, ti = F.col("k"), F.col("partition"), F.col("T"), F.col("t_idx")
        df = df.withColumn("r", m.rate(k, part))
        r = F.col("r")
        df = df.withColumn("leo", m.leo(k, part, T, r))
        # normal: 0..5 s of records behind (0 one time in six)
        committed = F.col("leo") - F.floor(r * F.floor(m.u("clag", k, part, ti) * F.lit(6.0)))
        for s in m.storms:
            kk = m.group_topic[s.group]
            mid = (s.start + s.end) / 2
            c0 = m.leo(k, part, F.lit(s.start), r) - F.floor(r * F.lit(2.0))
            rewound = c0 - F.floor(r * F.lit(60.0))
            recovering = F.least(committed, rewound + F.floor(r * F.lit(3.0) * (T - F.lit(s.end))))
            mine = k == F.lit(kk)
            committed = (
                F.when(mine & _between(T, s.start, mid), c0)
                .when(mine & _between(T, mid, s.end), rewound)
                .when(mine & (T >= F.lit(s.end)), recovering)
                .otherwise(committed)
            )
        df = df.withColumn("committed", committed)
        df = df.withColumn("broker", F.lit(-1)).withColumn("topic", self.topic(k))
        group = F.concat(F.col("topic"), F.lit("-consumers"))
        labels = F.create_map(F.lit(LABEL_GROUP), group)
        values = {
            "CommittedOffset": F.col("committed"),
            "ConsumerLag": F.col("leo") - F.col("committed"),
        }
        return _emit(df, [(name, values[name], labels) for name in wanted])

    def hour(self, hour_start: int) -> DataFrame | None:
        frames = [
            f
            for f in (
                self.broker_frame(hour_start),
                self.replica_frame(hour_start),
                self.lso_frame(hour_start),
                self.consumer_frame(hour_start),
            )
            if f is not None
        ]
        if not frames:
            return None
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out.select(*DATA_COLUMNS)

    def expected_rows(self, hour_start: int) -> int:
        """Rows the hour will hold (dead brokers send nothing): plain Python."""
        topo, m = self.topo, self.m
        alive_samples = [0] * topo.brokers  # per broker, samples it is alive for
        for t in range(self.n_t):
            T = hour_start + t * self.res
            for b in range(1, topo.brokers + 1):
                if not any(loss.broker == b and loss.start <= T < loss.end for loss in m.losses):
                    alive_samples[b - 1] += 1
        n_broker = len([x for x in BROKER_METRICS if x in self.metrics and x != "RequestQueueTimeMs"])
        if "RequestQueueTimeMs" in self.metrics:
            n_broker += len(REQUEST_TYPES) * len(QUANTILES)
        rows = n_broker * sum(alive_samples)
        n_rep = len([x for x in REPLICA_METRICS if x in self.metrics])
        rows += n_rep * sum(h * a for h, a in zip(self._hosted, alive_samples))
        per_partition = topo.partitions * self.n_t
        rows += per_partition * ("LastStableOffsetLag" in self.metrics)
        rows += per_partition * len([x for x in CONSUMER_METRICS if x in self.metrics])
        return rows


# --------------------------------------------------------------------------- entry points


@dataclass
class Report:
    path: str
    hours: int
    rows: int
    seconds: float

    @property
    def rows_per_sec(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def generate(
    out_path: str,
    cluster: str = "synthetic",
    start: _dt.datetime | str | None = None,
    hours: int = 1,
    brokers: int = 6,
    topics: int = 10,
    partitions_per_topic: int = 12,
    resolution_s: int = 30,
    incidents: Sequence[Incident] = (),
    seed: int = 42,
    metrics: Iterable[str] | None = None,
    leo_replicas: int = 3,
    mode: str = "overwrite",
    spark: SparkSession | None = None,
    progress: Callable[[str], None] | None = None,
    table_format: str = "delta",
    rollups: bool = True,
) -> Report:
    """Write ``hours`` hours of synthetic samples for one cluster under ``out_path``.

    ``start`` is rounded down to the hour (default: ``hours`` before the
    current hour).  ``metrics`` limits the metric names emitted (default all,
    see :data:`ALL_METRICS`); ``leo_replicas`` is how many replicas of each
    partition report LogEndOffset/Size (1 = leader only, the cheapest).
    ``mode`` applies per hour directory: ``overwrite`` replaces it, ``append``
    adds files (to add metrics to an existing lake).  ``table_format`` is ``delta`` (then
    ``rollups`` also builds ``<out>_1m`` / ``<out>_1h`` for the hours written) or ``parquet``.
    Uses the active SparkSession (or ``spark``); returns a :class:`Report`.
    """
    if table_format not in ("delta", "parquet"):
        raise ValueError("table_format must be 'delta' or 'parquet'")
    if resolution_s <= 0 or 3600 % resolution_s:
        raise ValueError("resolution_s must divide 3600")
    if hours < 1:
        raise ValueError("hours must be >= 1")
    chosen = tuple(ALL_METRICS) if metrics is None else tuple(metrics)
    unknown = set(chosen) - set(ALL_METRICS)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: {list(ALL_METRICS)}")
    if start is None:
        now = _dt.datetime.now(_dt.timezone.utc).replace(minute=0, second=0, microsecond=0)
        start = now - _dt.timedelta(hours=hours)
    first = int(_epoch(start)) // 3600 * 3600
    if first < ORIGIN + RETENTION_S + DAY:
        raise ValueError("start must be after 2020-01-09 (offsets count from 2020-01-01)")
    spark = spark or SparkSession.active()
    topo = Topology(brokers, [f"topic-{k:03d}" for k in range(topics)], partitions_per_topic)
    model = _Model(topo, incidents, seed, resolution_s)
    gen = _Generator(spark, topo, model, resolution_s, set(chosen), leo_replicas)
    say = progress or (lambda s: None)

    conf_key = "spark.sql.parquet.outputTimestampType"
    old = spark.conf.get(conf_key)
    spark.conf.set(conf_key, "TIMESTAMP_MICROS")
    total, t0 = 0, time.monotonic()
    written: list[tuple[str, str, int]] = []
    try:
        for h in range(hours):
            hour_start = first + h * 3600
            df = gen.hour(hour_start)
            if df is None:
                break
            when = _dt.datetime.fromtimestamp(hour_start, _dt.timezone.utc)
            t1 = time.monotonic()
            if table_format == "parquet":
                df.write.mode(mode).parquet(partition_path(out_path, cluster, when.strftime("%Y-%m-%d"), when.hour))
            else:
                part = df.select(
                    *DATA_COLUMNS,
                    F.lit(cluster).alias("cluster"),
                    F.lit(when.strftime("%Y-%m-%d")).alias("date"),
                    F.lit(when.hour).alias("hour"),
                )
                if mode == "overwrite":
                    delta.replace_partitions(part, out_path, PARTITION_COLUMNS)
                else:
                    delta.append(part, out_path, PARTITION_COLUMNS)
                written.append((cluster, when.strftime("%Y-%m-%d"), when.hour))
            rows = gen.expected_rows(hour_start)
            total += rows
            dt_h = time.monotonic() - t1
            say(
                f"[{h + 1}/{hours}] {when:%Y-%m-%dT%H}Z {rows:,} rows in {dt_h:.1f}s "
                f"({rows / dt_h:,.0f} rows/s; total {total:,} in {time.monotonic() - t0:.0f}s)"
            )
        if written and rollups:
            t1 = time.monotonic()
            for i in range(0, len(written), 24):
                update_rollups(spark, out_path, hour_minutes(written[i : i + 24]))
            say(f"rollups of {len(written)} hour(s) in {time.monotonic() - t1:.1f}s")
    finally:
        spark.conf.set(conf_key, old)
    return Report(out_path, hours, total, time.monotonic() - t0)


def first_commits_in_flight(lake_dir: str | Path, cluster: str = "pytest", now: _dt.datetime | None = None) -> str:
    """A lake as it is for a while after `kbot run` starts: its first ingest and first rollup are
    writing.  Delta creates a table's ``_delta_log`` (with its ``_staged_commits``) when the first
    write begins and commits version 0 only once the data files are written, seconds later on a
    cold Spark; a data file of that commit is on disk, half written.  Returns the raw table's path."""
    root = Path(lake_dir)
    table = root / "samples"
    for t in (table, root / "samples_1m"):
        (t / "_delta_log" / "_staged_commits").mkdir(parents=True, exist_ok=True)
    t = now or _dt.datetime.now(_dt.timezone.utc)
    hour = table / f"cluster={cluster}" / f"date={t:%Y-%m-%d}" / f"hour={t.hour}"
    hour.mkdir(parents=True, exist_ok=True)
    (hour / "part-00000-0f1e2d3c-c000.snappy.parquet").write_bytes(b"PAR1\x15\x04\x15")
    return str(table)


def _parse_incident(spec: str) -> Incident:
    """``kind:key=value,...``, e.g. ``hot_key:topic=topic-001,partition=3,at=2024-05-01T10:00,duration=20m``."""
    kind, _, args = spec.partition(":")
    makers = {
        "broker_loss": broker_loss,
        "slow_follower": slow_follower,
        "hot_key": hot_key,
        "hanging_transaction": hanging_transaction,
        "rebalance_storm": rebalance_storm,
    }
    if kind not in makers:
        raise argparse.ArgumentTypeError(f"unknown incident {kind!r}; one of {sorted(makers)}")
    kwargs = {}
    for item in filter(None, args.split(",")):
        key, _, value = item.partition("=")
        kwargs[key.strip()] = value.strip()
    for key in ("broker", "partition"):
        if key in kwargs:
            kwargs[key] = int(kwargs[key])
    if "factor" in kwargs:
        kwargs["factor"] = float(kwargs["factor"])
    try:
        return makers[kind](**kwargs)
    except TypeError as e:
        raise argparse.ArgumentTypeError(f"{kind}: {e}") from None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.synthetic", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="lake root directory (local path or any Hadoop URI)")
    p.add_argument("--cluster", default="synthetic")
    p.add_argument("--start", help="ISO time (UTC if no offset); default: HOURS before the current hour")
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--brokers", type=int, default=6)
    p.add_argument("--topics", type=int, default=10)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--partitions", type=int, help="total partitions (split evenly over topics)")
    g.add_argument("--partitions-per-topic", type=int)
    p.add_argument("--resolution", type=int, default=30, help="seconds between samples (divides 3600)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--metrics", help="comma-separated metric names to emit (default: all)")
    p.add_argument("--leo-replicas", type=int, default=3, help="replicas reporting LogEndOffset/Size (1 = leader)")
    p.add_argument("--mode", choices=["overwrite", "append"], default="overwrite")
    p.add_argument(
        "--format",
        choices=["delta", "parquet"],
        default="delta",
        help="a Delta table with rollups (default), or bare Parquet hour directories",
    )
    p.add_argument("--no-rollups", action="store_true", help="do not build the rollup tables (delta)")
    p.add_argument("--master", default="local[*]")
    p.add_argument(
        "--incident",
        action="append",
        type=_parse_incident,
        default=[],
        metavar="KIND:K=V,...",
        help="broker_loss|slow_follower|hot_key|hanging_transaction|rebalance_storm, repeatable",
    )
    a = p.parse_args(argv)

    ppt = a.partitions_per_topic or max(1, math.ceil((a.partitions or 120) / a.topics))

    spark = build_session(a.master, app_name="kbot-synthetic")
    spark.sparkContext.setLogLevel("WARN")
    print(
        f"generating {a.hours}h x {a.topics * ppt:,} partitions ({a.topics} topics x {ppt}) on "
        f"{a.brokers} brokers at {a.resolution}s into {a.out}",
        flush=True,
    )
    report = generate(
        a.out,
        cluster=a.cluster,
        start=a.start,
        hours=a.hours,
        brokers=a.brokers,
        topics=a.topics,
        partitions_per_topic=ppt,
        resolution_s=a.resolution,
        incidents=a.incident,
        seed=a.seed,
        metrics=[m.strip() for m in a.metrics.split(",")] if a.metrics else None,
        leo_replicas=a.leo_replicas,
        mode=a.mode,
        spark=spark,
        table_format=a.format,
        rollups=not a.no_rollups,
        progress=lambda s: print(s, flush=True),
    )
    print(f"done: {report.rows:,} rows in {report.seconds:.1f}s ({report.rows_per_sec:,.0f} rows/s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
