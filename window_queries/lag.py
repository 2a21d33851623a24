"""Consumer lag verdicts with Burrow's evaluation rules, over the incident window.

Input: ``CommittedOffset`` and ``ConsumerLag`` rows (``broker`` -1, ``labels['group']`` = the
group), one pair per observed commit with ``ts`` = the commit time (see ``lake.schema``), and the
brokers' ``LogEndOffset`` samples of the group's partitions.  A commit without a ``ConsumerLag``
row has an unknown lag (Burrow's nil lag) and is skipped by the lag rules.

The rules are Burrow's ``calculatePartitionStatus`` (linkedin/Burrow,
core/internal/evaluator/caching.go), applied to the commits in the window (Burrow's stored
intervals), in this order:

0. current lag (below) <= ``allowed_lag`` -> **OK**.
1. **STOP**: now - last commit time > last commit time - first commit time (the consumer stopped
   committing for longer than the window it had been committing in).  Burrow skips STOP when the
   lag was zero in its last few broker-offset samples; here the latest log end offset known gives
   the current lag, which rule 0 already checked, so that exception never applies.
2. **REWIND**: the committed offset went down between two commits and never got back to the
   offset before the (first) drop.
3. If the lag was <= ``allowed_lag`` at any commit, **OK**.
4. **STALL**: the committed offset never changed (the consumer keeps committing the same offset
   while lag exists: stuck, or its commits are not moving).
5. **WARN**: offsets move but the lag never went down from one commit to the next (the consumer is
   slower than the producers).
6. otherwise **OK**.

``now`` is the evaluation time: the window's end for the question (:data:`GROUP_LAG_QUESTION`);
without one, the latest commit time seen in the cluster (so a partition is STOPPED relative to
the others' commits).

Current lag, as Burrow computes it: the partition's *latest* log end offset minus the last
committed offset.  The ``ConsumerLag`` rows are taken at commit times only, so for a consumer
that stopped committing the lag of its last commit is frozen while producers keep writing (a
stopped group showed 158 in the lake against 2,438 live).  When the window holds the brokers'
``LogEndOffset`` samples of the partition at or after the last commit, the current lag is the
latest of them (the largest at that instant: every replica reports it, a follower can only trail
the leader) minus the last committed offset, at least 0; otherwise it is the lag of the last
commit with a known lag.  The lag rules 2-5 still compare lags at commit times, as Burrow's do.

Group status, as Burrow: ERR if any partition is STOP/STALL/REWIND, else WARN if any partition
is WARN, else OK.  Severity follows Burrow's status constants (OK 1, WARN 2, STOP 4, STALL 5,
REWIND 6).

The group is a bound parameter (``$group``), never SQL text.  Without a group (None) every group
in the window is evaluated, each on its own.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from lake.embedded import Window
from lake.schema import LABEL_GROUP, to_utc
from window_queries import Question

COMMITTED = "CommittedOffset"
LAG = "ConsumerLag"
LOG_END = "LogEndOffset"

OK, WARN, STOP, STALL, REWIND, ERR = "OK", "WARN", "STOP", "STALL", "REWIND", "ERR"
SEVERITY = {OK: 1, WARN: 2, STOP: 4, STALL: 5, REWIND: 6}

_GROUP = f"labels['{LABEL_GROUP}']"
_KEY = 'cluster, "group", topic, partition'

#: ``lag_commits``: one row per commit of $group (every group with NULL): cluster, group, topic,
#: partition, ts, committed (the offset) and commit_lag (the ConsumerLag at that instant, NULL
#: when none was written).  Duplicate rows of an instant collapse to the max.
COMMITS_SQL = f"""
CREATE OR REPLACE TEMP TABLE lag_commits AS
SELECT cluster, {_GROUP} AS "group", topic, partition, ts,
       max(value) FILTER (WHERE metric = '{COMMITTED}') AS committed,
       max(value) FILTER (WHERE metric = '{LAG}') AS commit_lag
FROM w
WHERE metric IN ('{COMMITTED}', '{LAG}') AND {_GROUP} IS NOT NULL AND topic IS NOT NULL AND partition IS NOT NULL
  AND ($group::VARCHAR IS NULL OR {_GROUP} = $group::VARCHAR)
GROUP BY cluster, {_GROUP}, topic, partition, ts
HAVING count(*) FILTER (WHERE metric = '{COMMITTED}') > 0
"""

#: ``lag_log_ends``: the LogEndOffset per instant (the largest any replica reported) of the
#: partitions in ``lag_commits``: cluster, topic, partition, ts, log_end.
LOG_ENDS_SQL = f"""
CREATE OR REPLACE TEMP TABLE lag_log_ends AS
SELECT w.cluster, w.topic, w.partition, w.ts, max(w.value) AS log_end
FROM w SEMI JOIN (SELECT DISTINCT cluster, topic, partition FROM lag_commits) p
    ON w.cluster = p.cluster AND w.topic = p.topic AND w.partition = p.partition
WHERE w.metric = '{LOG_END}'
GROUP BY w.cluster, w.topic, w.partition, w.ts
"""

_SEVERITY = "CASE status " + " ".join(f"WHEN '{s}' THEN {n}" for s, n in SEVERITY.items()) + " END"

#: ``lag_commits``, ``lag_log_ends`` -> ``lag_partitions``: Burrow's status per group and
#: partition (the module docstring), with $now (NULL: the cluster's latest commit) and
#: $allowed_lag.
PARTITIONS_SQL = f"""
CREATE OR REPLACE TEMP TABLE lag_partitions AS
WITH stepped AS (
    SELECT *,
           lag(committed) OVER (PARTITION BY {_KEY} ORDER BY ts) AS prev_offset,
           last_value(commit_lag IGNORE NULLS) OVER (
               PARTITION BY {_KEY} ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ) AS prev_lag,
           max(committed) OVER (
               PARTITION BY {_KEY} ORDER BY ts ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING
           ) AS max_offset_from_here
    FROM lag_commits
),
per_partition AS (
    SELECT {_KEY},
           count(*) AS commits,
           min(ts) AS first_commit,
           max(ts) AS last_commit,
           arg_max(committed, ts) AS last_offset,
           arg_max(commit_lag, ts) FILTER (WHERE commit_lag IS NOT NULL) AS last_commit_lag,
           max(commit_lag) AS max_commit_lag,
           count(DISTINCT committed) AS distinct_offsets,
           min(ts) FILTER (WHERE committed < prev_offset) AS first_rewind,
           -- Burrow looks at the first rewind: did the offset get back to where it was?
           arg_min(max_offset_from_here >= prev_offset, ts) FILTER (WHERE committed < prev_offset)
               AS rewind_recovered,
           coalesce(bool_or(commit_lag <= $allowed_lag), false) AS lag_ever_ok,
           coalesce(bool_or(commit_lag < prev_lag), false) AS lag_ever_down
    FROM stepped GROUP BY {_KEY}
),
log_ends AS (
    SELECT cluster, topic, partition, max(ts) AS log_end_ts, arg_max(log_end, ts) AS log_end
    FROM lag_log_ends GROUP BY cluster, topic, partition
),
with_current AS (
    SELECT p.*,
           -- the latest log end at or after the last commit, else the last commit's own lag
           CASE WHEN e.log_end IS NOT NULL AND e.log_end_ts >= p.last_commit
                THEN greatest(e.log_end - p.last_offset, 0.0)
                ELSE p.last_commit_lag END AS current_lag,
           coalesce($now::TIMESTAMPTZ, max(p.last_commit) OVER (PARTITION BY p.cluster)) AS eval_at
    FROM per_partition p
    LEFT JOIN log_ends e ON e.cluster = p.cluster AND e.topic = p.topic AND e.partition = p.partition
),
rated AS (
    SELECT *,
           greatest(max_commit_lag, current_lag) AS max_lag,
           CASE WHEN coalesce(current_lag, 0.0) <= $allowed_lag THEN '{OK}'
                WHEN epoch_us(eval_at) - epoch_us(last_commit) > epoch_us(last_commit) - epoch_us(first_commit)
                     THEN '{STOP}'
                WHEN first_rewind IS NOT NULL AND NOT rewind_recovered THEN '{REWIND}'
                WHEN lag_ever_ok THEN '{OK}'
                WHEN distinct_offsets = 1 THEN '{STALL}'
                WHEN NOT lag_ever_down THEN '{WARN}'
                ELSE '{OK}' END AS status
    FROM with_current
)
SELECT {_KEY}, commits, first_commit, last_commit, last_offset, current_lag, max_lag, status,
       {_SEVERITY} AS severity
FROM rated
"""

#: The partitions as :func:`partition_lag_status` gives them.
PARTITION_ROWS_SQL = 'SELECT * FROM lag_partitions ORDER BY cluster, "group", topic, partition'

#: The partitions as `lag <group>` lists them: the worst first.
WORST_FIRST_SQL = 'SELECT * FROM lag_partitions ORDER BY severity DESC, topic, partition, cluster, "group"'

#: ``lag_partitions`` -> per cluster and group: Burrow's group status and the partition with the
#: most current lag (ties to the larger topic, then partition).
GROUP_SQL = f"""
WITH per_group AS (
    SELECT cluster, "group",
           max(severity) AS worst_severity,
           arg_max(status, severity) AS worst_status,
           count(*) AS partitions,
           count_if(status <> '{OK}') AS partitions_not_ok,
           sum(coalesce(current_lag, 0.0)) AS total_lag,
           arg_max({{'topic': topic, 'partition': partition, 'lag': coalesce(current_lag, 0.0)}},
                   (coalesce(current_lag, 0.0), topic, partition)) AS ml
    FROM lag_partitions GROUP BY cluster, "group"
)
SELECT cluster, "group",
       CASE WHEN worst_severity >= {SEVERITY[STOP]} THEN '{ERR}'
            WHEN worst_severity = {SEVERITY[WARN]} THEN '{WARN}'
            ELSE '{OK}' END AS status,
       worst_status, partitions, partitions_not_ok, total_lag,
       ml.topic AS max_lag_topic, ml.partition AS max_lag_partition, ml.lag AS max_lag
FROM per_group ORDER BY cluster, "group"
"""

# the start of the $bucket_s-wide bucket holding ts (epoch aligned, whole seconds)
_BUCKET = "to_timestamp(epoch_us(ts) // 1000000 // $bucket_s * $bucket_s)"

#: ``lag_commits``, ``lag_log_ends`` -> the group's total lag per bucket (see :func:`lag_per_minute`).
TREND_SQL = f"""
WITH parts AS (SELECT DISTINCT {_KEY} FROM lag_commits),
per_bucket AS (
    SELECT {_KEY}, minute, max(log_end) AS log_end, max(committed) AS committed
    FROM (
        SELECT {_KEY}, {_BUCKET} AS minute, NULL::DOUBLE AS log_end, committed FROM lag_commits
        UNION ALL
        SELECT p.cluster, p."group", p.topic, p.partition, {_BUCKET} AS minute, e.log_end, NULL::DOUBLE
        FROM lag_log_ends e
        JOIN parts p ON p.cluster = e.cluster AND p.topic = e.topic AND p.partition = e.partition
    )
    GROUP BY {_KEY}, minute
),
-- every partition of the group at every minute the group has rows in, so a partition's last
-- offsets are carried into the minutes it was not sampled in (a stopped group commits nothing more)
grid AS (
    SELECT p.cluster, p."group", p.topic, p.partition, m.minute
    FROM (SELECT DISTINCT cluster, "group", minute FROM per_bucket) m
    JOIN parts p ON p.cluster = m.cluster AND p."group" = m."group"
),
filled AS (
    SELECT g.cluster, g."group", g.minute,
           last_value(b.log_end IGNORE NULLS) OVER so_far AS log_end,
           last_value(b.committed IGNORE NULLS) OVER so_far AS committed
    FROM grid g
    LEFT JOIN per_bucket b
      ON b.cluster = g.cluster AND b."group" = g."group" AND b.topic = g.topic AND b.partition = g.partition
         AND b.minute = g.minute
    WINDOW so_far AS (
        PARTITION BY g.cluster, g."group", g.topic, g.partition ORDER BY g.minute
        ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    )
),
lags AS (
    SELECT cluster, "group", minute,
           CASE WHEN log_end IS NOT NULL AND committed IS NOT NULL THEN greatest(log_end - committed, 0.0) END AS lag
    FROM filled
)
SELECT cluster, "group", minute, sum(lag) AS lag, count(lag) AS partitions
FROM lags GROUP BY cluster, "group", minute
HAVING count(lag) > 0
ORDER BY cluster, "group", minute
"""


def _read(window: Window, group: str | None) -> None:
    """``lag_commits`` and ``lag_log_ends`` of ``group`` (every group with None) from ``w``."""
    window.con.execute(COMMITS_SQL, {"group": group})
    window.con.execute(LOG_ENDS_SQL)


def partition_lag_status(
    window: Window,
    group: str | None = None,
    now: _dt.datetime | None = None,
    allowed_lag: float = 0,
) -> list[dict[str, Any]]:
    """Burrow status per group and partition over the commits of ``group`` (every group with
    None) in the window, evaluated at ``now`` (None: the cluster's latest commit).

    Rows of cluster, group, topic, partition, commits, first_commit, last_commit, last_offset,
    current_lag, max_lag, status, severity, ordered by cluster, group, topic, partition.  Leaves
    them in the window's ``lag_partitions`` for :func:`group_lag_status`."""
    _read(window, group)
    params = {"now": None if now is None else to_utc(now), "allowed_lag": float(allowed_lag)}
    window.con.execute(PARTITIONS_SQL, params)
    return window.rows(PARTITION_ROWS_SQL)


def group_lag_status(window: Window) -> list[dict[str, Any]]:
    """Per cluster and group, from the window's last :func:`partition_lag_status`.

    Rows of cluster, group, status (OK/WARN/ERR), worst_status (the worst partition status),
    partitions, partitions_not_ok, total_lag, and the partition with the most lag:
    max_lag_topic, max_lag_partition, max_lag."""
    return window.rows(GROUP_SQL)


def lag_per_minute(window: Window, group: str | None = None, bucket_s: int = 60) -> list[dict[str, Any]]:
    """The group's total lag per minute, for a chart: per partition and minute, the newest log end
    offset any replica reported minus the newest committed offset, each carried forward from the
    minute it was last seen (a consumer that stopped committing keeps its last offset while the
    log end grows, which is the picture of a STOP), summed over the partitions.

    Rows of cluster, group, minute, lag (records), partitions (how many partitions had both offsets
    by then), oldest first; minutes are those the group's commits or its partitions' log end
    offsets were sampled in."""
    if int(bucket_s) <= 0:
        raise ValueError("bucket width must be a positive number of seconds")
    _read(window, group)
    return window.rows(TREND_SQL, {"bucket_s": int(bucket_s)})


def _group_lag_answer(window: Window, group: str) -> dict[str, Any]:
    """``lag <group>``'s window verdict: the partitions (worst first), the group's status and its
    total lag per minute, evaluated at the window's end."""
    _read(window, group)
    window.con.execute(PARTITIONS_SQL, {"now": to_utc(window.end), "allowed_lag": 0.0})
    return {
        "partitions": window.rows(WORST_FIRST_SQL),
        "group": window.rows(GROUP_SQL),
        "trend": window.rows(TREND_SQL, {"bucket_s": 60}),
    }


#: ``lag <group>``'s lake evidence: ``answer(window, group)`` -> ``{"partitions", "group", "trend"}``.
GROUP_LAG_QUESTION = Question("group_lag", (COMMITTED, LAG, LOG_END), _group_lag_answer)
