"""Small Delta Lake helpers the ingest, the rollups and the maintenance share.

Values only ever reach Delta as DataFrame data or Column predicates; the one place a
predicate must be SQL text (``OPTIMIZE ... WHERE``) is built in ``lake.maintenance`` from
values it has validated itself.
"""

from __future__ import annotations

import json
import os

from pyspark.sql import DataFrame


def _is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def is_connect(spark) -> bool:
    """A Spark Connect session?  Delta's Python ``DeltaTable`` then needs Delta's own Connect
    plugin on the server (``delta-connect-server``), which a plain Connect server with the Delta
    jars lacks; Delta's SQL commands (``DESCRIBE HISTORY``, ``OPTIMIZE``, ``DELETE``,
    ``VACUUM``) need only its SQL extension, so on Connect the lake uses those."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def table_ref(path: str) -> str:
    """``delta.`<path>``` for Delta's SQL commands: the table's location comes from the lake's
    configuration, never from a request, and its backticks are doubled (identifier quoting)."""
    return "delta.`" + path.replace("`", "``") + "`"


def table_exists(spark, path: str) -> bool:
    """Is there a Delta table at ``path``?  (Local: a ``_delta_log`` with a commit, see
    :func:`local_table_exists`; else asks Delta.)"""
    if not _is_uri(path):
        return local_table_exists(path)
    from delta.tables import DeltaTable

    try:
        if is_connect(spark):
            spark.sql(f"DESCRIBE DETAIL {table_ref(path)}").collect()
            return True
        return bool(DeltaTable.isDeltaTable(spark, path))
    except Exception:  # noqa: BLE001 - an unreachable store is "no table" to a reader
        return False


def local_table_exists(path: str) -> bool:
    """Is there a committed Delta table at the local ``path``: a ``_delta_log`` holding a commit
    (``<version>.json``) or a checkpoint (``<version>.checkpoint...parquet``)?

    A ``_delta_log`` alone is not one: Delta creates the folder when a table's first write begins
    and commits version 0 only after writing its data files, which in a lake's first minutes (a
    cold Spark, the first ingest or rollup) takes seconds; a reader then gets
    ``DELTA_TABLE_NOT_FOUND``.  Such a table is being created (:func:`local_table_pending`)."""
    log_dir = os.path.join(path.removeprefix("file://"), "_delta_log")
    try:
        names = os.listdir(log_dir)
    except OSError:
        return False
    return any(_is_version_file(n) for n in names)


def local_table_pending(path: str) -> bool:
    """A local Delta table whose first commit has not landed yet: a ``_delta_log`` and no commit.
    Its folder may already hold data files of that commit; they are not the table's rows."""
    log_dir = os.path.join(path.removeprefix("file://"), "_delta_log")
    return os.path.isdir(log_dir) and not local_table_exists(path)


def _is_version_file(name: str) -> bool:
    """``00000000000000000007.json``, ``...07.checkpoint.parquet``, ``...07.checkpoint.<uuid>.json``
    (not the ``.crc`` files, nor a writer's hidden ``.<name>.tmp``)."""
    return len(name) > 21 and name[:20].isdigit() and name[20] == "." and name.endswith((".json", ".parquet"))


def append(
    df: DataFrame,
    path: str,
    partition_by: list[str],
    *,
    app_id: str | None = None,
    version: int | None = None,
    metadata: dict | None = None,
) -> None:
    """Append ``df``; with ``app_id``/``version`` an idempotent write: Delta skips it when this
    app already committed a version >= ``version`` (a retried batch is never written twice)."""
    w = df.write.format("delta").mode("append").partitionBy(*partition_by)
    if app_id is not None:
        w = w.option("txnAppId", app_id).option("txnVersion", int(version))
    if metadata is not None:
        w = w.option("userMetadata", json.dumps(metadata, separators=(",", ":")))
    w.save(path)


def replace_partitions(df: DataFrame, path: str, partition_by: list[str]) -> None:
    """Overwrite exactly the partitions present in ``df`` (dynamic partition overwrite), in one
    commit: readers see the old rows of those partitions or the new ones, never a mix."""
    (
        df.write.format("delta")
        .mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy(*partition_by)
        .save(path)
    )


def replace_where(df: DataFrame, path: str, partition_by: list[str], condition: str) -> None:
    """Replace the rows matching ``condition`` with ``df`` in one commit (Delta ``replaceWhere``,
    which may name data columns): readers see the old rows or the new ones, never a mix.  Every
    row of ``df`` must match ``condition``.  The condition is SQL text: callers build it from
    values they computed and checked themselves (``lake.rollups``), never from input.  New columns
    of ``df`` are added to the table (``mergeSchema``): a rollup table written by an older version
    gains them on its next write, its older rows hold null there."""
    (
        df.write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", condition)
        .option("mergeSchema", "true")
        .partitionBy(*partition_by)
        .save(path)
    )


def last_commit(spark, path: str) -> tuple[int, dict | None] | None:
    """(version, our userMetadata or None) of the table's newest commit; None without a table."""
    if not table_exists(spark, path):
        return None
    local = _local_last_commit(path)
    if local is not None:
        return local
    if is_connect(spark):
        history = spark.sql(f"DESCRIBE HISTORY {table_ref(path)} LIMIT 1")
    else:
        from delta.tables import DeltaTable

        history = DeltaTable.forPath(spark, path).history(1)
    row = history.select("version", "userMetadata").first()
    if row is None:
        return None
    return int(row["version"]), _meta(row["userMetadata"])


def _local_last_commit(path: str) -> tuple[int, dict | None] | None:
    """:func:`last_commit` of a local table from its newest JSON commit file, without a Spark
    job (the ingest asks twice per batch; a history query is a Spark job, 0.36 s on one core
    timed alone); None when that cannot be read, and Delta is asked instead."""
    log_dir = _local_log_dir(path)
    if log_dir is None:
        return None
    versions = [int(n[:-5]) for n in os.listdir(log_dir) if n.endswith(".json") and n[:-5].isdigit()]
    if not versions:
        return None
    version = max(versions)
    try:
        info = _commit_info(log_dir, f"{version:020d}.json")
    except (OSError, ValueError, AttributeError):
        return None
    return version, None if info is None else _meta(info.get("userMetadata"))


def _local_log_dir(path: str) -> str | None:
    """The ``_delta_log`` directory of a table on the local filesystem; None for a URI or no table."""
    log_dir = os.path.join(path, "_delta_log")
    return None if _is_uri(path) or not os.path.isdir(log_dir) else log_dir


def _commit_info(log_dir: str, name: str) -> dict | None:
    """The ``commitInfo`` action of one JSON commit file, None when it has none.  Raises OSError
    for a file that cannot be read, ValueError for a line that is not JSON."""
    with open(os.path.join(log_dir, name), encoding="utf-8") as f:
        for line in f:
            info = json.loads(line).get("commitInfo")
            if info is not None:
                return info
    return None


def _meta(text: str | None) -> dict | None:
    if not text:
        return None
    try:
        out = json.loads(text)
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


def local_commits(path: str, kind: str = "ingest") -> list[dict]:
    """Our commit metadata (``{"kbot": kind, ...}``) from a local table's JSON commit files,
    without Spark (for ``kbot lake status``).  Commits older than Delta's log retention are gone."""
    log_dir = _local_log_dir(path)
    out: list[dict] = []
    if log_dir is None:
        return out
    for name in sorted(os.listdir(log_dir)):
        if not name.endswith(".json"):
            continue
        try:
            info = _commit_info(log_dir, name)
        except (OSError, ValueError):
            continue
        if info:
            meta = _meta(info.get("userMetadata"))
            if meta and meta.get("kbot") == kind:
                meta["timestamp_ms"] = info.get("timestamp")
                out.append(meta)
    return out
