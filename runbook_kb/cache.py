"""The built runbook, kept between processes.

A one-shot `kbot ask` parses and validates the runbook and trains the lookup's word model before
it can answer: 0.3-0.7 s on a busy 2-core machine, most of a cold answer. Both depend only on the
packaged data files and the runbook_kb code, so the built pair (KnowledgeBase, Lookup) is pickled
into a private cache file named by a digest of exactly those inputs, and loaded when none of them
changed. A changed or malformed entry changes the digest, so it is parsed and validated again and
a bad one still stops the bot with its file and field named.

The cache folder is the user's own (``$KBOT_CACHE_DIR`` or ``~/.cache/kbot``), 0700; a file in it
that another user could have written is ignored rather than unpickled.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import kbot_settings

if TYPE_CHECKING:  # the loader imports this module; these names are for the annotations only
    from runbook_kb.loader import KnowledgeBase
    from runbook_kb.lookup import Lookup

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent


def digest(data_dir: Path) -> str:
    """A digest of everything the built runbook depends on: the data files, this package's code and
    the Python and pydantic versions (a pickle is only good for the classes that wrote it)."""
    import pydantic

    h = hashlib.sha256(f"{sys.version_info[:3]} {pydantic.VERSION}".encode())
    files = sorted(p for p in data_dir.rglob("*") if p.is_file()) + sorted(PACKAGE_DIR.glob("*.py"))
    for path in files:
        h.update(str(path.relative_to(path.anchor)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def cache_dir() -> Path:
    return kbot_settings.cache_dir() / "runbook"


def _path(data_dir: Path) -> Path:
    return cache_dir() / f"built-{digest(data_dir)}.pickle"


def _trusted(path: Path) -> bool:
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def load(data_dir: Path) -> tuple[KnowledgeBase, Lookup] | None:
    """(KnowledgeBase, Lookup) built from ``data_dir`` by an earlier process, or None."""
    try:
        path = _path(data_dir)
        if not path.exists() or not _trusted(path) or not _trusted(path.parent):
            return None
        with path.open("rb") as f:
            kb, lookup = pickle.load(f)  # noqa: S301 - our own file, in our private folder, named by its inputs
        return kb, lookup
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be read is rebuilt, never fatal
        log.debug("runbook cache not used: %s", exc)
        return None


def store(data_dir: Path, kb: KnowledgeBase, lookup: Lookup) -> None:
    """Keep the built pair for the next process; best effort (a read-only home just skips it)."""
    try:
        folder = cache_dir()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        path = _path(data_dir)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            pickle.dump((kb, lookup), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # readers see the whole file or none
        for old in folder.glob("built-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except Exception as exc:  # noqa: BLE001
        log.debug("runbook cache not written: %s", exc)
