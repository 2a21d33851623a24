"""The local `dev` cluster `kbot run` starts, found again by the other `kbot` processes."""

from __future__ import annotations

from bot.app import cluster_configured, local_settings
from kbot_settings import KbotSettings
from localkafka.cluster import LocalCluster

#: the local cluster's name (`kbot cluster up` without --name starts it too)
DEV = "dev"


def effective_settings(settings: KbotSettings) -> KbotSettings:
    """The configuration this process runs with: ``settings`` and, when they configure no cluster,
    the local dev cluster if that is running - so `kbot ask` in another terminal sees what `kbot run`
    started. A copy (KbotSettings.updated): nothing is written anywhere to pass configuration around."""
    if cluster_configured(settings):
        return settings
    cluster = LocalCluster.named(DEV)
    if any(n.pid() for n in cluster.nodes):
        return local_settings(settings, cluster)
    return settings
