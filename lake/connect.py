"""A local Spark Connect server that keeps Spark warm for every bot process (``kbot lake serve``).

A one-shot ``kbot ask`` in a fresh process would otherwise pay a cold in-process Spark start (a
JVM, Delta's classes, code generation: tens of seconds on 2 cores).  ``kbot run`` and
``kbot lake serve`` start one Spark Connect server as a child process instead; every bot
process then reaches Spark through ``sc://127.0.0.1:<port>`` (``LakeService.from_settings``), a thin
gRPC client that answers in well under a second on a warm server.

The server is pyspark's own ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``
(pyspark 4.1 ships ``spark-connect_2.13`` in its jars folder but no ``sbin/start-connect-server.sh``),
with the Delta jars (``lake.jars``) and Delta's SQL extension and catalog, bound to 127.0.0.1.
Its master is ``local[2]`` by default or a standalone cluster (``spark://host:7077``).

Files, in ``<lake dir>/connect/`` (``KBOT_LAKE_DIR``, default ~/.kbot/lake)::

    server.json   pid, port, master, url, log: how ``kbot ask`` in another terminal finds it
    server.log    the server's output

Configuration (fields of the one settings object, ``kbot_settings``, which checks them)::

    KBOT_SPARK_CONNECT_PORT     port (default 15002)
    KBOT_SPARK_CONNECT_MEMORY   the server's driver memory (default 1g)
    KBOT_SPARK_CONF             extra Spark settings "k=v;k=v", given to the server too

Delta operations that exist only as Python ``DeltaTable`` methods (history, delete, vacuum,
``optimize().executeZOrderBy``) need Delta's own Connect plugin on the server
(``delta-connect-server``); ``docs/lake-connect.md`` says what runs through this server.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbot_settings import KbotSettings
from lake.errors import LakeError
from lake.layout import LakeLayout
from lake.spark_conf import DEFAULT_CONF, delta_jars, parse_conf

PORT_ENV = "KBOT_SPARK_CONNECT_PORT"
DEFAULT_MASTER = "local[2]"
HOST = "127.0.0.1"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
APP_NAME = "kbot-spark-connect"
STATE_NAME = "server.json"
LOG_NAME = "server.log"

#: Popen objects of servers this process started, by pid: reaped on stop so that no zombie stays
_CHILDREN: dict[int, subprocess.Popen] = {}


class ConnectServerError(LakeError):
    """The Spark Connect server could not be started or stopped (the message says why)."""


class BadInput(ConnectServerError, ValueError):
    """A port or master that cannot be right (the command's input, not the server)."""


@dataclass
class ServerInfo:
    """What the state file records, and what ``status`` found."""

    pid: int
    port: int
    master: str
    log: str
    host: str = HOST
    started_at: str = ""
    state: str = "running"  # running | starting | stopped | dead
    started: bool = False  # started by this call (ensure_server), so its caller may stop it
    spark_version: str | None = None
    warm_s: float | None = None
    # the Connect session every bot process queries in (``query_url``); empty in a state file
    # written before sessions were shared
    session_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def query_url(self) -> str:
        """The URL the bot's query sessions connect with: the server's shared session.  The
        Connect server gives every session a class loader of its own, so the code Spark generates
        for a query is compiled and JIT-warmed again in each new session: on the first question
        of a fresh session hot partitions took 5.8 s against 2.6-3.1 s in a session that had
        asked before (30,000 partitions, 2 cores).  A one-shot `kbot ask` is a fresh process,
        and in a session of its own every question it asks would be such a first question."""
        return f"{self.url}/;session_id={self.session_id}" if self.session_id else self.url

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["url"] = self.url
        out.pop("extra", None)
        return out


# --------------------------------------------------------------------------- files


def state_dir(settings: KbotSettings, lake_dir: str | os.PathLike[str] | None = None) -> Path:
    return (
        LakeLayout.from_settings(settings, lake_dir=None if lake_dir is None else str(lake_dir)).state_dir / "connect"
    )


def default_port(settings: KbotSettings) -> int:
    """``KBOT_SPARK_CONNECT_PORT`` (default 15002), checked by the settings (a whole number from 1
    to 65535) when they were loaded."""

    return settings.kbot_spark_connect_port


def check_port(value: str | int, what: str = "--port") -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise BadInput(f"{what}: expected a port number, got {value!r}") from None
    if not 1 <= port <= 65535:
        raise BadInput(f"{what}: {port} is not a TCP port (1-65535)")
    return port


def check_master(master: str) -> str:
    """The server's own master: ``local[...]``, ``spark://``, ``yarn`` or ``k8s://`` (never ``sc://``:
    a Connect server cannot sit on another Connect server)."""
    m = master.strip()
    if m == "local" or m.startswith(("local[", "spark://", "k8s://")) or m == "yarn":
        return m
    raise BadInput(f"--master: expected local[N], spark://host:port, yarn or k8s://..., got {master!r}")


def _read_state(directory: Path) -> ServerInfo | None:
    try:
        data = json.loads((directory / STATE_NAME).read_text())
        return ServerInfo(
            pid=int(data["pid"]),
            port=int(data["port"]),
            master=str(data["master"]),
            log=str(data["log"]),
            host=str(data.get("host") or HOST),
            started_at=str(data.get("started_at") or ""),
            session_id=str(data.get("session_id") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_state(directory: Path, info: ServerInfo) -> None:
    data = {
        k: v
        for k, v in info.to_dict().items()
        if k in ("pid", "port", "master", "log", "host", "started_at", "url", "session_id")
    }
    tmp = directory / f".{STATE_NAME}.{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, directory / STATE_NAME)  # a reader sees the old file or the whole new one


def _remove_state(directory: Path, pid: int) -> None:
    info = _read_state(directory)
    if info is not None and info.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            (directory / STATE_NAME).unlink()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One start or stop at a time per lake: two `kbot run` must not start two servers."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# --------------------------------------------------------------------------- processes


def _alive(pid: int) -> bool:
    """Is ``pid`` a live (not zombie) process?"""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(pid, None)
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _is_our_server(pid: int, port: int) -> bool:
    """The pid is still the server the state file names (not a recycled pid): its command line
    has the Connect server's class and our port setting."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return _alive(pid)  # no /proc (not Linux): trust the pid
    args = [a.decode(errors="replace") for a in cmdline]
    return SERVER_CLASS in args and f"spark.connect.grpc.binding.port={port}" in args


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Does something accept TCP connections on host:port?"""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def answers(url: str) -> str:
    """A Spark Connect round trip to ``url``; returns the server's Spark version (raises when it
    does not answer).  The session is released right after."""
    from pyspark.sql import SparkSession

    from lake.spark import fail_fast

    spark = SparkSession.builder.remote(url).create()
    fail_fast(spark)
    try:
        return str(spark.version)
    finally:
        with contextlib.suppress(Exception):
            spark.stop()


def spark_home() -> Path:
    """pyspark's own installation: its spark-submit, its jars (spark-connect_2.13 among them).
    The client and the server must be the same Spark, so $SPARK_HOME is not consulted."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def server_conf(
    port: int, master: str, settings: KbotSettings, conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The server's Spark settings: the lake's defaults (Delta extension and catalog, UTC, ...),
    the Connect port bound to loopback, then ``KBOT_SPARK_CONF`` and ``conf``."""

    out = dict(DEFAULT_CONF)
    if master.startswith("local"):
        # incident-window queries shuffle little data: one shuffle partition per core
        cores = master[len("local[") : -1] if master.startswith("local[") else "1"
        out["spark.sql.shuffle.partitions"] = cores if cores.isdigit() else str(os.cpu_count() or 2)
    out.update(
        {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(port),
            # the bot's processes share one query session (ServerInfo.query_url): an idle hour
            # (the default) would close it between incidents, and the next process would find
            # a closed session and have to start a cold one
            "spark.connect.session.manager.defaultSessionTimeout": "7d",
            "spark.driver.memory": settings.kbot_spark_connect_memory.strip(),
            # Python UDFs, if any, run with this interpreter (the venv), not the first python3 on PATH
            "spark.pyspark.python": sys.executable,
        }
    )
    out.update(parse_conf(settings.kbot_spark_conf or ""))
    out.update(conf or {})
    return out


def server_command(port: int, master: str, settings: KbotSettings, conf: Mapping[str, str] | None = None) -> list[str]:
    """The spark-submit command line (a list: nothing goes through a shell)."""

    if not any((spark_home() / "jars").glob("spark-connect_*.jar")):
        raise ConnectServerError(
            f"pyspark's installation ({spark_home()}) has no spark-connect jar in jars/; "
            "the Spark Connect server needs pyspark >= 4.0"
        )
    spark_conf = server_conf(port, master, settings, conf)
    jars = ",".join(filter(None, [spark_conf.pop("spark.jars", ""), delta_jars()]))
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--name",
        APP_NAME,
        "--master",
        master,
        "--jars",
        jars,
    ]
    for key, value in sorted(spark_conf.items()):
        cmd += ["--conf", f"{key}={value}"]
    return cmd


def _log_tail(path: str, limit: int = 1500) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    wanted = [ln for ln in lines if "ERROR" in ln or "Exception" in ln or "rror:" in ln] or lines
    return "\n".join(wanted[-8:])[-limit:]


# --------------------------------------------------------------------------- API


def status(
    settings: KbotSettings, lake_dir: str | os.PathLike[str] | None = None, *, deep: bool = False
) -> ServerInfo | None:
    """The server the state file names, with ``state``: ``running`` (its pid is the server and
    its port accepts connections; ``deep`` also makes a Connect round trip and fills
    ``spark_version``), ``starting`` (alive, port not open yet) or ``dead``.  None without a
    state file."""
    info = _read_state(state_dir(settings, lake_dir))
    if info is None:
        return None
    if not (_alive(info.pid) and _is_our_server(info.pid, info.port)):
        info.state = "dead"
        return info
    if not port_open(info.host, info.port):
        info.state = "starting"
        return info
    info.state = "running"
    if deep:
        try:
            info.spark_version = answers(info.url)
        except Exception:  # noqa: BLE001 - the port is open but Spark does not answer (yet)
            info.state = "starting"
    return info


def query_url(settings: KbotSettings, lake_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The running server's ``ServerInfo.query_url`` (its shared session), else None."""
    info = status(settings, lake_dir)
    return info.query_url if info is not None and info.state == "running" else None


def running_url(settings: KbotSettings, lake_dir: str | os.PathLike[str] | None = None) -> str | None:
    """``sc://127.0.0.1:<port>`` when this lake's Connect server runs, else None.  Cheap (a file,
    /proc and one TCP connect): every `kbot ask` calls it."""
    info = status(settings, lake_dir)
    return info.url if info is not None and info.state == "running" else None


def start_server(
    settings: KbotSettings,
    port: int | None = None,
    master: str | None = None,
    *,
    lake_dir: str | os.PathLike[str] | None = None,
    conf: Mapping[str, str] | None = None,
    timeout: float = 180.0,
) -> ServerInfo:
    """Start the server in the background (or return the one already running: ``started`` False)
    and wait until it answers a Connect request.  Raises :class:`ConnectServerError` when the
    port is taken by something else, or the server exits or does not answer within ``timeout``
    (then it is stopped; the log's last errors are in the message).  The server's environment is
    the one the settings were loaded from (``settings.environ``)."""
    port = default_port(settings) if port is None else check_port(port)
    master = check_master(master or DEFAULT_MASTER)
    directory = state_dir(settings, lake_dir)
    with _locked(directory):
        current = status(settings, lake_dir)
        if current is not None and current.state in ("running", "starting"):
            if current.port != port or current.master != master:
                raise ConnectServerError(
                    f"a Spark Connect server for this lake already runs on {current.url} (master {current.master}); "
                    "stop it first (kbot lake serve --stop)"
                )
            return _wait_answers(current, None, timeout)
        if current is not None:
            _remove_state(directory, current.pid)
        if port_open(HOST, port):
            raise ConnectServerError(
                f"port {port} on {HOST} is already in use by another process; choose another with --port or {PORT_ENV}"
            )
        log_path = directory / LOG_NAME
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        cmd = server_command(port, master, settings, conf)
        child_env = dict(settings.environ)
        child_env.setdefault("PYSPARK_PYTHON", sys.executable)
        # spark-submit's launcher sizes a server class's heap from SPARK_DAEMON_MEMORY before
        # spark.driver.memory: a value meant for other daemons (a standalone master) must not win
        child_env["SPARK_DAEMON_MEMORY"] = server_conf(port, master, settings, conf)["spark.driver.memory"]
        child_env.pop("SPARK_HOME", None)  # spark-submit finds its own home: pyspark's
        with os.fdopen(fd, "a") as log:
            log.write(f"\n--- {_now()} kbot: starting the Spark Connect server on {HOST}:{port}, master {master}\n")
            log.flush()
            # a session of its own: Ctrl-C in the terminal that started it must not kill the
            # server that other terminals use; stop_server signals its whole process group
            child = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env,
                start_new_session=True,
            )
        _CHILDREN[child.pid] = child
        info = ServerInfo(
            pid=child.pid,
            port=port,
            master=master,
            log=str(log_path),
            started_at=_now(),
            state="starting",
            started=True,
            session_id=str(uuid.uuid4()),
        )
        _write_state(directory, info)
        try:
            return _wait_answers(info, child, timeout)
        except BaseException:
            _terminate(info.pid, 20.0)
            _remove_state(directory, info.pid)
            raise


def _wait_answers(info: ServerInfo, child: subprocess.Popen | None, timeout: float) -> ServerInfo:
    """Wait for the condition "a Connect request is answered", checking the child's exit between
    attempts (its exit ends the wait at once, with the log's errors)."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while True:
        if child is not None and child.poll() is not None:
            raise ConnectServerError(
                f"the Spark Connect server exited (code {child.returncode}) before answering; "
                f"log {info.log}:\n{_log_tail(info.log)}"
            )
        if child is None and not _alive(info.pid):
            raise ConnectServerError(f"the Spark Connect server (pid {info.pid}) exited; log {info.log}")
        if port_open(info.host, info.port):
            try:
                info.spark_version = answers(info.url)
                info.state = "running"
                return info
            except Exception as exc:  # noqa: BLE001 - port open, service not ready: try again
                last_error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        if time.monotonic() >= deadline:
            raise ConnectServerError(
                f"the Spark Connect server did not answer on {info.url} within {timeout:.0f} s"
                + (f" ({last_error})" if last_error else "")
                + f"; log {info.log}"
            )
        # between attempts: wake as soon as the child exits, else after half a second
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(0.5)
        else:
            time.sleep(0.5)


def _terminate(pid: int, timeout: float) -> bool:
    """SIGTERM the server's process group (spark-submit execs the JVM, which may have children),
    wait for it to exit, SIGKILL after ``timeout``.  True when it is gone."""
    for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        child = _CHILDREN.get(pid)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            if child is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(0.25)
            else:
                time.sleep(0.25)
        if not _alive(pid):
            _CHILDREN.pop(pid, None)
            return True
    return not _alive(pid)


def stop_server(
    settings: KbotSettings, lake_dir: str | os.PathLike[str] | None = None, *, timeout: float = 30.0
) -> ServerInfo | None:
    """Stop the lake's Connect server (SIGTERM, then SIGKILL after ``timeout``) and remove its
    state file.  Returns what was stopped (``state`` "stopped"), None when none was recorded."""
    directory = state_dir(settings, lake_dir)
    with _locked(directory):
        info = _read_state(directory)
        if info is None:
            return None
        if _alive(info.pid) and _is_our_server(info.pid, info.port):
            if not _terminate(info.pid, timeout):
                raise ConnectServerError(f"the Spark Connect server (pid {info.pid}) did not exit")
        _remove_state(directory, info.pid)
        info.state = "stopped"
        return info


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


__all__ = [
    "BadInput",
    "ConnectServerError",
    "ServerInfo",
    "answers",
    "check_master",
    "check_port",
    "default_port",
    "port_open",
    "running_url",
    "query_url",
    "server_command",
    "spark_home",
    "start_server",
    "status",
    "stop_server",
    "PORT_ENV",
]
