"""One AdminGateway per configured cluster and principal, created on first use and reused.

Reads use the cluster's configured (observer) credentials: :meth:`GatewayPool.get`. A confirmed
action uses the operator's: :meth:`GatewayPool.operator` (``ClusterConfig.as_operator``), a
separate client with its own connections, so nothing read-only ever runs with the rights to act.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from kbot_settings import load

from .config import ConfigError, get_cluster, load_config
from .gateway import AdminGateway


class GatewayPool:
    def __init__(self, env: Mapping[str, str] | None = None, timeout_s: float | None = None):
        self._env = os.environ if env is None else env
        self.timeout_s = timeout_s if timeout_s is not None else load(self._env).kbot_admin_timeout_s
        self._gateways: dict[str, AdminGateway] = {}
        self._lock = asyncio.Lock()

    def configured(self) -> bool:
        try:
            clusters, _default = load_config(self._env)
        except ConfigError:
            return True  # misconfigured is not "absent": get() will say what is wrong
        return bool(clusters)

    def names(self) -> tuple[list[str], str | None]:
        """The configured cluster names (sorted) and the default one (None: no rule picks one)."""
        clusters, default = load_config(self._env)
        return sorted(clusters), default

    async def get(self, name: str | None = None, role: str = "observer") -> AdminGateway:
        """The gateway for ``name`` (None: the default cluster) with the observer's credentials,
        or the operator's for ``role="operator"``. Raises live.ConfigError."""
        config = get_cluster(name, self._env)
        if role == "operator":
            config = config.as_operator()
        key = f"{config.name}\0{config.role}"
        async with self._lock:
            gw = self._gateways.get(key)
            if gw is None:
                gw = AdminGateway(config, timeout_s=self.timeout_s)
                self._gateways[key] = gw
            return gw

    def connected(self) -> list[tuple[str, str]]:
        """(cluster, role) of every gateway opened so far: which principals this process used."""
        return sorted((cluster, role) for cluster, _, role in (k.partition("\0") for k in self._gateways))

    async def operator(self, name: str | None = None) -> AdminGateway:
        """The gateway a confirmed action changes ``name`` with (operator credentials)."""
        return await self.get(name, role="operator")

    async def close(self) -> None:
        async with self._lock:
            gateways, self._gateways = list(self._gateways.values()), {}
        await asyncio.gather(*(gw.close() for gw in gateways), return_exceptions=True)
