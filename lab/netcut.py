"""Cut one broker off the network on loopback, from outside: its listener ports stop answering
TCP while its process runs and its own outbound connections (heartbeats to the controller,
fetches from the leaders) still flow. Used by the network-partition mode.

Every lab node listens on 127.0.0.1 in one network namespace, so the cut is by destination port:
``tc`` (iproute2) puts an htb qdisc at the root of ``lo`` whose default class passes everything,
plus, per lab cluster, a class whose leaf qdisc is a ``pfifo`` of length 0 (every packet that
reaches it is dropped) and one u32 filter per cut port sending packets *to* that port there. A
SYN to the port is dropped (the connect times out: no refusal, as with a firewall's DROP); packets
*from* the port (the broker's answers on connections it opened) have another destination port and
pass. No netem or iptables needed.

``lo`` is shared by everything on the machine (another lab run, another test suite), so:
- the class, its qdisc and the filters' priority are keyed by the cluster's port base, and
  :func:`restore` removes only those; the root qdisc goes only when no filter is left under it;
- a root qdisc on ``lo`` that is not this module's layout (someone else's shaping) is left
  alone: :func:`cut` refuses with a clear message instead;
- every change happens under one file lock, so two lab runs never race on the root qdisc.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

DEV = "lo"
ROOT = "1:"
PASS_CLASS = "1:10"  # the default class: everything not filtered flows through it
LOCK = Path("/tmp/kbot-lab-netcut.lock")


class NetcutError(RuntimeError):
    """tc is missing, not permitted, or lo is shaped by someone else: the message says which."""


def unavailable() -> str | None:
    """Why the cut cannot be made on this machine, or None (checked before a run, changes nothing)."""
    if shutil.which("tc") is None:
        return "needs tc (iproute2) to drop packets to broker 103's ports on loopback; install iproute2"
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) to add a tc qdisc on loopback"
    return None


def _key(port_base: int) -> int:
    """This cluster's class minor, qdisc major and filter priority (1..0xfffe, never the pass class)."""
    k = port_base % 0xFFFE + 1
    return k + 1 if k == 0x10 else k


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        res = subprocess.run(["tc", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetcutError("tc (iproute2) is not installed") from None
    if check and res.returncode != 0:
        err = " ".join((res.stderr or res.stdout).split())
        if "Operation not permitted" in err:
            raise NetcutError(f"tc {' '.join(args)}: not permitted (needs root / CAP_NET_ADMIN)")
        raise NetcutError(f"tc {' '.join(args)} failed: {err or f'exit {res.returncode}'}")
    return res


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def root_qdisc() -> str:
    """The first line of ``tc qdisc show dev lo`` for the root ('qdisc noqueue 0: root ...')."""
    out = _tc("qdisc", "show", "dev", DEV).stdout
    return next((ln.strip() for ln in out.splitlines() if " root " in f" {ln} "), "")


def _ours(root: str) -> bool:
    return root.startswith("qdisc htb 1: root")


def _filters() -> str:
    return _tc("filter", "show", "dev", DEV, "parent", ROOT, check=False).stdout


def _keep_prio(k: int) -> int:
    """The priority of this cluster's pass filters: just before its drop filters, so seen first."""
    return k - 1 if k > 1 else k + 1


def cut(port_base: int, ports: list[int], keep: tuple[tuple[int, int], ...] = ()) -> dict:
    """Drop every packet sent to ``ports`` on lo (until :func:`restore`), except the packets of the
    established connections ``keep`` ((local port, broker port) pairs): a client on the broker's
    side of the partition that still reaches it. Raises NetcutError."""
    why = unavailable()
    if why:
        raise NetcutError(why)
    k = _key(port_base)
    with _locked():
        root = root_qdisc()
        if not _ours(root):
            if not root.startswith("qdisc noqueue"):
                raise NetcutError(
                    f"loopback already has a root qdisc that is not the lab's ({root!r}): "
                    "not touching someone else's traffic shaping; remove it or run elsewhere"
                )
            _tc("qdisc", "add", "dev", DEV, "root", "handle", ROOT, "htb", "default", "10")
            _tc("class", "add", "dev", DEV, "parent", ROOT, "classid", PASS_CLASS, "htb", "rate", "100gbit")
        _tc("class", "replace", "dev", DEV, "parent", ROOT, "classid", f"1:{k:x}", "htb", "rate", "100gbit")
        _tc("qdisc", "replace", "dev", DEV, "parent", f"1:{k:x}", "handle", f"{k:x}:", "pfifo", "limit", "0")
        _tc("filter", "del", "dev", DEV, "parent", ROOT, "prio", str(k), check=False)  # a leftover of ours
        _tc("filter", "del", "dev", DEV, "parent", ROOT, "prio", str(_keep_prio(k)), check=False)
        for local, port in keep:  # to the default (passing) class, ahead of the drops
            _tc(
                "filter", "add", "dev", DEV, "parent", ROOT, "protocol", "ip", "prio", str(_keep_prio(k)),
                "u32", "match", "ip", "sport", str(int(local)), "0xffff", "match", "ip", "dport", str(int(port)),
                "0xffff", "flowid", PASS_CLASS,
            )  # fmt: skip
        for port in ports:
            _tc(
                "filter", "add", "dev", DEV, "parent", ROOT, "protocol", "ip", "prio", str(k),
                "u32", "match", "ip", "dport", str(int(port)), "0xffff", "flowid", f"1:{k:x}",
            )  # fmt: skip
    return {"tc_class": f"1:{k:x}", "tc_prio": k, "dropped_ports": list(ports), "kept_connections": list(keep)}


def restore(port_base: int) -> bool:
    """Remove this cluster's filters and class; the root qdisc too when nothing else uses it.
    Idempotent, and quiet when there is nothing (or no tc) to remove. True if anything was removed."""
    if shutil.which("tc") is None:
        return False
    k = _key(port_base)
    removed = False
    with _locked():
        if not _ours(root_qdisc()):
            return False
        filters = _filters()
        for prio in (k, _keep_prio(k)):
            if re.search(rf"\bpref {prio}\b", filters) is not None:
                _tc("filter", "del", "dev", DEV, "parent", ROOT, "prio", str(prio))
                removed = True
        if _tc("class", "del", "dev", DEV, "classid", f"1:{k:x}", check=False).returncode == 0:
            removed = True
        if not _filters().strip():
            _tc("qdisc", "del", "dev", DEV, "root", check=False)
            removed = True
    return removed


def connections(pid: int, port: int) -> list[int]:
    """The local ports of process ``pid``'s established TCP connections to 127.0.0.1:``port``
    (from /proc: its socket inodes, matched in /proc/net/tcp)."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir() if fd_dir.exists() else ():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    local_ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
        if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:  # 01: ESTABLISHED
            local_ports.append(int(local.split(":")[1], 16))
    return sorted(local_ports)


def active(port_base: int) -> bool:
    """Whether this cluster's drop filters are on lo now."""
    if shutil.which("tc") is None:
        return False
    return _ours(root_qdisc()) and re.search(rf"\bpref {_key(port_base)}\b", _filters()) is not None
