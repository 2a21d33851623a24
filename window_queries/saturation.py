"""Request-path saturation over the window: handler-thread idle and request queue time.

``RequestHandlerAvgIdlePercent`` is the fraction (0..1) of time the broker's I/O (request
handler) threads were idle.  Below the runbook's line (the warning bound of its alert on
RequestHandlerAvgIdlePercent, reference/signals.yaml, passed in by the caller) requests wait in
the request queue for a free handler thread, which shows up as ``RequestQueueTimeMs`` growing
for every request type on that broker.
"""

from __future__ import annotations

from typing import Any

from lake.embedded import Window
from lake.schema import LABEL_QUANTILE, LABEL_REQUEST
from window_queries import Question

IDLE = "RequestHandlerAvgIdlePercent"
QUEUE = "RequestQueueTimeMs"

#: The request queue time quantile ``why`` shows.
QUEUE_QUANTILE = "0.99"

HANDLER_IDLE_SQL = f"""
SELECT cluster, broker,
       count(*) AS samples,
       min(value) AS min_idle,
       avg(value) AS avg_idle,
       arg_max(value, ts) AS last_idle,
       count_if(value < $threshold)::BIGINT AS samples_below,
       avg(value) < $threshold AS saturated,
       min(value) < $threshold AS ever_saturated
FROM w WHERE metric = '{IDLE}'
GROUP BY cluster, broker ORDER BY cluster, broker
"""

# a null $quantile keeps every quantile; worst_broker: the broker of the largest sample, ties to
# the lowest id
QUEUE_TIME_SQL = f"""
WITH q AS (
    SELECT cluster, broker, value, labels['{LABEL_REQUEST}'] AS request, labels['{LABEL_QUANTILE}'] AS quantile
    FROM w WHERE metric = '{QUEUE}'
)
SELECT cluster, request, quantile,
       count(*) AS samples,
       avg(value) AS avg_ms,
       max(value) AS max_ms,
       arg_max(broker, (value, -broker)) AS worst_broker
FROM q WHERE $quantile IS NULL OR quantile = $quantile
GROUP BY cluster, request, quantile ORDER BY cluster, request, quantile
"""


def request_handler_idle(window: Window, threshold: float) -> list[dict[str, Any]]:
    """Per broker: samples, min_idle, avg_idle, last_idle, samples_below (samples under
    ``threshold``), saturated (avg_idle < threshold) and ever_saturated (min_idle < threshold)."""
    return window.rows(HANDLER_IDLE_SQL, {"threshold": float(threshold)})


def request_queue_time(window: Window, quantile: str | None = None) -> list[dict[str, Any]]:
    """Per request type (``labels.request``) and quantile (``labels.quantile``): samples, avg_ms,
    max_ms and worst_broker (the broker with the max sample).

    ``quantile`` keeps one quantile label value (e.g. ``"0.99"``), bound as a parameter."""
    return window.rows(QUEUE_TIME_SQL, {"quantile": None if quantile is None else str(quantile)})


def _saturation_answer(window: Window, idle_below: float) -> dict[str, Any]:
    return {
        "idle": request_handler_idle(window, idle_below),
        "queue": request_queue_time(window, QUEUE_QUANTILE),
        "data_end": window.data_end(),
    }


#: ``why`` handler saturation, asked with the runbook's idle threshold: per broker the handler
#: idle, per request type the p99 queue time.
SATURATION_QUESTION = Question("saturation", (IDLE, QUEUE), _saturation_answer)
