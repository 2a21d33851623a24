"""Cut one broker off the network on loopback, from outside: its listener ports stop answering
TCP while its process runs and its own outbound connections (heartbeats to the controller,
fetches from the leaders) still flow. Used by the network-partition mode.

It also holds back one client's requests to a port, matched by what they say rather than by the
connection they travel on (:func:`hold`): the metadata-lag mode holds broker 103's raft Fetch
requests to the controller while its heartbeats, on another connection to the same port, flow.

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


def _ensure_root() -> None:
    """The lab's htb root on lo with its passing default class (under the lock)."""
    root = root_qdisc()
    if _ours(root):
        return
    if not root.startswith("qdisc noqueue"):
        raise NetcutError(
            f"loopback already has a root qdisc that is not the lab's ({root!r}): "
            "not touching someone else's traffic shaping; remove it or run elsewhere"
        )
    _tc("qdisc", "add", "dev", DEV, "root", "handle", ROOT, "htb", "default", "10")
    _tc("class", "add", "dev", DEV, "parent", ROOT, "classid", PASS_CLASS, "htb", "rate", "100gbit")


def cut(port_base: int, ports: list[int], keep: tuple[tuple[int, int], ...] = ()) -> dict:
    """Drop every packet sent to ``ports`` on lo (until :func:`restore`), except the packets of the
    established connections ``keep`` ((local port, broker port) pairs): a client on the broker's
    side of the partition that still reaches it. Raises NetcutError."""
    why = unavailable()
    if why:
        raise NetcutError(why)
    k = _key(port_base)
    with _locked():
        _ensure_root()
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
    k = _key(port_base)
    return _remove(k, (k, _keep_prio(k)))


def _remove(k: int, prios: tuple[int, ...]) -> bool:
    """Remove the filters of priorities ``prios`` and class 1:``k``, then the root qdisc when no
    filter is left under it (someone else's cut or hold keeps it)."""
    if shutil.which("tc") is None:
        return False
    removed = False
    with _locked():
        if not _ours(root_qdisc()):
            return False
        filters = _filters()
        for prio in prios:
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


# Where a TCP segment's payload starts on lo: after a 20-byte IPv4 header (no options) and a TCP
# header of 32 bytes (Linux puts the timestamp option on every segment of a connection that
# negotiated it: net.ipv4.tcp_timestamps=1, the default) or of 20 (without). A hold has one filter
# for each, each checking the header length it assumes.
IP_HEADER = 20
TCP_HEADERS = (32, 20)
# The held class lets out one byte a second: a 240-byte request segment waits minutes (htb caps a
# class's debt, so about one segment a minute leaves), far past any client's request timeout.
HOLD_RATE = "8bit"


def _hold_key(port_base: int) -> int:
    """The class minor and filter priority of this cluster's hold. Keyed like the cut, by a number no
    other lab cluster can have as its port base (P+7 lies inside this cluster's ports, P..P+15),
    so a cut and a hold, of one cluster or of two, never share a class or a priority."""
    return _key(port_base + 7)


def request_matches(port: int, api_key: int, client_id: str, tcp_header: int) -> list[str]:
    """u32 match arguments for TCP segments to ``port`` that start a Kafka request of ``api_key``
    from ``client_id``: a request begins with int32 size, int16 api key, int16 version, int32
    correlation id, then the client id as int16 length + bytes (request header v1 and later)."""
    at = IP_HEADER + tcp_header
    cid = client_id.encode()
    data = {at + 4: api_key.to_bytes(2, "big"), at + 12: len(cid).to_bytes(2, "big") + cid}
    # word offset -> [value, mask]; the TCP data offset (the header length the filter assumes) is the
    # high nibble of the TCP header's byte 12, an aligned word of its own
    words: dict[int, list[int]] = {IP_HEADER + 12: [(tcp_header // 4) << 28, 0xF0000000]}
    for start, chunk in data.items():
        for i, byte in enumerate(chunk):
            off = start + i
            shift = (3 - off % 4) * 8
            w = words.setdefault(off - off % 4, [0, 0])
            w[0] |= byte << shift
            w[1] |= 0xFF << shift
    out = ["match", "u8", "0x45", "0xff", "at", "0", "match", "ip", "protocol", "6", "0xff"]
    out += ["match", "ip", "dport", str(int(port)), "0xffff"]
    for off in sorted(words):
        val, mask = words[off]
        out += ["match", "u32", f"0x{val:08x}", f"0x{mask:08x}", "at", str(off)]
    return out


def hold(port_base: int, port: int, api_key: int, client_id: str) -> dict:
    """Hold back every request of ``api_key`` that ``client_id`` sends to ``port`` on lo, whichever
    connection (source port) it travels on, in a class that lets one byte a second out (until
    :func:`release`). The client's other requests to the same port, and everyone else's, flow.
    Raises NetcutError."""
    why = unavailable()
    if why:
        raise NetcutError(why)
    k = _hold_key(port_base)
    with _locked():
        _ensure_root()
        _tc(
            "class", "replace", "dev", DEV, "parent", ROOT, "classid", f"1:{k:x}", "htb",
            "rate", HOLD_RATE, "ceil", HOLD_RATE, "burst", "1b", "cburst", "1b",
        )  # fmt: skip
        _tc("filter", "del", "dev", DEV, "parent", ROOT, "prio", str(k), check=False)  # a leftover of ours
        for tcp_header in TCP_HEADERS:
            _tc(
                "filter", "add", "dev", DEV, "parent", ROOT, "protocol", "ip", "prio", str(k), "u32",
                *request_matches(port, api_key, client_id, tcp_header), "flowid", f"1:{k:x}",
            )  # fmt: skip
    return {
        "tc_class": f"1:{k:x}",
        "tc_prio": k,
        "held_port": port,
        "held_api_key": api_key,
        "held_client_id": client_id,
    }


def held(port_base: int) -> dict | None:
    """This cluster's hold as tc counts it ({'let_out': segments, 'queued': segments}), or None
    when there is none."""
    if shutil.which("tc") is None or not _ours(root_qdisc()):
        return None
    k = _hold_key(port_base)
    if re.search(rf"\bpref {k}\b", _filters()) is None:
        return None
    out = _tc("-s", "class", "show", "dev", DEV, "classid", f"1:{k:x}", check=False).stdout
    sent = re.search(r"Sent \d+ bytes (\d+) pkt", out)
    backlog = re.search(r"backlog \S+ (\d+)p", out)
    return {"let_out": int(sent.group(1)) if sent else 0, "queued": int(backlog.group(1)) if backlog else 0}


def release(port_base: int) -> bool:
    """Remove this cluster's hold (its filters and class: what it still queues is dropped), and the
    root qdisc when nothing else uses it. Idempotent. True if anything was removed."""
    k = _hold_key(port_base)
    return _remove(k, (k,))
