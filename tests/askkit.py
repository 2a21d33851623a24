"""A bot process as a user starts it (`kbot ask`, `kbot console`), for the tests that check what a
user reads: only the bot settings a test gives it, no traceback in what it prints.

Lives on the tests' pythonpath (pyproject.toml): ``from askkit import kbot``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def kbot(
    *args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python -m cli.main ARGS` with none of the caller's bot settings (KBOT_*, SLACK_*): ``env``'s only."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(ROOT),
        env={**clean, "NO_COLOR": "1", **env},
    )


def private_cache(tmp_path: Path) -> str:
    """A cache root of a test's own: the real one's Delta jars (Spark needs them) and no local
    cluster for `kbot ask` to find (a developer's `kbot run` may be up on this machine)."""
    from lake import jars

    cache = tmp_path / "cache"
    cache.mkdir(exist_ok=True)
    link = cache / jars.jars_dir().name
    if not link.exists():
        link.symlink_to(jars.jars_dir(), target_is_directory=True)
    return str(cache)


def no_traceback(*texts: str) -> None:
    """Nothing a user reads carries a traceback, the internal error's answer or Delta's error names."""
    for text in texts:
        assert "Traceback" not in text and "Internal error" not in text and "DELTA_" not in text, text[-3000:]
