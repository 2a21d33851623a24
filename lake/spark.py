"""Build the SparkSession the bot queries the lake with.

``build_session("local[*]")`` starts an in-process Spark (classic, Py4J);
``build_session("sc://host:15002")`` connects to a Spark Connect server
instead (needs pyspark's connect extras: grpcio, pandas, pyarrow).

Defaults that matter for the lake:

* ``spark.sql.session.timeZone=UTC``: the lake is UTC end to end;
* ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS``: Spark's default
  (INT96) is deprecated and other readers (DuckDB, pyarrow) prefer INT64;
* a small ``spark.sql.shuffle.partitions`` (incident-window queries touch little data);
* the UI off (a chat bot has no one looking at it).
"""

from __future__ import annotations

import os
import sys

from typing import Mapping

from pyspark.sql import SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def build_session(
    master: str = "local[*]",
    app_name: str = "kbot",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return a (possibly existing) SparkSession for ``master``.

    ``master`` is a classic master URL (``local[2]``, ``spark://...``) or a
    Spark Connect URL (``sc://host:port``).  ``conf`` overrides :data:`DEFAULT_CONF`.
    """
    settings = dict(DEFAULT_CONF)
    settings.update(conf or {})
    if master.startswith("sc://"):
        builder = SparkSession.builder.remote(master)
        # a Connect client can only set (runtime) SQL confs on its server session
        settings = {k: v for k, v in settings.items() if k.startswith("spark.sql.")}
    else:
        # Python workers must be this interpreter (the venv with pyspark's dependencies), not
        # whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master)
    builder = builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
