"""Transactions over the window: LastStableOffsetLag per partition, late transactions per broker.

The last stable offset (LSO) cannot pass the first offset of a transaction that is still open,
so a transaction that never commits or aborts (a hanging transaction) pins the LSO while the
log end offset keeps moving: ``LastStableOffsetLag`` (LEO - LSO) grows without ever coming
down, and read_committed consumers stop at the LSO.  Normal transactional traffic makes the lag
go up and down by a batch or so.

``growing`` is true when the lag ended the window at its maximum, above where it started, and
has gone up at least ``min_increases`` times since it last went down (it has been climbing
steadily, not just jittering).

``PartitionsWithLateTransactionsCount`` is the broker's count of partitions with a transaction
open longer than ``transaction.max.timeout.ms``.
"""

from __future__ import annotations

from typing import Any

from lake.embedded import Window
from window_queries import Question

LSO_LAG = "LastStableOffsetLag"
LATE_TXN = "PartitionsWithLateTransactionsCount"

#: How many growing partitions ``why`` shows (the largest lag first).
GROWING_SHOWN = 5

_LSO = f"""
    WITH per_instant AS (
        -- leadership can move: one value per instant, from whichever broker reported it
        SELECT cluster, topic, partition, ts, max(value) AS value, arg_max(broker, value) AS broker
        FROM w WHERE metric = '{LSO_LAG}' AND topic IS NOT NULL AND partition IS NOT NULL
        GROUP BY cluster, topic, partition, ts
    ),
    steps AS (
        SELECT *, value - lag(value) OVER (PARTITION BY cluster, topic, partition ORDER BY ts) AS delta
        FROM per_instant
    ),
    marked AS (
        SELECT *, coalesce(delta > 0, false) AS up,
               max(CASE WHEN delta < 0 THEN ts END) OVER (PARTITION BY cluster, topic, partition) AS last_down_ts
        FROM steps
    ),
    per_partition AS (
        SELECT cluster, topic, partition,
               count(*) AS samples,
               arg_min(value, ts) AS first_lag,
               arg_max(value, ts) AS last_lag,
               max(value) AS max_lag,
               count_if(up AND (last_down_ts IS NULL OR ts > last_down_ts))::BIGINT AS increases_since_last_decrease,
               (epoch_us(max(ts)) - epoch_us(min(ts))) / 1e6 AS elapsed_s,
               arg_max(broker, ts) AS leader_broker
        FROM marked GROUP BY cluster, topic, partition
    )
    SELECT cluster, topic, partition, samples, first_lag, last_lag, max_lag, increases_since_last_decrease,
           CASE WHEN elapsed_s > 0 THEN (last_lag - first_lag) / elapsed_s END AS growth_per_sec,
           last_lag > first_lag AND last_lag >= max_lag
               AND increases_since_last_decrease >= $min_increases AS growing,
           leader_broker
    FROM per_partition
"""

LSO_LAG_SQL = f"{_LSO} ORDER BY cluster, topic, partition"

GROWING_SQL = f"""
SELECT * FROM ({_LSO}) WHERE growing
ORDER BY last_lag DESC, cluster, topic, partition LIMIT {GROWING_SHOWN}
"""

_LATE = f"""
    SELECT cluster, broker,
           max(value) AS max,
           arg_max(value, ts) AS last,
           count_if(value > 0)::BIGINT AS nonzero_samples,
           min(ts) FILTER (WHERE value > 0) AS first_late_ts,
           max(value) > 0 AS late
    FROM w WHERE metric = '{LATE_TXN}'
    GROUP BY cluster, broker
"""

LATE_SQL = f"{_LATE} ORDER BY cluster, broker"

LATE_ONLY_SQL = f"SELECT * FROM ({_LATE}) WHERE late ORDER BY cluster, broker"


def last_stable_offset_lag(window: Window, min_increases: int = 5) -> list[dict[str, Any]]:
    """Per topic-partition: samples, first_lag, last_lag, max_lag, increases_since_last_decrease,
    growth_per_sec, growing, leader_broker (the broker that reported the last sample)."""
    return window.rows(LSO_LAG_SQL, {"min_increases": int(min_increases)})


def growing_lso_lag(window: Window, min_increases: int = 5) -> list[dict[str, Any]]:
    """The :func:`last_stable_offset_lag` rows that are ``growing``, the largest last lag first,
    at most :data:`GROWING_SHOWN`."""
    return window.rows(GROWING_SQL, {"min_increases": int(min_increases)})


def late_transactions(window: Window) -> list[dict[str, Any]]:
    """Per broker: max and last PartitionsWithLateTransactionsCount, nonzero_samples,
    first_late_ts (first sample > 0, None if none) and ``late`` (max > 0)."""
    return window.rows(LATE_SQL)


def _hanging_answer(window: Window) -> dict[str, Any]:
    return {
        "growing": growing_lso_lag(window),
        "late": window.rows(LATE_ONLY_SQL),
        "data_end": window.data_end(),
    }


#: ``why`` hanging transaction: the partitions whose LSO lag keeps growing, the brokers with
#: late transactions.
HANGING_QUESTION = Question("hanging", (LSO_LAG, LATE_TXN), _hanging_answer)
