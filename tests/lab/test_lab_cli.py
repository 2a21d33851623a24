"""`kbot lab` on the command line without a cluster: list, help, bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.modes import MODES

ROOT = Path(__file__).resolve().parents[2]


def kbot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_list_json_has_every_mode_with_feasibility():
    res = kbot("lab", "list", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["mode"] for r in rows] == [m.name for m in MODES]
    for r in rows:
        # a mode that cannot run here says why; one that can has nothing to explain
        assert (r["why_not"] is None) == r["runs_here"], r
    not_here = {r["mode"] for r in rows if not r["runs_here"]}
    # the network partition and the metadata lag run wherever tc may shape loopback (root with
    # iproute2), else say why
    from lab import netcut

    assert ("network-partition" in not_here) == (netcut.unavailable() is not None)
    assert ("metadata-lag" in not_here) == (netcut.unavailable() is not None)


@pytest.mark.parametrize("name", ["network-partition", "metadata-lag"])
def test_tc_modes_say_why_they_cannot_run_without_tc_or_root(monkeypatch, name):
    from lab import netcut
    from lab.modes import by_name
    from lab.runner import run_mode, unavailable

    mode = by_name()[name]
    monkeypatch.setattr(netcut.shutil, "which", lambda name: None)
    assert "needs tc (iproute2)" in unavailable(mode)
    # run_mode stops before starting a cluster, with the reason and no traceback
    assert run_mode(mode, cluster=None)["error"].startswith("not run: needs tc (iproute2)")
    with pytest.raises(netcut.NetcutError, match="needs tc"):
        netcut.cut(16090, [16093])
    with pytest.raises(netcut.NetcutError, match="needs tc"):
        netcut.hold(16090, 16090, 1, "raft-client-103")
    monkeypatch.setattr(netcut.shutil, "which", lambda name: "/usr/sbin/tc")
    monkeypatch.setattr(netcut.os, "geteuid", lambda: 1000)
    assert "needs root (CAP_NET_ADMIN)" in unavailable(mode)


def test_list_text_says_why_a_mode_cannot_run():
    res = kbot("lab", "list")
    assert res.returncode == 0
    rows = json.loads(kbot("lab", "list", "--json").stdout)
    for r in rows:
        assert r["mode"] in res.stdout
    # a mode that cannot run here (none needs to, where tc, root and loop mounts are allowed) says why
    assert ("why not:" in res.stdout) == any(not r["runs_here"] for r in rows)
    assert res.stdout.count("why not:") == sum(not r["runs_here"] for r in rows)


def test_unknown_mode_is_a_short_error_listing_the_modes():
    res = kbot("lab", "run", "no-such-mode")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "unknown mode 'no-such-mode'" in res.stderr and "broker-loss" in res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_help_is_real_help():
    res = kbot("lab", "run", "--help")
    assert res.returncode == 0
    assert "--heal" in res.stdout and "--json" in res.stdout and "kbot lab heal" in res.stdout


def test_no_action_is_bad_input():
    res = kbot("lab")
    assert res.returncode == 2 and "list, run MODE, heal, down or chaos" in res.stderr


def test_hold_matches_a_request_by_its_header_not_its_connection():
    """The metadata-lag hold's u32 keys: the controller's port, the TCP header length it assumes, the
    Fetch api key and the client id 'raft-client-103' with its length, never a source port."""
    from lab import netcut

    args = netcut.request_matches(16090, 1, "raft-client-103", 32)
    words = {int(args[i + 4]): (int(args[i + 1], 16), int(args[i + 2], 16)) for i, a in enumerate(args) if a == "u32"}
    assert "sport" not in args and args[args.index("dport") + 1] == "16090"
    assert words[32] == (0x80000000, 0xF0000000)  # TCP data offset 8 words: 32-byte header
    assert words[56] == (0x00010000, 0xFFFF0000)  # payload 4..5: api key 1 (Fetch)
    payload = b"".join(words[off][0].to_bytes(4, "big") for off in range(64, 84, 4))
    assert payload.startswith(b"\x00\x0fraft-client-103")
    assert words[80][1] == 0xFF000000  # nothing matched past the client id
    # without TCP timestamps the payload starts 12 bytes earlier
    short = netcut.request_matches(16090, 1, "raft-client-103", 20)
    assert "0x50000000" in short and "44" in short
