"""Fetch the Kafka / log4j / JMX-exporter jars from Maven Central with Maven.

The versions live in one place, ``localkafka/pom.xml`` (properties
``kafka.version``, ``log4j.version``, ``jmx.exporter.version``); this module
only reads them and runs::

    mvn -B -q -f localkafka/pom.xml \
        dependency:copy-dependencies@libs dependency:copy-dependencies@agent

into ``<cache root>/kafka-<kafka.version>/{libs,agent}``. The cache root is
``$KBOT_CACHE_DIR`` or ``~/.cache/kbot``. A marker file written after a
successful copy (holding a hash of the pom and the jar list) makes later calls
a no-op; editing the pom or deleting a jar triggers a re-fetch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from kbot_settings import cache_dir

POM = Path(__file__).with_name("pom.xml")
_MARKER = ".kbot-complete.json"


class JarsError(RuntimeError):
    """Maven could not fetch the jars; ``output`` holds Maven's output."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message if not output else f"{message}\n--- maven output ---\n{output}")
        self.output = output


@dataclass(frozen=True)
class Versions:
    kafka: str
    log4j: str
    jmx_exporter: str


def pom_versions() -> Versions:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    props = ET.parse(POM).getroot().find("m:properties", ns)
    get = lambda k: props.find(f"m:{k}", ns).text.strip()  # noqa: E731
    return Versions(get("kafka.version"), get("log4j.version"), get("jmx.exporter.version"))


def cache_root() -> Path:
    return cache_dir()


def kafka_home(versions: Versions | None = None) -> Path:
    v = versions or pom_versions()
    return cache_root() / f"kafka-{v.kafka}"


def agent_jar() -> Path:
    v = pom_versions()
    return kafka_home(v) / "agent" / f"jmx_prometheus_javaagent-{v.jmx_exporter}.jar"


def _pom_hash() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def _required_jars(v: Versions) -> list[str]:
    # The jars whose absence would make the cluster unusable; the marker's
    # full list catches anything else that went missing.
    return [
        f"libs/kafka_2.13-{v.kafka}.jar",
        f"libs/kafka-server-{v.kafka}.jar",
        f"libs/kafka-tools-{v.kafka}.jar",
        f"libs/kafka-clients-{v.kafka}.jar",
        f"libs/log4j-slf4j-impl-{v.log4j}.jar",
        f"agent/jmx_prometheus_javaagent-{v.jmx_exporter}.jar",
    ]


def is_complete(home: Path | None = None) -> bool:
    v = pom_versions()
    home = home or kafka_home(v)
    try:
        marker = json.loads((home / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("pom_sha256") != _pom_hash():
        return False
    wanted = set(marker.get("jars", [])) | set(_required_jars(v))
    return all((home / rel).is_file() for rel in wanted)


def ensure_jars(quiet: bool = True) -> Path:
    """Make sure all jars are in the cache; return the ``libs`` directory.

    Raises :class:`JarsError` (with Maven's output) when Maven is missing or
    an artifact does not resolve.
    """
    v = pom_versions()
    home = kafka_home(v)
    if is_complete(home):
        return home / "libs"
    home.mkdir(parents=True, exist_ok=True)
    # A lock so two processes (e.g. the CLI and a test run) don't both write
    # into the same libs dir.
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(home):
            return home / "libs"
        mvn = shutil.which("mvn")
        if not mvn:
            raise JarsError("Maven ('mvn') is not on PATH; it is needed to fetch the Kafka jars")
        # Start from empty dirs: a half-copied or older jar set must not mix in.
        for sub in ("libs", "agent"):
            shutil.rmtree(home / sub, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(POM),
            "dependency:copy-dependencies@libs",
            "dependency:copy-dependencies@agent",
            f"-Dkbot.libs.dir={home / 'libs'}",
            f"-Dkbot.agent.dir={home / 'agent'}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        # mvn -f <pom> also creates localkafka/target for nothing; keep the tree clean.
        shutil.rmtree(POM.parent / "target", ignore_errors=True)
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise JarsError(f"mvn dependency:copy-dependencies failed (exit {proc.returncode})", output)
        missing = [rel for rel in _required_jars(v) if not (home / rel).is_file()]
        if missing:
            raise JarsError(f"mvn succeeded but these jars are missing: {missing}", output)
        jars = sorted(str(p.relative_to(home)) for p in home.glob("*/*.jar"))
        (home / _MARKER).write_text(
            json.dumps({"pom_sha256": _pom_hash(), "versions": v.__dict__, "jars": jars}, indent=1)
        )
    return home / "libs"
