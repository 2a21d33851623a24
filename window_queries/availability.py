"""Availability over the window: partitions under min ISR, offline partitions, the active
controller.

Bucketed per ``bucket_s`` seconds (default one minute, epoch aligned, UTC).

* ``UnderMinIsrPartitionCount`` / ``AtMinIsrPartitionCount``: reported by each partition's
  leader; a partition under min ISR rejects acks=all produce requests (NotEnoughReplicas), so
  the per-broker timeline says when and where writes were failing.  Summing the per-broker
  values gives the cluster total, since each partition has one leader.
* ``OfflinePartitionsCount``: partitions without a leader, reported by the active controller
  only (others report 0), hence the max across nodes.
* ``ActiveControllerCount``: 1 on the active controller, 0 elsewhere.  The sum over nodes must
  be exactly 1; 0 means no controller (elections stall), 2+ a split brain.  Each node's last
  value in the bucket is taken before summing.
"""

from __future__ import annotations

from typing import Any

from lake.embedded import Window
from window_queries import Question

UNDER_MIN_ISR = "UnderMinIsrPartitionCount"
AT_MIN_ISR = "AtMinIsrPartitionCount"
OFFLINE = "OfflinePartitionsCount"
ACTIVE_CONTROLLER = "ActiveControllerCount"

#: The buckets the lake checks count in: "in 3 of 15 minute(s)".
MINUTE_S = 60

# the start of the $bucket_s-wide bucket holding ts (epoch aligned; whole seconds, as Spark's
# unix_seconds truncated them)
_BUCKET = "to_timestamp(epoch_us(ts) // 1000000 // $bucket_s * $bucket_s)"

_UNDER_MIN_ISR_TIMELINE = f"""
    SELECT cluster, {_BUCKET} AS bucket, broker,
           max(value) FILTER (WHERE metric = '{UNDER_MIN_ISR}') AS under_min_isr,
           max(value) FILTER (WHERE metric = '{AT_MIN_ISR}') AS at_min_isr
    FROM w WHERE metric IN ('{UNDER_MIN_ISR}', '{AT_MIN_ISR}')
    GROUP BY ALL
"""

UNDER_MIN_ISR_TIMELINE_SQL = f"{_UNDER_MIN_ISR_TIMELINE} ORDER BY cluster, bucket, broker"

UNDER_MIN_ISR_SQL = f"""
WITH t AS ({_UNDER_MIN_ISR_TIMELINE})
SELECT cluster, broker,
       max(under_min_isr) AS max_under,
       count_if(under_min_isr > 0)::BIGINT AS minutes_under,
       max(at_min_isr) AS max_at,
       count(*) AS minutes
FROM t GROUP BY cluster, broker ORDER BY cluster, broker
"""

_OFFLINE_TIMELINE = f"""
    WITH per_node AS (
        SELECT cluster, {_BUCKET} AS bucket, broker,
               max(value) FILTER (WHERE metric = '{OFFLINE}') AS offline,
               max(value) FILTER (WHERE metric = '{UNDER_MIN_ISR}') AS under_min_isr
        FROM w WHERE metric IN ('{UNDER_MIN_ISR}', '{OFFLINE}')
        GROUP BY ALL
    )
    SELECT cluster, bucket, max(offline) AS offline_partitions, sum(under_min_isr) AS under_min_isr_partitions
    FROM per_node GROUP BY cluster, bucket
"""

OFFLINE_TIMELINE_SQL = f"{_OFFLINE_TIMELINE} ORDER BY cluster, bucket"

OFFLINE_SQL = f"""
WITH t AS ({_OFFLINE_TIMELINE})
SELECT cluster,
       max(offline_partitions) AS max_offline,
       count_if(offline_partitions > 0)::BIGINT AS minutes_offline,
       min(epoch(bucket)::BIGINT) FILTER (WHERE offline_partitions > 0) AS first_offline,
       count(*) AS minutes
FROM t GROUP BY cluster ORDER BY cluster
"""

_CONTROLLER_TIMELINE = f"""
    WITH per_node AS (
        SELECT cluster, {_BUCKET} AS bucket, broker, arg_max(value, ts) AS v
        FROM w WHERE metric = '{ACTIVE_CONTROLLER}'
        GROUP BY ALL
    )
    SELECT cluster, bucket,
           sum(v) AS active_controllers,
           coalesce(list(broker ORDER BY broker) FILTER (WHERE v >= 1), []) AS controllers,
           count(*) AS reporting_nodes,
           sum(v) != 1.0 AS anomaly
    FROM per_node GROUP BY cluster, bucket
"""

CONTROLLER_TIMELINE_SQL = f"{_CONTROLLER_TIMELINE} ORDER BY cluster, bucket"

# a run of consecutive anomalous buckets keeps (bucket index - row number) constant; a bucket
# without samples, or a normal one, ends the run
CONTROLLER_ANOMALIES_SQL = f"""
WITH t AS ({_CONTROLLER_TIMELINE}),
runs AS (
    SELECT cluster, bucket, active_controllers,
           epoch_us(bucket) // 1000000 // $bucket_s
               - row_number() OVER (PARTITION BY cluster ORDER BY bucket) AS island
    FROM t WHERE anomaly
)
SELECT cluster,
       min(bucket) AS start,
       max(bucket) + to_seconds($bucket_s) AS "end",
       count(*) AS buckets,
       min(active_controllers) AS min_active,
       max(active_controllers) AS max_active
FROM runs GROUP BY cluster, island ORDER BY cluster, start
"""


def _bucket(bucket_s: int) -> dict[str, Any]:
    seconds = int(bucket_s)
    if seconds <= 0:
        raise ValueError("bucket width must be a positive number of seconds")
    return {"bucket_s": seconds}


def under_min_isr_timeline(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Per cluster, bucket, broker: under_min_isr and at_min_isr (max in the bucket; None when
    the broker sent no sample of that metric in the bucket)."""
    return window.rows(UNDER_MIN_ISR_TIMELINE_SQL, _bucket(bucket_s))


def under_min_isr(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Per cluster and broker, over the timeline's buckets: max_under, minutes_under (buckets
    with any partition under min ISR), max_at (None without AtMinIsr samples) and minutes
    (buckets with samples)."""
    return window.rows(UNDER_MIN_ISR_SQL, _bucket(bucket_s))


def offline_timeline(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Per cluster and bucket: offline_partitions (max over nodes) and under_min_isr_partitions
    (sum over brokers of each broker's max)."""
    return window.rows(OFFLINE_TIMELINE_SQL, _bucket(bucket_s))


def offline(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Per cluster, over the timeline's buckets: max_offline, minutes_offline, first_offline
    (epoch seconds of the first bucket with offline partitions, None if none) and minutes."""
    return window.rows(OFFLINE_SQL, _bucket(bucket_s))


def controller_timeline(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Per cluster and bucket: active_controllers (sum of each node's last value), controllers
    (sorted ids of nodes reporting >= 1), reporting_nodes, and ``anomaly`` (active_controllers
    != 1)."""
    return window.rows(CONTROLLER_TIMELINE_SQL, _bucket(bucket_s))


def controller_anomalies(window: Window, bucket_s: int = MINUTE_S) -> list[dict[str, Any]]:
    """Intervals of consecutive buckets whose active controller count != 1: cluster, start, end
    (exclusive: last bucket + bucket_s), buckets, min_active, max_active.  A bucket with no
    samples at all splits intervals."""
    return window.rows(CONTROLLER_ANOMALIES_SQL, _bucket(bucket_s))


def _under_min_isr_answer(window: Window) -> dict[str, Any]:
    return {"rows": under_min_isr(window), "data_end": window.data_end()}


def _offline_answer(window: Window) -> dict[str, Any]:
    return {"rows": offline(window), "data_end": window.data_end()}


def _controller_answer(window: Window) -> dict[str, Any]:
    return {"rows": controller_anomalies(window), "data_end": window.data_end()}


#: ``why`` under min ISR: per broker, how far under and for how many minutes.
UNDER_MIN_ISR_QUESTION = Question("under_min_isr", (UNDER_MIN_ISR, AT_MIN_ISR), _under_min_isr_answer)
#: ``why`` offline partitions: per cluster, how many and since when.
OFFLINE_QUESTION = Question("offline", (UNDER_MIN_ISR, OFFLINE), _offline_answer)
#: ``why`` controller: the intervals without exactly one active controller.
CONTROLLER_QUESTION = Question("controller", (ACTIVE_CONTROLLER,), _controller_answer)
