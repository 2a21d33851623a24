"""Start Spark's JVM with its own output going to a log file, not to the console.

The console prints its prompt while the lake's Spark starts in the background; the JVM inherits
the process's stdout and stderr, so its start-up warnings (log4j, native-library and JDK notices)
used to print over the prompt. PySpark starts the JVM when the first SparkContext is made; this
starts it first, the same way (``pyspark.java_gateway.launch_gateway`` with the session's settings
passed as ``--conf``), but with the child's output sent to ``log_path``, and hands the gateway to
``SparkContext`` so the session built next uses it. Everything of ours still prints where it did.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)


def launch_quietly(master: str, settings: Mapping[str, str], log_path: Path) -> bool:
    """Launch the JVM for a classic (``local[*]``, ``spark://``) session with its output in
    ``log_path``; False (and PySpark launches it as usual) when that is not possible."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # noqa: SLF001 - already started: nothing to redirect
        return False
    conf = SparkConf(loadDefaults=False).setMaster(master)
    for key, value in settings.items():
        conf.set(key, value)
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out = log_path.open("ab")
    except OSError as exc:
        log.warning("Spark's output stays on the console: cannot open %s (%s)", log_path, exc)
        return False
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
    except Exception as exc:  # noqa: BLE001 - PySpark will try again the usual way and say why
        log.warning("could not start Spark with its output in %s: %s", log_path, exc)
        return False
    finally:
        out.close()  # the JVM holds its own copy of the descriptor
    SparkContext._ensure_initialized(gateway=gateway)  # noqa: SLF001 - the documented hook is launch_gateway's popen_kwargs
    log.info("Spark's JVM output goes to %s", log_path)
    return True
