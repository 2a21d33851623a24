"""The lab's clusters: real local KRaft clusters (localkafka) in the shapes the modes need.

standard  1 controller + brokers 101-103 on port base 25090 (KBOT_LAB_PORT_BASE), in
          /tmp/kbot-lab-cluster (KBOT_LAB_CLUSTER_DIR). Broker 103 has a second log dir,
          ``disk2``: a small ext4 filesystem on a loop device the lab makes (root only; a tmpfs
          when loop devices are not allowed), so one disk of one broker can be filled (full
          disk), frozen (fsfreeze: its writes block - the slow follower) or broken (log-dir
          failure) while the rest of the broker lives on.
          Broker 101 has a small incremental fetch session cache (fetch-session eviction).
          Leaders are not rebalanced by the controller, so they stay where a fault put them.
quorum    3 controllers (ids 1, 2, 3) + brokers 101-103 on port base 24090
          (KBOT_LAB_QUORUM_PORT_BASE), in /tmp/kbot-lab-quorum (KBOT_LAB_QUORUM_DIR): the one
          shape where losing two controllers is a quorum loss and not just "the controller died".
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from kbot_settings import load_harness
from lab import memcap, netcut
from localkafka.cluster import LocalCluster

DISK2_MB = 64  # small enough to fill in a second, big enough for a few segments + indexes
# On broker 101 (Kafka's default is 1000). Kafka 4.x splits the cache into 8 shards
# (BrokerServer.NumFetchSessionCacheShards), each with slots / 8 (4 slots gave every shard 0: no
# session at all), and hands new sessions to the shards in turn: 8 slots is one session per shard.
FETCH_SESSION_SLOTS = 8
TOPOLOGIES = ("standard", "quorum")
# A deleted mode topic must stay deleted: librdkafka clients (the AdminClient too) ask for known
# topics with auto-creation allowed, which would bring a mode's topic back, with default settings,
# into the next mode's answers.
NO_AUTO_CREATE = {"auto.create.topics.enable": "false"}


class LabCluster(LocalCluster):
    topology = "standard"

    @property
    def disk2(self) -> Path | None:
        """Broker 103's second log dir: a folder on the small filesystem (not its root, where
        ext4's lost+found would stop the broker: Kafka refuses foreign folders in a log dir)."""
        dirs = self.extra_log_dirs.get(103)
        return dirs[0] if dirs else None

    @property
    def disk2_mount(self) -> Path | None:
        return self.disk2.parent if self.disk2 is not None else None

    def disk2_fstype(self) -> str | None:
        """'ext4' (loop device), 'tmpfs', or None when disk2 is a plain directory."""
        return fstype(self.disk2_mount) if self.disk2 is not None else None

    def up(self, timeout: float = 180.0):
        if self.disk2 is not None:
            mount_small_disk(self.disk2_mount, self.base_dir / "disk2.img", DISK2_MB)
            self.disk2.mkdir(exist_ok=True)
        return super().up(timeout)

    def destroy(self) -> None:
        memcap.release(self.port_base)  # a page-cache cap left in place (keyed by this port base)
        self.down()
        netcut.restore(self.port_base)  # a network-partition cut left in place (keyed by this port base)
        netcut.release(self.port_base)  # a metadata-lag hold left in place (keyed the same way)
        if self.disk2 is not None and _is_mount(self.disk2_mount):
            subprocess.run(["fsfreeze", "-u", str(self.disk2_mount)], capture_output=True, timeout=30)
            subprocess.run(["umount", str(self.disk2_mount)], capture_output=True, timeout=60)
        shutil.rmtree(self.base_dir, ignore_errors=True)
        (self.base_dir.parent / f"{self.base_dir.name}.state.json").unlink(missing_ok=True)


def _is_mount(path: Path) -> bool:
    return os.path.ismount(path)


def fstype(path: Path) -> str | None:
    """The filesystem type mounted exactly at ``path`` (from /proc/mounts), or None."""
    want = str(Path(path).resolve())
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[1] == want:
            found = parts[2]  # the last mount at a path is the visible one
    return found


def _run(*argv: str) -> bool:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120).returncode == 0


def mount_small_disk(path: Path, image: Path, size_mb: int) -> str | None:
    """A small filesystem at ``path``: ext4 on a loop device (can be filled and frozen), else a
    tmpfs (can be filled, not frozen), else nothing (a plain directory: the disk modes then say
    they cannot run). Needs root / CAP_SYS_ADMIN. Returns the fstype now mounted there."""
    path.mkdir(parents=True, exist_ok=True)
    if _is_mount(path):
        return fstype(path)
    if shutil.which("mkfs.ext4"):
        if not image.exists():
            with open(image, "wb") as f:
                f.truncate(size_mb << 20)
            # -m 0: no blocks reserved for root, so "full" is full for the broker (it runs as root)
            if not _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image)):
                image.unlink(missing_ok=True)
        if image.exists() and _run("mount", "-o", "loop", str(image), str(path)):
            return "ext4"
    if _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "kbot-lab-disk2", str(path)):
        return "tmpfs"
    return None


def standard(base_dir: str | Path | None = None, port_base: int | None = None) -> LabCluster:
    h = load_harness()
    base = Path(base_dir or h.kbot_lab_cluster_dir)
    port = port_base or h.kbot_lab_port_base
    c = LabCluster(
        name="lab",
        base_dir=base,
        port_base=port,
        overrides={
            "controller": {"auto.leader.rebalance.enable": "false"},
            # retention checked every 5 s (Kafka: 5 minutes), so a lowered retention acts within a mode
            "broker": {**NO_AUTO_CREATE, "log.retention.check.interval.ms": "5000"},
            101: {"max.incremental.fetch.session.cache.slots": str(FETCH_SESSION_SLOTS)},
        },
        extra_log_dirs={103: [base.resolve() / "node-103" / "disk2" / "logs"]},
    )
    c.topology = "standard"
    return c


def quorum(base_dir: str | Path | None = None, port_base: int | None = None) -> LabCluster:
    h = load_harness()
    base = Path(base_dir or h.kbot_lab_quorum_dir)
    port = port_base or h.kbot_lab_quorum_port_base
    c = LabCluster(
        name="lab-quorum",
        base_dir=base,
        port_base=port,
        controllers=3,
        overrides={"controller": {"auto.leader.rebalance.enable": "false"}, "broker": NO_AUTO_CREATE},
    )
    c.topology = "quorum"
    return c


def cluster_for(topology: str) -> LabCluster:
    return {"standard": standard, "quorum": quorum}[topology]()


def can_mount() -> bool:
    """Whether this machine may let the lab mount a filesystem (root, mount(8) present)."""
    return os.geteuid() == 0 and shutil.which("mount") is not None
