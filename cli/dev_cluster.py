"""The local `dev` cluster `kbot run` starts, found again by the other `kbot` processes."""

from __future__ import annotations

import os
from collections.abc import Mapping

from bot.app import cluster_configured, local_env
from localkafka.cluster import LocalCluster

#: the local cluster's name (`kbot cluster up` without --name starts it too)
DEV = "dev"


def effective_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configuration this process runs with: ``env`` (default: the process environment) and,
    when it configures no cluster, the local dev cluster if that is running - so `kbot ask` in another
    terminal sees what `kbot run` started. A copy: the process environment is never written to
    pass configuration around."""
    out = dict(os.environ if env is None else env)
    if cluster_configured(out):
        return out
    cluster = LocalCluster(name=DEV)
    if any(n.pid() for n in cluster.nodes):
        out.update(local_env(cluster))
    return out
