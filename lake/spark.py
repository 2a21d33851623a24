"""Build the SparkSession the bot queries the lake with (Delta Lake enabled).

``build_session("local[*]")`` starts an in-process Spark (classic, Py4J);
``build_session("sc://host:15002")`` connects to a Spark Connect server
instead (needs pyspark's connect extras: grpcio, pandas, pyarrow; the server must
have Delta Lake on its classpath and its extension configured).

Defaults that matter for the lake:

* Delta Lake: the jars fetched by ``lake.jars`` (``scripts/fetch_delta.sh``) on ``spark.jars``,
  Delta's SQL extension and catalog (``OPTIMIZE``, ``VACUUM``, ``DeltaTable``);
* ``spark.sql.session.timeZone=UTC``: the lake is UTC end to end;
* ``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS``: Spark's default
  (INT96) is deprecated and other readers (DuckDB, pyarrow) prefer INT64;
* a small ``spark.sql.shuffle.partitions`` (incident-window queries touch little data);
* the UI off (a chat bot has no one looking at it).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Mapping

from pyspark.sql import SparkSession

from lake.quiet_spark import launch_quietly
from lake.spark_conf import DEFAULT_CONF, delta_jars

log = logging.getLogger(__name__)

# Set before pyspark's Connect client loads grpcio. grpcio >= 1.81 restarts its poller thread in a
# forked child, and that child then dies before exec() when subprocess closes its descriptors
# (grpc/grpc#43055): after a Spark Connect session existed, a JVM launched by Popen (the in-process
# fallback's Spark, a collector) can fail to start. The bot never runs gRPC in a forked child, so
# gRPC's fork handlers serve it nothing. (An environment variable, because gRPC reads only that.)
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def session_settings(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting :func:`build_session` gives a session for ``master``: :data:`DEFAULT_CONF`,
    then ``conf``; a classic master also gets the Delta jars on ``spark.jars``.  Whoever starts
    the JVM another way (e.g. ``lake.quiet_spark.launch_quietly``) must pass these, or the
    session has no Delta Lake."""
    settings = dict(DEFAULT_CONF)
    settings.update(conf or {})
    if master.startswith("sc://"):
        # a Connect client can only set (runtime) SQL confs on its server session; the
        # extension and catalog are static and belong to the server's configuration.  The
        # shuffle width is the server's too (sized to its cores, lake.connect.server_conf):
        # the default here is for an in-process session and is sent only when asked for
        static = ("spark.sql.extensions", "spark.sql.catalog.spark_catalog")
        return {
            k: v
            for k, v in settings.items()
            if k.startswith("spark.sql.")
            and k not in static
            and (k != "spark.sql.shuffle.partitions" or k in (conf or {}))
        }
    settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars", ""), delta_jars()]))
    return settings


def build_session(
    master: str = "local[*]",
    app_name: str = "kbot",
    conf: Mapping[str, str] | None = None,
    log_path: Path | None = None,
) -> SparkSession:
    """Return a (possibly existing) SparkSession for ``master``.

    ``master`` is a classic master URL (``local[2]``, ``spark://...``) or a
    Spark Connect URL (``sc://host:port``).  ``conf`` overrides :data:`DEFAULT_CONF`.
    ``log_path`` (the console's KBOT_SPARK_LOG): an in-process JVM's start-up output goes there,
    not over the prompt.
    """
    settings = session_settings(master, conf)
    if master.startswith("sc://"):
        # Lazy until the first request: give it the short retry policy before any round trip
        # (the builder would send the settings with the default policy, 10 minutes when the
        # server is gone), then send them.
        session = SparkSession.builder.remote(master).create()
        fail_fast(session)
        shared = SESSION_PARAM in master
        if shared:
            # other processes query in this session (lake.connect.ServerInfo.query_url): stopping
            # this client must close its channel only, not release the session on the server
            session.release_session_on_close = False
        try:
            for key, value in settings.items():
                session.conf.set(key, value)
        except Exception as exc:
            if not (shared and "SESSION_CLOSED" in str(exc)):
                raise
            # the shared session was released or expired: this process queries in one of its own
            log.info("the shared Spark Connect session is closed; using a session of this process")
            return build_session(master.split(SESSION_PARAM)[0].rstrip("/;"), app_name, conf, log_path)
        return session
    _leave_connect_mode()
    # Python workers must be this interpreter (the venv with pyspark's dependencies), not
    # whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if log_path is not None:
        # The console passes this: the JVM's start-up noise goes to the log, not over the prompt.
        launch_quietly(master, {**settings, "spark.app.name": app_name}, log_path)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


#: how a Connect URL names the server session to join (pyspark's ChannelBuilder parameter)
SESSION_PARAM = ";session_id="

#: Spark Connect's own retry policy waits at least 10 minutes for a server that does not answer,
#: in every call - and once more at exit, where the client cleans its ML cache. A bot whose
#: Connect server went away (`kbot run` stopped) must say "lake unavailable" now, and a one-shot
#: `kbot ask` must exit now: a few quick retries ride out a blip, nothing longer.
CONNECT_RETRIES = 3
CONNECT_MAX_BACKOFF_MS = 1000


def _leave_connect_mode() -> None:
    """pyspark switches the whole process to Spark Connect (SPARK_CONNECT_MODE_ENABLED) at the first
    remote session and never back, so after a Connect server that did not answer, the in-process
    fallback would fail with CONNECT_URL_NOT_SET. One process runs one kind of session: stop the
    remote one left behind (it fails fast) and leave Connect mode before building a classic one."""
    if "SPARK_CONNECT_MODE_ENABLED" not in os.environ:
        return
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    left = RemoteSession.getActiveSession()
    if left is not None:
        try:
            left.stop()
        except Exception:  # noqa: BLE001 - a server that is gone cannot release the session
            pass
    os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    os.environ.pop("SPARK_LOCAL_REMOTE", None)


def fail_fast(session: SparkSession) -> None:
    """Give a Spark Connect session a short retry policy (see CONNECT_RETRIES)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    session.client.set_retry_policies(  # type: ignore[attr-defined]
        [DefaultPolicy(max_retries=CONNECT_RETRIES, max_backoff=CONNECT_MAX_BACKOFF_MS)]
    )
