"""A clusters file that holds passwords must be readable by the bot's account alone.

A literal ``sasl_password`` / ``ssl_key_password`` in clusters.yaml is as secret as the password
itself; a file others on the host can read (group or world read bits) hands it to them. The bot
warns when it loads such a file and `kbot config` says so too, naming the file, its mode, which
passwords it holds and the fix. A password given as ``${VAR}`` is not in the file and not counted.
"""

from __future__ import annotations

import logging
import re
import stat
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

SECRET_KEYS = ("sasl_password", "ssl_key_password")
_ONLY_A_REFERENCE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_warned: set[tuple[str, int]] = set()  # (file, mode): one log line per file and mode per process


def literal_secrets(doc: object) -> list[str]:
    """Where the parsed clusters file holds a password literally: "cluster.key" / "cluster.role.key"."""
    clusters = doc.get("clusters") if isinstance(doc, Mapping) else None
    out: list[str] = []
    for name, entry in (clusters or {}).items() if isinstance(clusters, Mapping) else ():
        if not isinstance(entry, Mapping):
            continue
        scopes = [(str(name), entry)] + [
            (f"{name}.{role}", entry[role]) for role in ("config", "operator") if isinstance(entry.get(role), Mapping)
        ]
        for where, scope in scopes:
            for key in SECRET_KEYS:
                value = scope.get(key)
                if value not in (None, "") and not _ONLY_A_REFERENCE.match(str(value).strip()):
                    out.append(f"{where}.{key}")
    return out


def readable_by_others(path: Path, doc: object) -> str | None:
    """The warning for a clusters file that holds passwords and is readable beyond its owner, else None."""
    secrets = literal_secrets(doc)
    if not secrets:
        return None
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return None
    who = " and ".join(w for bit, w in ((stat.S_IRGRP, "its group"), (stat.S_IROTH, "every user")) if mode & bit)
    shown = ", ".join(secrets[:4]) + (f" and {len(secrets) - 4} more" if len(secrets) > 4 else "")
    return (
        f"{path} holds passwords ({shown}) and is readable by {who} on this host (mode {mode:04o}): "
        f"run `chmod 600 {path}`, or give the passwords as ${{VAR}} from the environment"
    )


def warn_once(path: Path, doc: object) -> str | None:
    """:func:`readable_by_others`, logged as a warning the first time per file and mode."""
    warning = readable_by_others(path, doc)
    if warning is not None:
        key = (str(path), stat.S_IMODE(path.stat().st_mode))
        if key not in _warned:
            _warned.add(key)
            log.warning("clusters file: %s", warning)
    return warning
