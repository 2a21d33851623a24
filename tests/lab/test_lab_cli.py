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
        [sys.executable, "-m", "bot.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
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
    assert "metadata-lag" in not_here
    # the network partition runs wherever tc may shape loopback (root with iproute2), else says why
    from lab import netcut

    assert ("network-partition" in not_here) == (netcut.unavailable() is not None)


def test_network_partition_says_why_it_cannot_run_without_tc_or_root(monkeypatch):
    from lab import netcut
    from lab.modes import by_name
    from lab.runner import run_mode, unavailable

    mode = by_name()["network-partition"]
    monkeypatch.setattr(netcut.shutil, "which", lambda name: None)
    assert "needs tc (iproute2)" in unavailable(mode)
    # run_mode stops before starting a cluster, with the reason and no traceback
    assert run_mode(mode, cluster=None)["error"].startswith("not run: needs tc (iproute2)")
    with pytest.raises(netcut.NetcutError, match="needs tc"):
        netcut.cut(16090, [16093])
    monkeypatch.setattr(netcut.shutil, "which", lambda name: "/usr/sbin/tc")
    monkeypatch.setattr(netcut.os, "geteuid", lambda: 1000)
    assert "needs root (CAP_NET_ADMIN)" in unavailable(mode)


def test_list_text_says_why_a_mode_cannot_run():
    res = kbot("lab", "list")
    assert res.returncode == 0
    assert "metadata-lag" in res.stdout and "why not:" in res.stdout


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
    assert res.returncode == 2 and "list, run MODE, heal or down" in res.stderr
