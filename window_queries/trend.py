"""A gauge's trend per broker over the incident window, for the chart beside `why`'s findings.

One value per broker and bucket: the largest sample in it (a partition count such as
UnderReplicatedPartitions is charted at its worst), buckets aligned to the epoch; with the
bucket's newest sample and its time (``last_value``, ``last_ts``), so that a chart can end on the
newest sample rather than on the worst of the minute it fell in (after a recovery the minute's
worst said "now 11" where the newest sample was 0). The
``history`` command's longer trends read the rollup tables through Spark; this is the
incident window's own picture, drawn from the samples the findings were read from.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lake.embedded import Window
from window_queries import Question

TREND_SQL = """
SELECT cluster, bucket, broker, max(value)::DOUBLE AS value, count(*) AS samples,
       arg_max(value, ts)::DOUBLE AS last_value, max(ts) AS last_ts
FROM (
    SELECT cluster, broker, ts, value, epoch_us(ts) // 1000000 // $bucket_s * $bucket_s AS bucket
    FROM w WHERE metric = $metric
)
GROUP BY cluster, bucket, broker
ORDER BY bucket, broker
"""


@cache
def gauge_trend(metric: str) -> Question:
    """The question "``metric`` per broker and bucket": ``answer(window, bucket_s)`` gives
    ``{"rows": [{cluster, bucket (epoch s), broker, value, samples, last_value, last_ts}], "data_end": ...}``."""

    def answer(window: Window, bucket_s: int) -> dict[str, Any]:
        if int(bucket_s) <= 0:
            raise ValueError("bucket width must be a positive number of seconds")
        rows = window.rows(TREND_SQL, {"metric": metric, "bucket_s": int(bucket_s)})
        return {"rows": rows, "data_end": window.data_end()}

    return Question(f"trend of {metric}", (metric,), answer)
