"""A real local Apache Kafka (KRaft) cluster: 1 controller + 3 brokers.

Every node is its own JVM, ``java -cp <libs>/* kafka.Kafka server.properties``,
started detached (own session, pid file, stdout/stderr to ``stdout.log``,
log4j2 files in ``<node>/logs``) and running the Prometheus JMX exporter as a
``-javaagent`` on its own loopback port (rules: ``config/jmx_rules.yaml``; the
controller runs one too because in KRaft the controller metrics such as
ActiveControllerCount / OfflinePartitionsCount live only there).

Port layout for ``port_base`` P (default 19090 for "dev"; tests use 29090)::

    node                      listener   metrics (/metrics)
    controller  id 1          P          P+10
    broker      id 101        P+1        P+11
    broker      id 102        P+2        P+12
    broker      id 103        P+3        P+13

Topology options (the failure lab, ``lab/``): ``controllers=3`` runs a three-voter
quorum (ids 1, 2, 3; controller 1 keeps port P, controllers 2 and 3 take P+4 and P+5,
metrics +10 as usual), ``overrides`` appends settings per role ("broker"/"controller") or per
node id to the rendered properties (a later key wins in java.util.Properties), and
``extra_log_dirs`` gives a broker more log directories next to its ``data/`` (e.g. a small
filesystem the lab mounts, to fill or break one disk of a broker).

Directory layout under ``base_dir`` (default ``<cache root>/clusters/<name>``,
cache root = ``$KBOT_CACHE_DIR`` or ``~/.cache/kbot``)::

    cluster.json              cluster id (generated once), versions, ports
    node-<id>/server.properties, node.pid, data/, logs/{server,controller,state-change,stdout}.log

Test settings (short session/lag timeouts etc.) are documented in
``config/broker.properties`` and ``config/controller.properties``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import shutil
import signal
import string
import subprocess
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from localkafka import fetch, procs
from localkafka.common import ClusterError, quiet_logger
from localkafka.faults import FaultInjector
from localkafka.metrics import ACTIVE_CONTROLLERS, metric_value, scrape

CONFIG_DIR = Path(__file__).with_name("config")
CONTROLLER_ID = 1
CONTROLLER_IDS = (1, 2, 3)  # with controllers=3; ids 2 and 3 sit after the brokers' ports
BROKER_IDS = (101, 102, 103)
METRICS_OFFSET = 10
DEFAULT_PORT_BASE = 19090

# Heaps sized for a 2-core / 24 GB box that also runs Spark. Serial GC: with a
# small heap it needs no GC worker threads competing for the 2 cores.
JVM_OPTS = {
    "controller": ["-Xms64m", "-Xmx256m"],
    "broker": ["-Xms128m", "-Xmx512m"],
}
COMMON_JVM_OPTS = [
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
]

log = logging.getLogger(__name__)


def ephemeral_port_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def port_layout_warning(port_base: int, controllers: int = 1) -> str | None:
    """Ports inside the kernel's ephemeral range are unsafe for a broker that
    gets killed: a client reconnecting to the dead port can be handed that
    same port as its *source* port (TCP self-connect), and the restarted
    broker then fails with "Address already in use". Seen in practice."""
    lo, hi = ephemeral_port_range()
    first, last = port_base, port_base + METRICS_OFFSET + len(BROKER_IDS) + controllers - 1
    if first <= hi and last >= lo:
        return (
            f"ports {first}-{last} overlap the ephemeral port range {lo}-{hi}; a killed broker "
            f"may fail to restart with 'Address already in use' - use a port_base below {lo - 20}"
        )
    return None


@dataclass(frozen=True)
class Node:
    role: str  # "controller" | "broker"
    node_id: int
    port: int
    metrics_port: int
    dir: Path

    @property
    def props_file(self) -> Path:
        return self.dir / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.dir / "node.pid"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def pid(self) -> int | None:
        """Pid if the JVM exists (running or SIGSTOPped), else None."""
        return procs.live_pid(self.pid_file, str(self.props_file))


def new_cluster_id() -> str:
    """Same format as Kafka's Uuid.randomUuid(): url-safe base64 of 16 random
    bytes without padding; Kafka rejects ids starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def admin_client(bootstrap: str, **extra):
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "logger": quiet_logger(),
            "socket.connection.setup.timeout.ms": 3000,
            # In KRaft the "controller" in metadata is just some live broker;
            # librdkafka routes some admin calls to it and would keep a dead
            # one for metadata.max.age (5 min) without frequent refreshes.
            "topic.metadata.refresh.interval.ms": 1000,
            # A SIGSTOPped broker keeps its TCP connections "up" but never
            # answers; librdkafka picks a random up broker per metadata
            # call, so drop silent connections after 5 s (default 60 s).
            "socket.timeout.ms": 5000,
            **extra,
        }
    )


def recorded_meta(base_dir: Path) -> dict:
    """The cluster.json of a cluster created in ``base_dir`` ({} when none was, or it is unreadable)."""
    try:
        meta = json.loads((base_dir / "cluster.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


class LocalCluster:
    @classmethod
    def named(cls, name: str) -> "LocalCluster":
        """The cluster ``name`` in its default folder, on the port base it was created with (its
        cluster.json), else the default one: `kbot cluster up --port-base N` then `kbot run`."""
        folder = fetch.cache_root() / "clusters" / name
        port_base = recorded_meta(folder.expanduser()).get("port_base", DEFAULT_PORT_BASE)
        return cls(name=name, port_base=port_base if isinstance(port_base, int) else DEFAULT_PORT_BASE)

    def __init__(
        self,
        name: str = "dev",
        base_dir: str | Path | None = None,
        port_base: int = DEFAULT_PORT_BASE,
        *,
        controllers: int | None = None,
        overrides: dict[str | int, dict[str, str]] | None = None,
        extra_log_dirs: dict[int, list[str | Path]] | None = None,
        brokers: int = 3,
    ):
        self.name = name
        self.base_dir = Path(base_dir or fetch.cache_root() / "clusters" / name).expanduser().resolve()
        if controllers is None:  # as the cluster was created (`kbot cluster up --controllers 3`), else one
            controllers = recorded_meta(self.base_dir).get("controllers", 1)
        if controllers not in (1, 3):
            raise ClusterError(f"controllers must be 1 or 3, not {controllers}")
        if not 1 <= brokers <= len(BROKER_IDS):
            raise ClusterError(f"brokers must be 1 to {len(BROKER_IDS)}, not {brokers}")
        self.port_base = port_base
        self.controllers = {}
        for i, cid in enumerate(CONTROLLER_IDS[:controllers]):
            # controller 1 keeps port P (the single-controller layout); 2 and 3 follow the brokers
            port = port_base if i == 0 else port_base + len(BROKER_IDS) + i
            self.controllers[cid] = Node("controller", cid, port, port + METRICS_OFFSET, self.base_dir / f"node-{cid}")
        self.controller = self.controllers[CONTROLLER_ID]
        self.brokers = {
            bid: Node(
                "broker", bid, port_base + 1 + i, port_base + METRICS_OFFSET + 1 + i, self.base_dir / f"node-{bid}"
            )
            for i, bid in enumerate(BROKER_IDS[:brokers])
        }
        self.overrides = {k: dict(v) for k, v in (overrides or {}).items()}
        self.extra_log_dirs = {b: [Path(d) for d in dirs] for b, dirs in (extra_log_dirs or {}).items()}
        unknown = set(self.extra_log_dirs) - set(self.brokers)
        if unknown:
            raise ClusterError(f"extra_log_dirs for unknown broker(s) {sorted(unknown)}")
        self._faults = None
        self._admin = None
        self.port_warning = port_layout_warning(port_base, controllers)
        if self.port_warning:
            log.warning("cluster %s: %s", name, self.port_warning)

    # ---- addresses -------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return [*self.controllers.values(), *self.brokers.values()]

    def log_dirs(self, node: Node) -> list[Path]:
        """Every log directory of ``node``: ``data/`` first, then its extra ones."""
        return [node.dir / "data", *self.extra_log_dirs.get(node.node_id, [])]

    @property
    def voters(self) -> str:
        return ",".join(f"{c.node_id}@127.0.0.1:{c.port}" for c in self.controllers.values())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.brokers.values())

    @property
    def controller_bootstrap(self) -> str:
        return f"127.0.0.1:{self.controller.port}"

    @property
    def metrics_urls(self) -> dict[int, str]:
        return {n.node_id: n.metrics_url for n in self.nodes}

    @property
    def faults(self):
        if self._faults is None:
            self._faults = FaultInjector(self)
        return self._faults

    def node(self, node_id: int) -> Node:
        if node_id in self.controllers:
            return self.controllers[node_id]
        try:
            return self.brokers[node_id]
        except KeyError:
            raise ClusterError(
                f"no node {node_id} in cluster {self.name!r} (controllers: "
                f"{list(self.controllers)}, brokers: {list(self.brokers)})"
            ) from None

    def client_conf(self) -> dict:
        """confluent-kafka settings for a client of this cluster (secure mode adds SASL/TLS)."""
        return {"bootstrap.servers": self.bootstrap_servers}

    def kafka_python_conf(self) -> dict:
        """The same for kafka-python clients."""
        return {"bootstrap_servers": self.bootstrap_servers.split(",")}

    def admin(self, **extra):
        """A confluent_kafka AdminClient for the brokers. Without ``extra`` the
        same client is reused (it reconnects by itself when brokers die), so
        polling loops don't create a librdkafka handle per poll."""
        if extra:
            return admin_client(self.bootstrap_servers, **extra)
        if self._admin is None:
            self._admin = admin_client(self.bootstrap_servers)
        return self._admin

    # ---- one-time setup --------------------------------------------------
    def _meta(self) -> dict:
        """cluster.json: created once; later runs must agree on ports."""
        path = self.base_dir / "cluster.json"
        want = {
            "name": self.name,
            "port_base": self.port_base,
            "kafka_version": fetch.pom_versions().kafka,
            "controllers": len(self.controllers),
        }
        if path.exists():
            meta = json.loads(path.read_text())
            if meta.get("port_base") != self.port_base:
                raise ClusterError(
                    f"{self.base_dir} was created with port_base {meta.get('port_base')}, "
                    f"not {self.port_base}; use another base_dir or delete it"
                )
            # a formatted KRaft quorum cannot change its voter set by editing the properties
            if meta.get("controllers", 1) != len(self.controllers):
                raise ClusterError(
                    f"{self.base_dir} was created with {meta.get('controllers', 1)} controller(s), "
                    f"not {len(self.controllers)}; use another base_dir or delete it"
                )
            return meta
        self.base_dir.mkdir(parents=True, exist_ok=True)
        meta = {**want, "cluster_id": new_cluster_id()}
        path.write_text(json.dumps(meta, indent=1))
        return meta

    def _render(self, node: Node) -> None:
        tmpl = string.Template((CONFIG_DIR / f"{node.role}.properties").read_text())
        node.props_file.parent.mkdir(parents=True, exist_ok=True)
        text = tmpl.substitute(
            node_id=node.node_id,
            port=node.port,
            data_dir=",".join(str(d) for d in self.log_dirs(node)),
            voters=self.voters,
        )
        extra = {**self.overrides.get(node.role, {}), **self.overrides.get(node.node_id, {})}
        if extra:
            text += "\n# topology overrides (LocalCluster(overrides=...))\n" + "".join(
                f"{k}={v}\n" for k, v in extra.items()
            )
        node.props_file.write_text(text)

    def _java_cmd(self, libs: Path, node: Node, main: str, *args: str) -> list[str]:
        return [
            "java",
            *COMMON_JVM_OPTS,
            *JVM_OPTS[node.role],
            f"-Dkafka.logs.dir={node.log_dir}",
            f"-Dlog4j2.configurationFile={CONFIG_DIR / 'log4j2.xml'}",
            "-cp",
            f"{libs}/*",
            main,
            *args,
        ]

    def _format(self, libs: Path, cluster_id: str, nodes: list[Node], timeout: float = 120.0) -> None:
        """kafka-storage format (kafka.tools.StorageTool in 4.x) for nodes
        whose data dir was never formatted; all in parallel, within ``timeout`` seconds (a JVM
        start each: on a loaded machine that alone can take minutes)."""
        todo = [n for n in nodes if not all((d / "meta.properties").exists() for d in self.log_dirs(n))]
        if not todo:
            return

        def run(n: Node):
            n.log_dir.mkdir(parents=True, exist_ok=True)
            return n, subprocess.run(
                self._java_cmd(
                    libs,
                    n,
                    "kafka.tools.StorageTool",
                    "format",
                    "--ignore-formatted",
                    "-t",
                    cluster_id,
                    "-c",
                    str(n.props_file),
                ),
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
            )

        deadline = time.monotonic() + timeout
        with ThreadPoolExecutor(len(todo)) as pool:
            try:
                done = list(pool.map(run, todo))
            except subprocess.TimeoutExpired:
                raise ClusterError(
                    f"storage format did not finish within the {timeout:.1f}s left of the timeout (the machine is "
                    "busy? give a longer --timeout)"
                ) from None
            for n, res in done:
                if res.returncode != 0:
                    raise ClusterError(
                        f"storage format of node {n.node_id} failed: {(res.stdout + res.stderr).strip()[-2000:]}"
                    )

    # ---- lifecycle -------------------------------------------------------
    def start_node(self, node: Node, libs: Path | None = None) -> int:
        """Start one node if it is not running; returns its pid."""
        pid = node.pid()
        if pid:
            return pid
        libs = libs or fetch.ensure_jars()
        for port in (node.port, node.metrics_port):
            # a just-stopped JVM may need a moment to release its sockets
            deadline = time.monotonic() + 10
            while procs.port_open(port) and time.monotonic() < deadline:
                time.sleep(0.2)
            if procs.port_open(port):
                raise ClusterError(
                    f"port {port} for node {node.node_id} is already in use "
                    f"by another process (check `ss -ltnp | grep {port}`)"
                )
        node.log_dir.mkdir(parents=True, exist_ok=True)
        rules = CONFIG_DIR / "jmx_rules.yaml"
        cmd = self._java_cmd(libs, node, "kafka.Kafka", str(node.props_file))
        agent = f"-javaagent:{fetch.agent_jar()}=127.0.0.1:{node.metrics_port}:{rules}"
        cmd.insert(1, agent)
        return procs.spawn(cmd, node.log_dir / "stdout.log", node.pid_file)

    @contextlib.contextmanager
    def _locked(self):
        """Serialise up()/down() of the same cluster dir across processes
        (e.g. `kbot cluster up` while a test session starts it)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with open(self.base_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def up(
        self, timeout: float = 180.0, progress: Callable[[str], None] | None = None, *, metrics: bool = True
    ) -> "LocalCluster":
        """Start whatever is not running and wait until healthy. Idempotent:
        a healthy running cluster is left alone; stale pid files are ignored. ``timeout`` bounds
        every step (storage format, start, wait). ``progress`` hears what the wait is waiting for
        (see wait_ready). ``metrics=False``: ready when the brokers serve, whatever the exporters do
        (`kbot cluster up`, `kbot run`: a slow /metrics is reported, never a failed start)."""
        deadline = time.monotonic() + timeout
        if self._all_running() and self._healthy(5, metrics=metrics):
            return self
        libs = fetch.ensure_jars()
        with self._locked():
            meta = self._meta()
            for n in self.nodes:
                self._render(n)
            todo = [n for n in self.nodes if not n.pid()]
            self._format(libs, meta["cluster_id"], todo, timeout=max(0.1, deadline - time.monotonic()))
            for n in self.nodes:
                pid = n.pid()
                if pid and procs.is_stopped(pid):
                    procs.signal_pid(pid, signal.SIGCONT)  # `up` means running
                self.start_node(n, libs)
            self.wait_ready(max(1.0, deadline - time.monotonic()), progress=progress, metrics=metrics)
        return self

    def running_nodes(self) -> list[int]:
        """Ids of the nodes whose JVM exists (running or paused), from their pid files."""
        return [n.node_id for n in self.nodes if n.pid()]

    def metrics_answering(self, timeout: float = 5.0) -> dict[int, bool]:
        """Per node: does its metrics endpoint answer within ``timeout`` (one scrape each, in parallel)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            answers = pool.map(lambda n: scrape(n.metrics_url, timeout) is not None, self.nodes)
            return {n.node_id: ok for n, ok in zip(self.nodes, answers, strict=True)}

    def _all_running(self) -> bool:
        pids = [n.pid() for n in self.nodes]
        return all(pids) and not any(procs.is_stopped(p) for p in pids)

    def wait_ready(
        self,
        timeout: float = 120.0,
        brokers: list[int] | None = None,
        progress: Callable[[str], None] | None = None,
        progress_every_s: float = 10.0,
        *,
        metrics: bool = True,
    ) -> None:
        """Poll until the controller is active, the wanted brokers are
        registered and unfenced, and (``metrics``) every node's metrics endpoint answers. ``progress`` hears
        what is awaited once the wait passes 2 s: when that changes, and every ``progress_every_s``."""
        want = set(brokers or self.brokers)
        started = time.monotonic()
        deadline = started + timeout
        last = "nothing checked yet"
        told, told_at = "", started
        while time.monotonic() < deadline:
            now = time.monotonic()
            if progress is not None and now - started >= 2 and (last != told or now - told_at >= progress_every_s):
                progress(f"waiting for the cluster ({now - started:.0f}s): {last}")
                told, told_at = last, now
            dead = [n.node_id for n in self.nodes if not n.pid()]
            if dead:
                raise ClusterError(
                    f"node(s) {dead} exited during startup; see "
                    + ", ".join(str(self.node(d).log_dir / "server.log") for d in dead)
                )
            try:
                registered = set(self.registered_brokers(timeout=3))
                last = f"registered brokers {sorted(registered)}, want {sorted(want)}"
                silent = [b for b in sorted(want) if b in registered and not self.serves(b)]
                if silent:
                    # a just-killed broker stays registered until its session times out
                    last = f"broker(s) {silent} registered but not answering requests yet"
                elif want <= registered:
                    if not metrics or self._metrics_up():
                        return
                    last = "brokers registered, waiting for metrics endpoints"
            except Exception as e:  # KafkaException while nodes are still starting
                last = str(e)
            time.sleep(0.5)
        raise ClusterError(f"cluster {self.name!r} not ready after {timeout:.0f}s: {last}")

    def serves(self, broker_id: int, timeout: float = 3.0) -> bool:
        """The broker itself answers a Metadata request on its listener (it does so only once its
        start-up is complete): a registration alone may be the previous, killed process's."""
        # this broker alone, with the cluster's own client settings (the secure cluster's SASL/TLS)
        admin = self.admin(**{"bootstrap.servers": f"127.0.0.1:{self.brokers[broker_id].port}"})
        try:
            md = admin.list_topics(timeout=timeout)
        except Exception:  # noqa: BLE001 - KafkaException while it starts: not serving yet
            return False
        # the answer came over this broker's own listener (the only bootstrap given), so from the
        # process that holds the port now, and it lists the broker among the live ones
        return broker_id in md.brokers

    def _metrics_up(self) -> bool:
        """Every node's exporter answers and exactly one controller is active."""
        active = 0
        for c in self.controllers.values():
            ctl = scrape(c.metrics_url)
            if ctl is None:
                return False
            active += metric_value(ctl, ACTIVE_CONTROLLERS) or 0
        if active != 1:
            return False
        return all(scrape(n.metrics_url) is not None for n in self.brokers.values())

    def registered_brokers(self, timeout: float = 5.0) -> list[int]:
        """Ids of registered, unfenced brokers (describe_cluster). If that
        times out - librdkafka can route it to a just-killed broker - fall
        back to the broker list of a plain Metadata request."""
        admin = self.admin()
        try:
            desc = admin.describe_cluster(request_timeout=timeout).result()
            return sorted(n.id for n in desc.nodes)
        except Exception:
            try:
                return sorted(admin.list_topics(timeout=timeout).brokers)
            except Exception:
                # Neither answered: the next call gets a new handle. A shared handle was once seen
                # wedged for good (no connection attempted for minutes while the brokers served
                # fresh clients), and every later heal waited on it in vain.
                self._admin = None
                raise

    def _healthy(self, timeout: float, metrics: bool = True) -> bool:
        try:
            return self.registered_brokers(timeout) == sorted(self.brokers) and (not metrics or self._metrics_up())
        except Exception:
            return False

    def stop_node(self, node: Node, grace: float = 20.0) -> None:
        pid = node.pid()
        if pid:
            procs.terminate([pid], grace)
        node.pid_file.unlink(missing_ok=True)

    def down(self, grace: float = 20.0) -> None:
        """Stop everything: brokers first (their controlled shutdown needs
        the controller), then the controller. SIGSTOPped nodes get SIGCONT;
        anything still alive after ``grace`` seconds is SIGKILLed."""
        if not self.base_dir.exists():
            return
        with self._locked():
            pids = [p for p in (b.pid() for b in self.brokers.values()) if p]
            procs.terminate(pids, grace)
            procs.terminate([p for p in (c.pid() for c in self.controllers.values()) if p], grace)
            for n in self.nodes:
                n.pid_file.unlink(missing_ok=True)

    def destroy(self) -> None:
        """down() and delete all data (next up() formats a fresh cluster)."""
        self.down()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    # ---- status ------------------------------------------------------------
    def status(self) -> dict:
        nodes = []
        for n in self.nodes:
            pid = n.pid()
            state = "dead" if not pid else ("paused" if procs.is_stopped(pid) else "running")
            nodes.append(
                {
                    "role": n.role,
                    "id": n.node_id,
                    "pid": pid,
                    "alive": state == "running",
                    "state": state,
                    "ports": {"listener": n.port, "metrics": n.metrics_port},
                    "metrics_url": n.metrics_url,
                    "log": str(n.log_dir / "server.log"),
                }
            )
        registered, error = [], None
        if any(c.pid() for c in self.controllers.values()):
            try:
                registered = self.registered_brokers(timeout=3)
            except Exception as e:
                error = str(e)
        else:
            error = "controller is not running"
        meta_path = self.base_dir / "cluster.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        healthy = all(n["alive"] for n in nodes) and registered == sorted(self.brokers)
        if not healthy and error is None:
            error = f"registered brokers {registered}, expected {sorted(self.brokers)}"
        return {
            "name": self.name,
            "base_dir": str(self.base_dir),
            "cluster_id": meta.get("cluster_id"),
            "kafka_version": fetch.pom_versions().kafka,
            "bootstrap_servers": self.bootstrap_servers,
            "controller_bootstrap": self.controller_bootstrap,
            "nodes": nodes,
            "registered_brokers": registered,
            "healthy": healthy,
            "error": None if healthy else error,
            "warnings": [self.port_warning] if self.port_warning else [],
        }
