"""`kbot lake collect | ingest | maintain | status | serve`: fill the metric lake and see what it holds.

    kbot lake collect --local dev                 scrape the local cluster's exporters (every 10 s)
    kbot lake collect --targets 1=http://kafka-1:7071/metrics,2=...   any exporters you run
    kbot lake collect --local dev --ingest-every 60   ... and ingest every minute in the same process
    kbot lake ingest                              landing files -> Delta Lake table (exactly once) + rollups
    kbot lake maintain                            OPTIMIZE closed hours, apply KBOT_LAKE_RETENTION, VACUUM
    kbot lake status [--json]                     files in flight, batches, partitions in the lake
    kbot lake serve [--port N] [--master URL]     keep Spark warm: a Spark Connect server that every bot
                                                  process queries through (sc://127.0.0.1:15002)
    kbot lake serve --status | --stop [--json]    is it running / stop it

Wiring into an argparse parser::

    sub = parser.add_subparsers(dest="command")
    lake.cli.register(sub)                # adds "lake"; sets args.func = run
    args = parser.parse_args(); sys.exit(args.func(args))

Settings: the "Metric lake" section of kbot_settings (`kbot config` shows them).
Exit codes: 0 ok, 1 failure (one ``error: ...`` line on stderr), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

from kbot_settings import KbotSettings, SettingsError, load
from lake import connect
from lake.change_sampler import ChangeSampler
from lake.collector import Collector, parse_targets, targets_from_settings, targets_from_urls
from lake.layout import LakeLayout
from live.config import ConfigError, get_cluster
from live.gateway import GatewayError
from live.pool import GatewayPool
from localkafka.cluster import LocalCluster

GROUPS_ENV = "KBOT_LAKE_GROUPS"


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "lake", help="metric lake: collect broker metrics, ingest them, status", description=__doc__.split("\n\n")[0]
    )
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="lake_action", metavar="ACTION", required=True)

    def common(sp):
        sp.add_argument("--lake-dir", help="state directory (default $KBOT_LAKE_DIR or ~/.kbot/lake)")
        sp.add_argument("--table", help="Delta table location (default $KBOT_LAKE_URI or <lake dir>/samples)")
        sp.add_argument("--json", action="store_true", help="machine-readable output")

    c = sub.add_parser("collect", help="scrape Prometheus endpoints into landing files")
    common(c)
    src = c.add_mutually_exclusive_group()
    src.add_argument("--targets", help="node_id=url,... (default $KBOT_METRICS_TARGETS)")
    src.add_argument("--local", metavar="NAME", help="the local cluster NAME (kbot cluster up)")
    c.add_argument("--port-base", type=int, default=None, help="port base of the local cluster")
    c.add_argument(
        "--cluster",
        help="cluster name stored with the samples (default $KBOT_LAKE_CLUSTER, "
        "else the configured cluster's name, else 'default')",
    )
    c.add_argument("--interval", type=float, default=10.0, help="seconds between scrapes (default 10)")
    c.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="per-target scrape timeout in seconds (default 10, Prometheus's scrape_timeout)",
    )
    c.add_argument("--rounds", type=int, help="stop after this many rounds")
    c.add_argument("--duration", type=float, help="stop after this many seconds")
    c.add_argument(
        "--groups",
        help=f"consumer groups to sample committed offsets of (default ${GROUPS_ENV}); "
        "needs the cluster configured (KBOT_BOOTSTRAP or clusters file)",
    )
    c.add_argument("--ingest-every", type=float, metavar="S", help="also ingest every S seconds (starts Spark)")
    c.add_argument(
        "--ingest-follow",
        action="store_true",
        help="also ingest each landing file as soon as it is written, rollups at most once a minute "
        "(starts Spark; a sample is queryable seconds after its scrape - what `kbot run` uses)",
    )
    c.add_argument(
        "--master", default=None, help="Spark master for --ingest-every (default $KBOT_SPARK_MASTER or local[2])"
    )
    c.add_argument(
        "--maintain-every",
        type=float,
        metavar="S",
        default=3600.0,
        help="with --ingest-every: compact/expire/vacuum every S seconds (default 3600; 0 = never)",
    )
    c.set_defaults(func=run)

    i = sub.add_parser("ingest", help="landing files -> Delta Lake table and rollups (idempotent)")
    common(i)
    i.add_argument("--master", default=None, help="Spark master (default $KBOT_SPARK_MASTER or local[2])")
    i.add_argument("--max-files", type=int, default=500, help="landing files per batch (default 500)")
    i.set_defaults(func=run)

    m = sub.add_parser("maintain", help="compact closed hours (OPTIMIZE ZORDER), apply retention, VACUUM")
    common(m)
    m.add_argument("--master", default=None, help="Spark master (default $KBOT_SPARK_MASTER or local[2])")
    m.add_argument("--retention", default=None, help="raw=7d,rollups=90d (default $KBOT_LAKE_RETENTION)")
    m.add_argument("--no-vacuum", action="store_true", help="compact and expire only")
    m.set_defaults(func=run)

    s = sub.add_parser("status", help="what is in flight and what the lake holds")
    common(s)
    s.set_defaults(func=run)

    v = sub.add_parser(
        "serve",
        help="keep Spark warm: start a Spark Connect server the bot queries through",
        description="Start this lake's Spark Connect server in the background (Delta Lake enabled, "
        "on 127.0.0.1) and wait until it answers; `kbot ask`, the console and the Slack "
        "app then query through it. See docs/lake-connect.md.",
    )
    v.add_argument("--lake-dir", help="state directory (default $KBOT_LAKE_DIR or ~/.kbot/lake)")
    v.add_argument("--table", help="Delta table to warm up on (default $KBOT_LAKE_URI or <lake dir>/samples)")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.add_argument("--port", default=None, help="Connect port (default $KBOT_SPARK_CONNECT_PORT or 15002)")
    v.add_argument(
        "--master",
        default=None,
        help="the server's Spark master: local[N] (default local[2]) or spark://host:port of a standalone cluster",
    )
    v.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for it to answer (default 180)")
    v.add_argument("--no-warm", action="store_true", help="do not run the lake's queries once after the start")
    what = v.add_mutually_exclusive_group()
    what.add_argument("--status", action="store_true", help="is it running (exit 0) or not (exit 1)")
    what.add_argument("--stop", action="store_true", help="stop it")
    v.set_defaults(func=run)


def _layout(args, settings: KbotSettings):
    return LakeLayout.from_settings(settings, lake_dir=args.lake_dir, table=args.table)


def _cluster_name(args, settings: KbotSettings) -> str:
    if getattr(args, "cluster", None):
        return args.cluster
    configured = settings.kbot_lake_cluster
    if configured:
        return configured
    if getattr(args, "local", None):
        return args.local
    try:
        return get_cluster(None, settings).name
    except Exception:  # noqa: BLE001 - no cluster configured: a plain default name
        return "default"


def _local(args) -> LocalCluster:
    if args.port_base:
        return LocalCluster(name=args.local, port_base=args.port_base)
    return LocalCluster.named(args.local)  # on the port base it was created with


def _targets(args, settings: KbotSettings):
    if args.local:
        return targets_from_urls(_local(args).metrics_urls)
    return parse_targets(args.targets) if args.targets else targets_from_settings(settings)


def _local_settings(args, settings: KbotSettings) -> KbotSettings:
    """`--local NAME` with no cluster configured: the consumer groups' offsets are read from that
    local cluster too (KBOT_BOOTSTRAP is not needed beside it)."""
    if not getattr(args, "local", None) or settings.kbot_bootstrap or settings.clusters_file.exists():
        return settings
    cluster = _local(args)
    return settings.updated(
        kbot_bootstrap=cluster.bootstrap_servers,
        kbot_cluster_name=args.local,
        kbot_expected_brokers=",".join(str(b) for b in cluster.brokers),
    )


def _session(master: str | None, settings: KbotSettings):
    from lake.spark import build_session

    spark = build_session(master or settings.kbot_spark_master or "local[2]", app_name="kbot-lake-ingest")
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect
        pass
    return spark


def _print(obj, as_json: bool, text: str) -> None:
    # one JSON object per line: collect streams one per round
    print(json.dumps(obj, default=str) if as_json else text, flush=True)


class _Stopping:
    terminated = False  # SIGTERM arrived
    flushing = False  # the last ingest and rollup flush has begun


def _stop_on_sigterm() -> _Stopping:
    """SIGTERM (how `kbot run` stops its collector, as do systemd and Kubernetes) ends collection
    the way Ctrl-C does: the main task is cancelled, so the last landing files are ingested and
    the pending rollups (the open hour's row too) are written before the process exits. Python's
    default SIGTERM action would end the process at once and leave them for the next run. A second
    SIGTERM during that flush is ignored; SIGKILL still ends it (the files and minutes stay
    pending, nothing is lost)."""
    state = _Stopping()
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def on_sigterm() -> None:
        if state.flushing or state.terminated:
            return
        state.terminated = True
        print(
            "SIGTERM: stopping; ingesting the last files and writing the pending rollups", file=sys.stderr, flush=True
        )
        main.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        pass
    return state


async def _collect(args, settings: KbotSettings) -> int:
    from lake.ingest import IngestBusy, Ingestor

    settings = _local_settings(args, settings)
    layout = _layout(args, settings)
    targets = _targets(args, settings)
    cluster = _cluster_name(args, settings)
    groups = [g.strip() for g in (args.groups or settings.kbot_lake_groups or "").split(",") if g.strip()]
    pool = gw = None
    if groups:
        pool = GatewayPool(settings)
        gw = await pool.get(None)
    admin, changes = gw, None
    if settings.kbot_changes_interval_s > 0:
        # "what changed?": the cluster's metadata every KBOT_CHANGES_INTERVAL_S, when a cluster is configured
        try:
            pool = pool or GatewayPool(settings)
            admin = admin or await pool.get(None)
            changes = ChangeSampler(layout, cluster, settings.kbot_changes_interval_s)
        except (ConfigError, GatewayError) as exc:
            print(f"collect: no metadata snapshots for `changes`: {exc}", file=sys.stderr, flush=True)
    collector = Collector(
        targets,
        layout.landing,
        cluster,
        interval_s=args.interval,
        timeout_s=args.timeout,
        groups=groups,
        lag_source=gw,
        settings=settings,
        changes=changes,
        admin=admin,
    )
    ingestor = follower = None
    if args.ingest_follow:
        from lake.ingest import ContinuousIngest

        ingestor = Ingestor(_session(args.master, settings), layout, rollup_every_s=60)
        follower = ContinuousIngest(
            ingestor, on_report=lambda rep: _print({"ingest": rep.summary()}, args.json, f"ingest: {rep.summary()}")
        ).start()
    elif args.ingest_every:
        ingestor = Ingestor(_session(args.master, settings), layout)
    last_ingest = last_maintain = time.monotonic()
    retention = None
    if ingestor is not None and args.maintain_every:
        from lake.maintenance import retention_from_settings

        retention = retention_from_settings(settings)  # a bad KBOT_LAKE_RETENTION fails now, not in an hour
    if not args.json:
        source = (
            f"from Prometheus at {collector.prometheus.url}"
            if getattr(collector, "prometheus", None) is not None
            else f"{len(targets)} target(s)"
        )
        how = ("as each file lands" if follower is not None else f"every {args.ingest_every:g}s") if ingestor else ""
        print(
            f"collecting {source} as cluster '{cluster}' every {args.interval:g}s into {layout.landing}"
            + (f"; ingesting {how} into {layout.table}" if ingestor else ""),
            flush=True,
        )

    async def on_round(report) -> None:
        nonlocal last_ingest, last_maintain
        _print(
            {
                "round": collector.rounds,
                "rows": report.rows,
                "failed": report.failed,
                "file": str(report.file) if report.file else None,
                "error": report.error,
            },
            args.json,
            report.summary(),
        )
        if follower is not None:
            follower.notify()
        elif ingestor is not None and time.monotonic() - last_ingest >= args.ingest_every:
            last_ingest = time.monotonic()
            try:
                rep = await asyncio.to_thread(ingestor.run)
                _print({"ingest": rep.summary()}, args.json, f"ingest: {rep.summary()}")
            except IngestBusy as exc:
                print(f"ingest skipped: {exc}", file=sys.stderr)
        if ingestor is not None and args.maintain_every and time.monotonic() - last_maintain >= args.maintain_every:
            last_maintain = time.monotonic()
            from lake.maintenance import maintain

            rep = await asyncio.to_thread(maintain, ingestor.spark, layout.table, retention=retention)
            _print({"maintain": rep.summary()}, args.json, f"maintain: {rep.summary()}")

    stopping = _stop_on_sigterm()
    try:
        await collector.run(rounds=args.rounds, duration_s=args.duration, on_round=on_round)
    except asyncio.CancelledError:
        if not stopping.terminated:
            raise  # Ctrl-C: asyncio.run turns it back into KeyboardInterrupt
        asyncio.current_task().uncancel()  # SIGTERM: handled here, the flush below runs normally
    finally:
        stopping.flushing = True  # a SIGTERM from here on must not cut the flush short
        if pool is not None:
            await pool.close()
        if follower is not None:
            await asyncio.to_thread(follower.stop)  # ingests what is left, flushes the deferred rollups
        elif ingestor is not None:
            rep = await asyncio.to_thread(ingestor.run)
            await asyncio.to_thread(ingestor.flush_rollups)  # the open hour's row too: nothing more lands
            _print({"ingest": rep.summary()}, args.json, f"ingest: {rep.summary()}")
    return 0


def _ingest(args, settings: KbotSettings) -> int:
    from lake.ingest import Ingestor

    layout = _layout(args, settings)
    spark = _session(args.master, settings)
    try:
        ingestor = Ingestor(spark, layout, max_files=args.max_files)
        report = ingestor.run()
        # a one-shot run: no process stays to write the open hour's row when it closes
        ingestor.flush_rollups()
    finally:
        spark.stop()
    data = {
        "batches": len(report.batches),
        "files": report.files,
        "rows": report.rows,
        "quarantined": report.quarantined,
        "seconds": round(report.seconds, 2),
        "table": layout.table,
        "recovered": sum(b.recovered for b in report.batches),
        "already_committed": sum(b.already_committed for b in report.batches),
    }
    _print(data, args.json, f"ingested {report.summary()} into {layout.table}")
    return 0


def _maintain(args, settings: KbotSettings) -> int:
    from lake.maintenance import maintain, parse_retention, retention_from_settings

    layout = _layout(args, settings)
    retention = parse_retention(args.retention) if args.retention else retention_from_settings(settings)
    spark = _session(args.master, settings)
    try:
        rep = maintain(spark, layout.table, retention=retention, vacuum=not args.no_vacuum)
    finally:
        spark.stop()
    data = {
        "optimized": rep.optimized,
        "files_before": rep.files_before,
        "files_after": rep.files_after,
        "kept_from": rep.expired_before,
        "vacuumed": rep.vacuumed,
        "seconds": round(rep.seconds, 2),
        "table": layout.table,
    }
    _print(data, args.json, f"maintained {layout.table}: {rep.summary()}")
    return 0


def _status(args, settings: KbotSettings) -> int:
    from lake.ingest import layout_status

    st = layout_status(_layout(args, settings))
    lines = [
        f"lake state dir  {st['state_dir']}",
        f"parquet table   {st['table']}",
        f"table format    {st.get('format', 'delta')}",
        f"in flight       {st['landing_files']} landing file(s), {st['processing_batches']} batch(es) processing",
        f"ingested        {st['committed_batches']} batch(es), {st['ingested_rows']:,} rows; last commit {st['last_commit'] or '-'}",
        f"quarantined     {st['quarantined_files']} file(s)",
    ]
    if "hour_partitions" in st:
        lines.append(
            f"table           {st['hour_partitions']} hour partition(s), {st['parquet_bytes'] / 1e6:,.1f} MB, "
            f"clusters: {', '.join(st['clusters']) or '-'}, newest: {st['newest_hour'] or '-'}"
        )
        rollups = [res for res, ok in st.get("rollups", {}).items() if ok]
        lines.append(f"rollups         {', '.join(rollups) or 'none yet'}")
    st.update(_freshness(st["table"]))
    lines.append(f"freshness       {st['freshness']}")
    st["engines"] = {
        "incident_window": "DuckDB in the asking process, over the Delta snapshot (delta-rs)",
        "history": "Spark (the lake's Connect server when it runs, else an in-process session)",
    }
    lines.append("answered by     the incident window: DuckDB in the asking process; history and rollups: Spark")
    _print(st, args.json, "\n".join(lines))
    return 0


def _freshness(table: str) -> dict:
    """How far the lake's samples reach: the newest in the last two hours and its age."""
    import datetime as dt

    from lake.embedded import READ_ERRORS, TableNotFound, WindowReader

    now = dt.datetime.now(dt.timezone.utc)
    try:
        newest = WindowReader(table).newest(now)
    except TableNotFound:
        return {"newest_sample": None, "age_s": None, "freshness": "no samples yet (nothing ingested)"}
    except READ_ERRORS as exc:
        return {"newest_sample": None, "age_s": None, "freshness": f"unreadable: {' '.join(str(exc).split())[:200]}"}
    if newest is None:
        return {"newest_sample": None, "age_s": None, "freshness": "no samples in the last 2 h"}
    age = (now - newest).total_seconds()
    return {
        "newest_sample": newest.isoformat(timespec="seconds"),
        "age_s": round(age, 1),
        "freshness": f"newest sample {newest:%H:%M:%S} UTC, {age:,.0f} s old",
    }


def _serve(args, settings: KbotSettings) -> int:
    from lake.service import ensure_server

    lake_dir = args.lake_dir
    if args.status:
        info = connect.status(settings, lake_dir, deep=True)
        running = info is not None and info.state == "running"
        data = info.to_dict() if info is not None else {"state": "stopped"}
        text = f"Spark Connect server {data['state']}" + (
            f" at {info.url} (pid {info.pid}, master {info.master}, Spark {info.spark_version or '?'}; log {info.log})"
            if info is not None
            else ""
        )
        _print(data, args.json, text)
        return 0 if running else 1
    if args.stop:
        stopped = connect.stop_server(settings, lake_dir)
        data = stopped.to_dict() if stopped is not None else {"state": "stopped", "pid": None}
        _print(
            data,
            args.json,
            f"stopped the Spark Connect server (pid {stopped.pid})"
            if stopped
            else "no Spark Connect server was running",
        )
        return 0
    try:  # bad input is exit 2 with one line, before anything starts
        port = connect.check_port(args.port) if args.port is not None else connect.default_port(settings)
        master = connect.check_master(args.master) if args.master else None
    except connect.BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    info = ensure_server(
        settings, port, master, lake_dir=lake_dir, table=args.table, warm=not args.no_warm, timeout=args.timeout
    )
    verb = "started" if info.started else "already running"
    warm = f", warmed up in {info.warm_s:.1f} s" if info.warm_s is not None else ""
    _print(
        info.to_dict(),
        args.json,
        f"Spark Connect server {verb} at {info.url} (pid {info.pid}, master {info.master}, Spark "
        f"{info.spark_version or '?'}{warm}); log {info.log}\nstop it with `kbot lake serve --stop`",
    )
    return 0


def run(args, settings: KbotSettings | None = None) -> int:
    """`kbot lake ...`: with the settings the CLI loaded (or, run alone, the process environment's,
    loaded here, once; a wrong variable is one line and exit 2)."""
    if settings is None:
        try:
            settings = load()
        except SettingsError as exc:
            for line in exc.lines:
                print(f"error: {line}", file=sys.stderr)
            return 2
    try:
        if args.lake_action == "collect":
            return asyncio.run(_collect(args, settings))
        if args.lake_action == "ingest":
            return _ingest(args, settings)
        if args.lake_action == "maintain":
            return _maintain(args, settings)
        if args.lake_action == "status":
            return _status(args, settings)
        if args.lake_action == "serve":
            return _serve(args, settings)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line for the terminal, never a traceback
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {text[:600]}", file=sys.stderr)
        return 1
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lake.cli")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
