"""One AdminGateway per configured cluster and principal, created on first use and reused.

Reads use the cluster's configured (observer) credentials: :meth:`GatewayPool.get`. A confirmed
action uses the principal of its privilege level (``ClusterConfig.as_role``): the config principal
for retention and throttle (:meth:`GatewayPool.config`), the operator for elect-leaders and
abort-txn (:meth:`GatewayPool.operator`) - each a separate client with its own connections, so
nothing read-only ever runs with the rights to act, and no config change with the cluster ALTER
that elections need (and that Kafka also accepts for CreateAcls).
"""

from __future__ import annotations

import asyncio

from kbot_settings import KbotSettings
from live.config import ConfigError, get_cluster, load_config
from live.gateway import AdminGateway


class GatewayPool:
    def __init__(self, settings: KbotSettings, timeout_s: float | None = None):
        self._settings = settings
        self.timeout_s = timeout_s if timeout_s is not None else settings.kbot_admin_timeout_s
        self._gateways: dict[str, AdminGateway] = {}
        self._lock = asyncio.Lock()

    @property
    def settings(self) -> KbotSettings:
        """The settings this pool reads its clusters from (loaded once, by the process)."""
        return self._settings

    def configured(self) -> bool:
        try:
            clusters, _default = load_config(self._settings)
        except ConfigError:
            return True  # misconfigured is not "absent": get() will say what is wrong
        return bool(clusters)

    def names(self) -> tuple[list[str], str | None]:
        """The configured cluster names (sorted) and the default one (None: no rule picks one)."""
        clusters, default = load_config(self._settings)
        return sorted(clusters), default

    async def get(self, name: str | None = None, role: str = "observer") -> AdminGateway:
        """The gateway for ``name`` (None: the default cluster) with the observer's credentials,
        or those of ``role`` ("config", "operator"). Raises live.ConfigError, also when the role's
        principal is not configured on a cluster that authenticates clients."""
        config = get_cluster(name, self._settings).as_role(role)
        key = f"{config.name}\0{config.role}"
        async with self._lock:
            gw = self._gateways.get(key)
            if gw is None:
                gw = AdminGateway(config, timeout_s=self.timeout_s)
                self._gateways[key] = gw
            return gw

    def check_role(self, name: str | None, role: str) -> None:
        """Raise ConfigError (what to set) if ``role``'s principal is not configured for ``name``,
        without connecting: how an action is refused up front, before its preview reads anything.
        A cluster that cannot be resolved at all passes here; get() says what is wrong with it."""
        try:
            config = get_cluster(name, self._settings)
        except ConfigError:
            return
        config.as_role(role)

    def connected(self) -> list[tuple[str, str]]:
        """(cluster, role) of every gateway opened so far: which principals this process used."""
        return sorted((cluster, role) for cluster, _, role in (k.partition("\0") for k in self._gateways))

    async def operator(self, name: str | None = None) -> AdminGateway:
        """The gateway elect-leaders and abort-txn change ``name`` with (operator credentials)."""
        return await self.get(name, role="operator")

    async def config(self, name: str | None = None) -> AdminGateway:
        """The gateway retention and throttle change ``name`` with (config principal credentials)."""
        return await self.get(name, role="config")

    async def close(self) -> None:
        async with self._lock:
            gateways, self._gateways = list(self._gateways.values()), {}
        await asyncio.gather(*(gw.close() for gw in gateways), return_exceptions=True)
