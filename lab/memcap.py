"""Shrink one broker's page cache from outside: its JVM moved into a memory cgroup of its own whose
limit is the JVM's resident (anonymous) memory plus a few tens of MB. Page cache a process faults
in is charged to its memory cgroup, so at the limit the kernel reclaims that broker's cached
segment pages first: what it wrote a minute ago is gone from memory, and a read of it goes to
disk. The other brokers and the host keep their page cache. Used by the page-cache-cold-reads mode.

The JVM's heap grows while the limit holds (Xms < Xmx; seen: +50 MB in the first half minute), and
at a v1 limit the kernel's OOM killer ends the broker (seen, with a watcher polling every 0.5 s:
a G1 heap expansion outran it). So the cgroup's OOM killer is off (memory.oom_control: a task
that cannot get memory waits instead of dying), and a watcher process (``python -m lab.memcap
--watch``, detached, so the cap outlives `kbot lab run`) raises the limit as the anonymous memory
grows, and at once when a task waits: only the cache stays small.

cgroup v1 (``/sys/fs/cgroup/memory/<name>``, memory.limit_in_bytes) or v2 (``/sys/fs/cgroup/<name>``,
memory.high, which reclaims and throttles but never kills, when the root's subtree_control enables
memory). Keyed by the lab cluster's port base:
:func:`release` (every heal, `kbot lab down`, the tests' teardown) moves the JVM back to the cgroup
it came from (the root when that one is gone), ends the watcher and removes the cgroup.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1 = ROOT / "memory"
CACHE_BYTES = 48 << 20  # page cache the capped broker keeps, above its anonymous memory
STATE_DIR = Path("/tmp")


class MemcapError(RuntimeError):
    """No writable memory cgroup, or the broker could not be moved: the message says which."""


@dataclass(frozen=True)
class Layout:
    version: int  # 1 or 2
    base: Path  # where new cgroups go

    def dir(self, name: str) -> Path:
        return self.base / name

    @property
    def limit_file(self) -> str:
        # v2: memory.high, not memory.max - above it the kernel reclaims and throttles, never kills
        return "memory.limit_in_bytes" if self.version == 1 else "memory.high"


def layout() -> Layout | None:
    """The memory cgroup hierarchy this machine lets us write, or None."""
    if (V1 / "memory.limit_in_bytes").exists() and os.access(V1, os.W_OK):
        return Layout(1, V1)
    try:
        controllers = (ROOT / "cgroup.subtree_control").read_text().split()
    except OSError:
        controllers = []
    if "memory" in controllers and os.access(ROOT, os.W_OK):
        return Layout(2, ROOT)
    return None


def unavailable() -> str | None:
    """Why a broker cannot be capped here, or None (checked before a run, changes nothing)."""
    if os.geteuid() != 0:
        return "needs root to put broker 103 into a memory cgroup of its own"
    if layout() is None:
        return (
            "needs a writable memory cgroup: neither cgroup v1's /sys/fs/cgroup/memory nor a cgroup v2 "
            "/sys/fs/cgroup with the memory controller in cgroup.subtree_control is writable here"
        )
    return None


def name_for(port_base: int) -> str:
    return f"kbot-lab-{port_base}-cold-reads"


def _state_file(port_base: int) -> Path:
    return STATE_DIR / f"kbot-lab-memcap-{port_base}.json"


def stat(path: Path) -> dict[str, int]:
    """memory.stat of a cgroup dir as numbers ({} when unreadable)."""
    out: dict[str, int] = {}
    try:
        for line in (path / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().isdigit():
                out[k] = int(v)
    except OSError:
        pass
    return out


def anon_and_cache(path: Path, version: int) -> tuple[int, int]:
    """(anonymous bytes, page-cache bytes) charged to the cgroup."""
    s = stat(path)
    if version == 1:
        return s.get("rss", 0), s.get("cache", 0)
    return s.get("anon", 0), s.get("file", 0)


def _origin(pid: int, version: int) -> str:
    """The pid's memory cgroup path now ('/...'), from /proc/<pid>/cgroup."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _hid, ctrls, path = line.split(":", 2)
        if (version == 1 and "memory" in ctrls.split(",")) or (version == 2 and ctrls == ""):
            return path
    return "/"


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise MemcapError(f"writing {value.strip()!r} to {path}: {exc.strerror or exc}") from None


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise MemcapError(f"process {pid} has no VmRSS")


def cap(port_base: int, pid: int, cache_bytes: int = CACHE_BYTES) -> dict[str, object]:
    """Move ``pid`` into this cluster's capped cgroup and start the watcher. Raises MemcapError."""
    why = unavailable()
    if why:
        raise MemcapError(why)
    lay = layout()
    assert lay is not None
    release(port_base)  # a leftover of ours
    name = name_for(port_base)
    d = lay.dir(name)
    origin = _origin(pid, lay.version)
    _state_file(port_base).write_text(json.dumps({"pid": pid, "origin": origin, "version": lay.version}))
    try:
        d.mkdir()
    except OSError as exc:
        raise MemcapError(f"could not create {d}: {exc.strerror or exc}") from None
    try:
        if lay.version == 1:
            # the JVM's anonymous memory goes with it where the kernel still moves charges (its old
            # page cache stays behind either way, charged where it was)
            try:
                (d / "memory.move_charge_at_immigrate").write_text("1")
            except OSError:
                pass  # deprecated and refused by newer kernels: only new charges count here then
            _write(d / "memory.oom_control", "1")  # wait, do not kill, at the limit (the watcher raises it)
        _write(d / "cgroup.procs", str(pid))
        rss = _rss(pid)
        anon, _cache = anon_and_cache(d, lay.version)  # the JVM's memory charged to the new cgroup
        limit = anon + cache_bytes
        _write(d / lay.limit_file, str(limit))  # the kernel reclaims the cache down to it on this write
    except (MemcapError, OSError):
        release(port_base)
        raise
    watcher = subprocess.Popen(
        [sys.executable, "-m", "lab.memcap", "--watch", str(port_base), str(pid), str(cache_bytes)],
        cwd=str(Path(__file__).resolve().parents[1]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    state = {"pid": pid, "origin": origin, "version": lay.version, "watcher": watcher.pid}
    _state_file(port_base).write_text(json.dumps(state))
    return {
        "cgroup": str(d),
        "cgroup_version": lay.version,
        "cgroup_origin": origin,
        "broker_rss_bytes": rss,
        "memory_limit_bytes": limit,
        "watcher_pid": watcher.pid,
    }


def _is_watcher(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"lab.memcap" in cmd and b"--watch" in cmd


def release(port_base: int) -> bool:
    """End the watcher, move every task of this cluster's cgroup back where the broker came from
    (the root when that cgroup is gone), remove the cgroup. Idempotent and quiet; True if anything
    was undone."""
    lay = layout()
    sf = _state_file(port_base)
    try:
        state = json.loads(sf.read_text())
    except (OSError, ValueError):
        state = {}
    done = False
    wpid = state.get("watcher")
    if isinstance(wpid, int) and _is_watcher(wpid):
        os.kill(wpid, signal.SIGTERM)
        for _ in range(50):
            if not _is_watcher(wpid):
                break
            time.sleep(0.1)
        done = True
    if lay is not None:
        d = lay.dir(name_for(port_base))
        if d.is_dir():
            origin = str(state.get("origin") or "/").strip("/")
            back = lay.base / origin if origin and (lay.base / origin / "cgroup.procs").exists() else lay.base
            for _ in range(3):  # a thread may be born while moving: read again
                try:
                    pids = [p for p in (d / "cgroup.procs").read_text().split() if p.isdigit()]
                except OSError:
                    break
                if not pids:
                    break
                for p in pids:
                    try:
                        (back / "cgroup.procs").write_text(p)
                    except OSError:
                        if back != lay.base:
                            (lay.base / "cgroup.procs").write_text(p)
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.25)
            done = True
    sf.unlink(missing_ok=True)
    return done


def active(port_base: int) -> bool:
    """Whether this cluster's capped cgroup exists."""
    lay = layout()
    return lay is not None and lay.dir(name_for(port_base)).is_dir()


def reading(port_base: int) -> dict[str, object]:
    """What the cap holds now, read from the cgroup: its limit, anonymous and cache bytes."""
    lay = layout()
    if lay is None:
        return {}
    d = lay.dir(name_for(port_base))
    try:
        limit = (d / lay.limit_file).read_text().strip()
    except OSError:
        return {}
    anon, cache = anon_and_cache(d, lay.version)
    return {"limit_bytes": int(limit) if limit.isdigit() else limit, "anon_bytes": anon, "cache_bytes": cache}


def _under_oom(d: Path) -> bool:
    try:
        return "under_oom 1" in (d / "memory.oom_control").read_text()
    except OSError:
        return False


def watch(port_base: int, pid: int, cache_bytes: int, interval: float = 0.1) -> None:
    """Keep the limit at the JVM's anonymous memory + ``cache_bytes`` while it grows, until the
    cgroup or the broker is gone (or SIGTERM)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    lay = layout()
    if lay is None:
        return
    d = lay.dir(name_for(port_base))
    while d.is_dir() and Path(f"/proc/{pid}").exists():
        anon, _cache = anon_and_cache(d, lay.version)
        try:
            limit = int((d / lay.limit_file).read_text().strip())
        except (OSError, ValueError):
            return
        waiting = lay.version == 1 and _under_oom(d)
        if waiting or anon + cache_bytes // 2 > limit:  # the heap ate half the cache room: give it back
            try:
                (d / lay.limit_file).write_text(str(max(limit + cache_bytes // 2, anon + cache_bytes)))
            except OSError:
                pass
        time.sleep(interval)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.memcap")
    ap.add_argument("--watch", nargs=3, metavar=("PORT_BASE", "PID", "CACHE_BYTES"), type=int, required=True)
    args = ap.parse_args(argv)
    port_base, pid, cache_bytes = args.watch
    watch(port_base, pid, cache_bytes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
