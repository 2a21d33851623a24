"""The incident-window questions, answered in the bot's process by DuckDB (``lake.embedded``).

Each module defines its questions once, in SQL over the view ``w`` (the window's samples:
ts, broker, metric, topic, partition, labels, value, cluster) as a ``lake.embedded.Question``:
the metrics it reads and the function that answers it from a ``lake.embedded.Window``. Commands
ask them through ``LakeService.ask_window`` (``diagnosis.lake_evidence``). A question answered
here is not also written for Spark: ``spark_queries`` holds the ones Spark answers (the ingest's
rollups, long windows), except ``history``, which both engines answer alike: here up to the
crossover (``history.BUDGET_BYTES``), Spark past it (docs/lake-engines.md).

* ``urp``          the URP trend per broker (flat / fluctuating), where URP concentrates, ISR churn
* ``availability`` partitions under min ISR and offline, active controller anomalies
* ``txn``          LastStableOffsetLag growing (hanging transactions), late transactions
* ``saturation``   request handler idle, request queue time
* ``hot``          hot partitions: write rates, skew vs the topic's median, the likely leader and a
                   per-minute chart, from raw samples or the minute rollup
* ``history``      one metric per bucket and broker from the rollups (``history <metric>``), the same
                   numbers as Spark's ``lake.queries.q_history``
* ``lag``          a consumer group's verdict with Burrow's rules (per partition and for the group), its
                   current lag from the brokers' log end offsets, its total lag per minute
"""

from __future__ import annotations

from lake.embedded import Question

__all__ = ["Question"]
