"""UnderReplicatedPartitions (URP) per broker over the window, and ISR churn.

URP is reported by partition *leaders*. Its shape over the window separates the two
replication failure modes of the runbook:

* ``flat``: non-zero and level (steps up once and stays): every partition with a replica on a
  lost broker stays under-replicated until it returns, the broker-loss signature;
* ``fluctuating``: non-zero and moving: followers leave and rejoin the ISR, the slow-follower
  signature;
* ``brief``: non-zero in too few samples to tell the two apart (a URP that began a sample or two
  ago, or a lake that holds one sample of it): "fluctuating between 11 and 11, 0 changes in 1
  samples" said nothing true;
* ``zero``: no URP in the window.

``brief`` when there are fewer than ``min_flat_samples`` non-zero samples and at most 2 changes
(a step up, and perhaps down); ``flat`` when the most common non-zero value (the *modal* value, ties to the larger) covers at
least ``flat_share`` of the non-zero samples, there are at least ``min_flat_samples`` of them,
and the value changed at most ``max(2, max_change_rate * (samples - 1))`` times (2 = one step up
and one down); otherwise ``fluctuating``.

``episode_start``: when the broker's current stretch of non-zero URP began (its first non-zero
sample after its last zero one; null when its last sample is 0): where the symptom now shown
began, read from the samples themselves; ``began_before_window`` when no sample in the window
was 0 (the stretch began before it: ``episode_start`` is then only the window's first sample).

Where URP concentrates: URP is counted by the partition's *leader*, so the brokers that report it
are the leaders of the under-replicated partitions, not the brokers whose replicas are missing (with
broker 102 dead, 101 and 103 report all of it). Each broker's share is its mean URP over the
cluster's sum of means: a sum over samples (as before) moved with how many scrapes of each broker
reached the lake (61%, 51%, 57% at steady levels when scrapes were missed under load).

ISR churn: ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` are stored as cumulative counts
(``lake.schema``); the events in the window are the sum of each series' steps, a step down
being a restart that counted from 0 again (the new value is the step, Prometheus
``increase()``). Shrinks with no expands mean replicas leave the ISR and do not come back.
"""

from __future__ import annotations

from typing import Any

from lake.embedded import Window
from window_queries import Question

URP = "UnderReplicatedPartitions"
SHRINKS = "IsrShrinksPerSec"
EXPANDS = "IsrExpandsPerSec"

# one value per broker and instant (duplicate scrapes collapse to the max)
_PER_INSTANT = f"""
    SELECT cluster, broker, ts, max(value) AS value
    FROM w WHERE metric = '{URP}'
    GROUP BY cluster, broker, ts
"""

TREND_SQL = f"""
WITH u AS ({_PER_INSTANT}),
changed AS (
    SELECT cluster, broker, ts, value,
           coalesce((value != lag(value) OVER (PARTITION BY cluster, broker ORDER BY ts))::INTEGER, 0) AS changed
    FROM u
),
episodes AS (
    SELECT cluster, broker,
           min(ts) FILTER (WHERE value > 0 AND ts > coalesce(last_zero, '-infinity'::TIMESTAMPTZ)) AS episode_start,
           bool_and(value > 0) AS began_before_window
    FROM (
        SELECT *, max(ts) FILTER (WHERE value <= 0) OVER (PARTITION BY cluster, broker) AS last_zero FROM u
    )
    GROUP BY cluster, broker
),
per_value AS (
    SELECT cluster, broker, value, count(*) AS n, sum(changed) AS changes, max(ts) AS last_ts
    FROM changed GROUP BY cluster, broker, value
),
per_broker AS (
    SELECT cluster, broker,
           sum(n) AS samples, min(value) AS min, max(value) AS max,
           sum(value * n) / sum(CASE WHEN value IS NOT NULL THEN n END) AS mean,
           arg_max(value, last_ts) AS last,
           count(value) AS distinct_values,
           sum(changes)::BIGINT AS changes,
           coalesce(sum(CASE WHEN value > 0 THEN n END), 0) AS nonzero_samples,
           arg_max(value, (n, value)) FILTER (WHERE value > 0) AS modal_value,
           max(n) FILTER (WHERE value > 0) AS modal_n
    FROM per_value GROUP BY cluster, broker
),
shared AS (
    SELECT *, CASE WHEN nonzero_samples > 0 THEN modal_n / nonzero_samples END AS modal_share FROM per_broker
)
SELECT cluster, broker, samples, min, max, mean, last, distinct_values, changes, nonzero_samples,
       modal_value, modal_share,
       CASE WHEN max <= 0 THEN 'zero'
            WHEN nonzero_samples < $min_flat_samples AND changes <= 2 THEN 'brief'
            WHEN nonzero_samples >= $min_flat_samples AND modal_share >= $flat_share
                 AND changes <= greatest(2.0, $max_change_rate * (samples - 1)) THEN 'flat'
            ELSE 'fluctuating' END AS shape,
       CASE WHEN last > 0 THEN episode_start END AS episode_start, began_before_window
FROM shared JOIN episodes USING (cluster, broker) ORDER BY cluster, broker
"""

CONCENTRATION_SQL = f"""
WITH u AS ({_PER_INSTANT}),
per_broker AS (
    SELECT cluster, broker, avg(value) AS mean_urp, max(value) AS max_urp
    FROM u GROUP BY cluster, broker
)
SELECT cluster, broker, mean_urp, max_urp,
       CASE WHEN sum(mean_urp) OVER (PARTITION BY cluster) > 0
            THEN mean_urp / sum(mean_urp) OVER (PARTITION BY cluster) END AS share,
       dense_rank() OVER (PARTITION BY cluster ORDER BY mean_urp DESC) AS rank
FROM per_broker ORDER BY cluster, broker
"""

CHURN_SQL = f"""
WITH c AS (
    SELECT cluster, broker, metric, ts, value,
           lag(value) OVER (PARTITION BY cluster, broker, metric, list_sort(map_entries(labels)) ORDER BY ts) AS prev
    FROM w WHERE metric IN ('{SHRINKS}', '{EXPANDS}')
),
steps AS (
    SELECT cluster, broker, metric,
           prev IS NOT NULL AND value < prev AS reset,
           CASE WHEN prev IS NULL THEN NULL WHEN value < prev THEN value ELSE value - prev END AS inc
    FROM c
),
per_broker AS (
    SELECT cluster, broker,
           sum(CASE WHEN metric = '{SHRINKS}' THEN coalesce(inc, 0.0) ELSE 0.0 END) AS shrinks,
           sum(CASE WHEN metric = '{EXPANDS}' THEN coalesce(inc, 0.0) ELSE 0.0 END) AS expands,
           count_if(reset) AS resets
    FROM steps GROUP BY cluster, broker
)
SELECT cluster, broker, shrinks, expands, shrinks - expands AS net_shrinks, resets,
       shrinks > 0 AND expands = 0 AS shrinks_without_expands
FROM per_broker ORDER BY cluster, broker
"""


def urp_trend(
    window: Window, flat_share: float = 0.8, max_change_rate: float = 0.2, min_flat_samples: int = 3
) -> list[dict[str, Any]]:
    """Per broker: samples, min, max, mean, last, distinct_values, changes (consecutive samples
    whose value differs), nonzero_samples, modal_value, modal_share, the ``shape``,
    ``episode_start`` and ``began_before_window``."""
    params = {
        "flat_share": float(flat_share),
        "max_change_rate": float(max_change_rate),
        "min_flat_samples": int(min_flat_samples),
    }
    return window.rows(TREND_SQL, params)


def urp_concentration(window: Window) -> list[dict[str, Any]]:
    """Which broker(s) *report* most of the cluster's URP (as leaders): mean_urp, max_urp, share
    (of the sum of the brokers' means; null when it had none) and rank (1 = most, dense)."""
    return window.rows(CONCENTRATION_SQL)


def isr_churn(window: Window) -> list[dict[str, Any]]:
    """Per broker: shrinks, expands (events in the window), net_shrinks, resets (counter
    restarts seen) and shrinks_without_expands. A series needs two samples to count."""
    return window.rows(CHURN_SQL)


def _urp_answer(window: Window) -> dict[str, Any]:
    return {
        "trend": urp_trend(window),
        "concentration": urp_concentration(window),
        "churn": isr_churn(window),
        "data_end": window.data_end(),
    }


def _trend_answer(window: Window) -> dict[str, Any]:
    return {"trend": urp_trend(window), "data_end": window.data_end()}


#: ``why URP``'s lake evidence: the trend, the concentration and the churn.
URP_QUESTION = Question("urp", (URP, SHRINKS, EXPANDS), _urp_answer)
#: The URP shapes alone (the digest, triage).
URP_TREND_QUESTION = Question("urp_trend", (URP,), _trend_answer)
