"""The Delta Lake jars: fetched once with Maven into the kbot cache, then put on ``spark.jars``.

The version lives in one place, ``lake/pom.xml`` (``delta.version``); this module runs::

    mvn -B -q -f lake/pom.xml dependency:copy-dependencies -Dkbot.delta.dir=<cache>/delta-<version>

where the cache root is ``$KBOT_CACHE_DIR`` or ``~/.cache/kbot`` (as for the Kafka jars,
``localkafka.fetch``).  ``scripts/fetch_delta.sh`` calls :func:`ensure_jars` ahead of time (setup,
CI image); a SparkSession is only ever built from a complete cache, so no query waits on Maven.
A marker written after a complete copy (the pom's hash) makes later calls a no-op.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from kbot_settings import cache_dir
from lake.errors import LakeError

POM = Path(__file__).with_name("pom.xml")
_MARKER = ".kbot-complete.json"
ARTIFACTS = ("delta-spark_2.13", "delta-storage")


class JarsError(LakeError):
    """Maven could not fetch the Delta jars (``output`` holds Maven's output)."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message if not output else f"{message}\n--- maven output ---\n{output[-4000:]}")
        self.output = output


def delta_version() -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(POM).getroot().find("m:properties", ns)
    return props.find("m:delta.version", ns).text.strip()


def cache_root() -> Path:
    """``KBOT_CACHE_DIR`` (default ``~/.cache/kbot``), as the settings resolve it."""

    return cache_dir()


def jars_dir() -> Path:
    return cache_root() / f"delta-{delta_version()}"


def jar_paths() -> list[Path]:
    v = delta_version()
    return [jars_dir() / f"{a}-{v}.jar" for a in ARTIFACTS]


def is_complete() -> bool:
    try:
        marker = json.loads((jars_dir() / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("pom_sha256") == _pom_hash() and all(p.is_file() for p in jar_paths())


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def ensure_jars(quiet: bool = True) -> list[Path]:
    """Make sure the Delta jars are in the cache; return their paths (JarsError when Maven fails)."""
    home = jars_dir()
    if is_complete():
        return jar_paths()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:  # two processes must not copy into one dir at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete():
            return jar_paths()
        mvn = shutil.which("mvn")
        if not mvn:
            raise JarsError(
                "Maven ('mvn') is not on PATH; it is needed to fetch the Delta Lake jars "
                "(run scripts/fetch_delta.sh where Maven is installed)"
            )
        for old in home.glob("*.jar"):
            old.unlink()
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-Dkbot.delta.dir={home}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        shutil.rmtree(POM.parent / "target", ignore_errors=True)  # mvn -f creates it for nothing
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise JarsError(f"mvn dependency:copy-dependencies failed (exit {proc.returncode})", output)
        missing = [p.name for p in jar_paths() if not p.is_file()]
        if missing:
            raise JarsError(f"mvn succeeded but these jars are missing: {missing}", output)
        (home / _MARKER).write_text(
            json.dumps(
                {"pom_sha256": _pom_hash(), "version": delta_version(), "jars": [p.name for p in jar_paths()]}, indent=1
            )
        )
    return jar_paths()


if __name__ == "__main__":
    import sys

    try:
        print("\n".join(str(p) for p in ensure_jars()))
    except JarsError as exc:
        sys.exit(f"error: {exc}")
