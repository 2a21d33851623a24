"""The built runbook is cached between processes (runbook_kb/cache.py) and never used stale."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runbook_kb import cache, load_kb
from runbook_kb.loader import DATA_DIR
from runbook_kb.lookup import Lookup

ROOT = Path(__file__).resolve().parents[2]


def test_store_then_load_gives_the_same_answers(tmp_path, monkeypatch):
    monkeypatch.setenv("KBOT_CACHE_DIR", str(tmp_path / "cache"))
    kb = load_kb()
    lookup = Lookup(kb)
    assert cache.load(DATA_DIR) is None
    cache.store(DATA_DIR, kb, lookup)
    files = list((tmp_path / "cache" / "runbook").glob("built-*.pickle"))
    assert len(files) == 1 and files[0].stat().st_mode & 0o777 == 0o600
    loaded_kb, loaded_lookup = cache.load(DATA_DIR)
    assert sorted(loaded_kb.failure_modes) == sorted(kb.failure_modes)
    question = "RF=2 with min.insync.replicas=2, what happens when one broker dies?"
    assert [h.id for h in loaded_lookup.answer(question)] == [h.id for h in lookup.answer(question)]


def test_a_changed_entry_changes_the_digest(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    before = cache.digest(data)
    entry = data / "failure_modes" / "broker-loss.yaml"
    entry.write_text(entry.read_text().replace("Broker loss", "Broker lost", 1))
    assert cache.digest(data) != before


def test_a_file_others_could_write_or_a_corrupt_one_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("KBOT_CACHE_DIR", str(tmp_path / "cache"))
    kb = load_kb()
    cache.store(DATA_DIR, kb, Lookup(kb))
    path = next((tmp_path / "cache" / "runbook").glob("built-*.pickle"))
    os.chmod(path, 0o666)
    assert cache.load(DATA_DIR) is None
    os.chmod(path, 0o600)
    path.write_bytes(b"not a pickle")
    assert cache.load(DATA_DIR) is None


def test_a_second_process_answers_from_the_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBOT_") or k == "KBOT_REQUIRE_SEEDS"}
    env.update(KBOT_CACHE_DIR=str(tmp_path / "cache"), KBOT_HOME=str(tmp_path / "home"))
    run = [sys.executable, "-m", "cli.main", "ask", "why", "NotEnoughReplicas"]
    first = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    assert list((tmp_path / "cache" / "runbook").glob("built-*.pickle")), "the first process left no cache"
    second = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert second.returncode == 0 and second.stdout == first.stdout
