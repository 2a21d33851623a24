"""State files that hold confirm tokens and the audit trail: a 0700 folder, 0600 files."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)


def private_dir(path: Path) -> Path:
    """Create ``path`` as 0700, or tighten it to 0700 when it is ours: it holds confirm tokens and
    the audit trail. A shared folder we do not own (or a sticky one like /tmp) is left alone, with
    a warning, rather than chmod'ed under other users' feet."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_mode & 0o077:
        if st.st_uid == os.getuid() and not st.st_mode & stat.S_ISVTX:
            os.chmod(path, 0o700)
        else:
            log.warning(
                "state folder %s is readable by other users (mode %o) and is not ours to tighten; "
                "point KBOT_STATE_DIR at a private folder",
                path,
                st.st_mode & 0o777,
            )
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` as 0600 if missing, and tighten it to 0600 if an older version left it wider.
    sqlite gives its -wal and -shm files the database file's mode, so this covers them too."""
    path = Path(path)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)
    return path
