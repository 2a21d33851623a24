"""Landing files: the JSON-lines batches the collectors (exporters or Prometheus) write and the
ingest job turns into the Delta table. Written atomically - to a hidden ``.<name>.tmp``, flushed
and fsynced, renamed, the directory fsynced - so ingest only ever sees complete files; a crash
leaves at most a hidden tmp file, which the next collector start removes. One module both
collectors and the ingest share, so neither imports the other."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

LANDING_SUFFIX = ".jsonl"


def landing_name(ts_us: int) -> str:
    """Sortable by time, unique: ``20240501T100000.123456Z-1a2b3c4d.jsonl``."""
    t = _dt.datetime.fromtimestamp(ts_us / 1e6, _dt.timezone.utc)
    return f"{t:%Y%m%dT%H%M%S.%f}Z-{uuid.uuid4().hex[:8]}{LANDING_SUFFIX}"


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (the directory entry itself)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_landing_file(landing_dir: str | os.PathLike, rows: Iterable[dict], name: str) -> Path:
    """Write ``rows`` as JSON lines to ``landing_dir/name`` atomically (tmp + fsync + rename).

    The file appears complete or not at all.  Returns its path.
    """
    if not name.endswith(LANDING_SUFFIX) or "/" in name or name.startswith("."):
        raise ValueError(f"bad landing file name {name!r}")
    directory = Path(landing_dir)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / name
    tmp = directory / f".{name}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":"), allow_nan=False))
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(directory)
    return final


def remove_stale_tmp(landing_dir: str | os.PathLike) -> int:
    """Delete tmp files a crashed writer left behind; returns how many."""
    directory = Path(landing_dir)
    n = 0
    if directory.is_dir():
        for p in directory.glob(".*.tmp"):
            p.unlink(missing_ok=True)
            n += 1
    return n


async def land(landing_dir: str | os.PathLike, rows: Iterable[dict], name: str) -> Path:
    """``write_landing_file`` from a worker thread, for the collectors' event loops.

    A cancel (Ctrl-C, or the SIGTERM `kbot run` stops its collector with) that arrives mid-write
    waits for the write to end before it goes on: the thread cannot be stopped, so the file lands
    anyway, and if it landed after the stopping collector's last ingest it would sit un-ingested
    until the next start."""
    write = asyncio.ensure_future(asyncio.to_thread(write_landing_file, landing_dir, rows, name))
    try:
        return await asyncio.shield(write)
    except asyncio.CancelledError:
        await asyncio.wait([write])
        raise
