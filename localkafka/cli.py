"""`kbot cluster up|down|status [--json]` (also `python -m localkafka ...`).

`up`, `restart` and `start` succeed when the brokers serve (registered and unfenced); the nodes'
metrics endpoints are reported beside that, never waited for: a JMX exporter on a busy machine
can take longer to render than the brokers take to serve, and the lake's collector retries it.

Wiring into another argparse parser::

    sub = parser.add_subparsers(dest="command")
    localkafka.cli.register(sub)          # adds "cluster"; sets args.func = run
    args = parser.parse_args(); sys.exit(args.func(args))

Exit codes: 0 ok; 1 failure, reported as one ``error: ...`` line on stderr
(never a traceback). ``status`` exits 1 when the cluster is not healthy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from localkafka import fetch
from localkafka.cluster import DEFAULT_PORT_BASE, LocalCluster
from localkafka.common import ClusterError
from localkafka.fetch import JarsError
from localkafka.secure import SecureCluster


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "cluster", help="local Kafka cluster (KRaft, 1 controller + 3 brokers)", description=__doc__.split("\n\n")[0]
    )
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=["up", "down", "status", "start", "kill", "pause", "resume", "restart", "heal"],
        help="up | down | status; start BROKER (bring a stopped or killed broker back); faults for demos: "
        "kill | pause | resume | restart BROKER; heal",
    )
    p.add_argument(
        "broker", nargs="?", type=int, help="broker id for start / kill / pause / resume / restart (101-103)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--name", default="dev", help="cluster name (default: dev)")
    p.add_argument(
        "--base-dir", default=None, help="state dir (default: $KBOT_CACHE_DIR or ~/.cache/kbot, /clusters/<name>)"
    )
    p.add_argument(
        "--port-base",
        type=int,
        default=None,
        help=f"first port of the layout (default: the one the named cluster was created with, "
        f"else {DEFAULT_PORT_BASE})",
    )
    p.add_argument(
        "--controllers",
        type=int,
        choices=[1, 3],
        default=None,
        help="KRaft controllers for `up` on a new cluster: 1, or 3 for a quorum that survives losing one "
        "(default: as the named cluster was created, else 1)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        help="seconds `up`, `start` and `restart` may take, every step included (storage format, JVM start, "
        "registration); default 180",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL (SCRAM-SHA-512) listener, ACLs, observer/config/operator principals "
        "(localkafka/secure.py); give it with every action on that cluster",
    )
    p.set_defaults(func=run)


def _one_line(e: BaseException) -> str:
    if isinstance(e, JarsError):
        # Maven's first [ERROR] line is the one that names the artifact.
        errs = [ln.strip() for ln in e.output.splitlines() if "[ERROR]" in ln]
        head = str(e).splitlines()[0]
        return f"{head}: {errs[0]}" if errs else head
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) < 600 else text[:600] + "..."


def format_status(st: dict) -> str:
    health = "healthy" if st["healthy"] else f"NOT healthy ({st['error']})"
    lines = [
        f"cluster {st['name']}  Kafka {st['kafka_version']}  id {st['cluster_id'] or '-'}  {health}",
        f"  bootstrap servers:    {st['bootstrap_servers']}",
        f"  controller bootstrap: {st['controller_bootstrap']}",
        f"  base dir:             {st['base_dir']}",
        f"  {'ROLE':<11}{'ID':<5}{'STATE':<9}{'PID':<9}{'PORT':<7}METRICS",
    ]
    for n in st["nodes"]:
        lines.append(
            f"  {n['role']:<11}{n['id']:<5}{n['state']:<9}{str(n['pid'] or '-'):<9}"
            f"{n['ports']['listener']:<7}{n['metrics_url']}"
        )
    lines.append("  registered brokers:   " + (", ".join(map(str, st["registered_brokers"])) or "none"))
    lines += [f"  warning: {w}" for w in st.get("warnings", [])]
    return "\n".join(lines)


FAULTS = {"kill": "kill_broker", "pause": "pause_broker", "resume": "resume_broker"}
# the actions that start JVMs: bounded by --timeout, done when the brokers serve
STARTS = ("start", "restart")


def metrics_line(answering: dict[int, bool]) -> str:
    """One line on the nodes' metrics endpoints, reported beside the cluster's state (not gating it)."""
    silent = [str(i) for i, ok in answering.items() if not ok]
    if not silent:
        return f"  metrics endpoints:    all {len(answering)} answer"
    return (
        f"  metrics endpoints:    not answering yet on node(s) {', '.join(silent)} (the brokers serve; "
        "exporters can lag on a busy machine and the lake's collector retries them)"
    )


def start_broker(cluster: LocalCluster, broker: int, timeout: float, restart: bool) -> dict:
    """`start BROKER` (a no-op when it runs) or `restart BROKER`, done when the broker serves."""
    if restart:
        done = cluster.faults.restart_broker(broker, timeout=timeout, metrics=False)
    else:
        node = cluster.brokers.get(broker)
        if node is None:
            cluster.node(broker)  # the error that names the cluster's brokers
            raise ValueError(f"{broker} is a controller, not a broker")
        old = node.pid()
        t0 = time.monotonic()
        pid = cluster.start_node(node)
        try:
            cluster.wait_ready(max(1.0, timeout - (time.monotonic() - t0)), brokers=[broker], metrics=False)
        except ClusterError as exc:
            raise ClusterError(f"broker {broker} not serving {timeout:g}s after its start: {exc}") from None
        done = {"broker_id": broker, "pid": pid, "was_running": old is not None}
    return {**done, "metrics": cluster.metrics_answering()}


def recorded_port_base(name: str, base_dir: str | None) -> int:
    """The port base the named cluster was created with (its cluster.json), else the default: so
    `kbot cluster status --name judge` reports the judge cluster's own ports."""
    folder = Path(base_dir or fetch.cache_root() / "clusters" / name).expanduser()
    try:
        return int(json.loads((folder / "cluster.json").read_text())["port_base"])
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_PORT_BASE


def run(args) -> int:
    if args.port_base is None:
        args.port_base = recorded_port_base(args.name, args.base_dir)
    try:
        if getattr(args, "secure", False):
            cluster = SecureCluster(
                name=args.name, base_dir=args.base_dir, port_base=args.port_base, controllers=args.controllers
            )
        else:
            cluster = LocalCluster(
                name=args.name, base_dir=args.base_dir, port_base=args.port_base, controllers=args.controllers
            )
        if args.action == "up":
            t0 = time.monotonic()
            cluster.up(timeout=args.timeout, metrics=False)
            st = cluster.status()
            st["up_seconds"] = round(time.monotonic() - t0, 1)
            st["metrics"] = cluster.metrics_answering()
        elif args.action in STARTS:
            if args.broker is None:
                print(f"error: `cluster {args.action}` needs a broker id, e.g. 102", file=sys.stderr)
                return 2
            t0 = time.monotonic()
            done = start_broker(cluster, args.broker, args.timeout, restart=args.action == "restart")
            done["seconds"] = round(time.monotonic() - t0, 1)
            if args.json:
                print(json.dumps(done))
            else:
                verb = "restarted" if args.action == "restart" else "started"
                if args.action == "start" and done.get("was_running"):
                    verb = "was already running;"
                print(f"broker {args.broker} {verb} serving in {done['seconds']}s (pid {done['pid']})")
                print(metrics_line(done["metrics"]))
            return 0
        elif args.action == "down":
            cluster.down()
            st = cluster.status()
        elif args.action in FAULTS:
            if args.broker is None:
                print(f"error: `cluster {args.action}` needs a broker id, e.g. 102", file=sys.stderr)
                return 2
            done = getattr(cluster.faults, FAULTS[args.action])(args.broker)
            print(json.dumps(done) if args.json else f"{args.action}: broker {args.broker} ({done})")
            return 0
        elif args.action == "heal":
            done = cluster.faults.heal()
            print(
                json.dumps(done) if args.json else f"healed in {done['seconds']}s: {done['actions'] or 'nothing to do'}"
            )
            return 0
        else:
            st = cluster.status()
        rc = 0
        if args.action == "status" and not st["healthy"]:
            rc = 1
        if args.action == "down" and any(n["pid"] for n in st["nodes"]):
            rc = 1
        try:
            if args.json:
                print(json.dumps(st, indent=1))
            elif args.action == "down":
                alive = [n["id"] for n in st["nodes"] if n["pid"]]
                print(f"cluster {args.name} stopped" if not alive else f"still running: {alive}")
            else:
                if "up_seconds" in st:
                    print(f"up in {st['up_seconds']}s (brokers serving)")
                print(format_status(st))
                if "metrics" in st:
                    print(metrics_line(st["metrics"]))
                if st.get("security"):
                    sec = st["security"]
                    print(f"  security:             {sec['listener']} {sec['sasl_mechanism']}, CA {sec['ca']}")
                    print(f"  principals:           {', '.join(sec['users'])} (passwords in {sec['secrets_file']})")
            sys.stdout.flush()
        except BrokenPipeError:  # `kbot cluster status | head`: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return rc
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 1
    except Exception as e:  # the CLI promise: one line, no traceback
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m localkafka", description="local Kafka cluster: up | down | status")
    add_arguments(p)
    return run(p.parse_args(argv))
