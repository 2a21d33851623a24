"""The lake's Spark settings without Spark: the defaults every session gets, KBOT_SPARK_CONF's
parser and the Delta jars' ``spark.jars`` value. Pure Python, so the Connect server's bookkeeping
(``lake.connect``) and the settings' readers need not load pyspark; ``lake.spark`` builds the
session from them."""

from __future__ import annotations

from lake.jars import ensure_jars

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # the lake's tables are written by one ingest at a time; a retried idempotent append
    # (txnAppId/txnVersion) must not pay for a snapshot of every file's statistics
    "spark.databricks.delta.snapshotPartitions": "2",
}


CONF_ENV = "KBOT_SPARK_CONF"


def parse_conf(text: str) -> dict[str, str]:
    """``"key=value;key=value"`` (KBOT_SPARK_CONF) -> settings; ValueError naming a malformed item."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        k, sep, v = item.partition("=")
        if not sep:
            raise ValueError(f"{CONF_ENV}: expected key=value, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def delta_jars() -> str:
    """``spark.jars`` value for Delta (fetching them now if the cache is incomplete: before the
    session starts, never at query time)."""
    return ",".join(str(p) for p in ensure_jars())
