"""One AdminGateway per configured cluster, created on first use and reused by every request."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from .config import ConfigError, get_cluster, load_config
from .gateway import AdminGateway


class GatewayPool:
    def __init__(self, env: Mapping[str, str] | None = None, timeout_s: float | None = None):
        self._env = os.environ if env is None else env
        self.timeout_s = timeout_s if timeout_s is not None else float(self._env.get("KBOT_ADMIN_TIMEOUT_S", "10"))
        self._gateways: dict[str, AdminGateway] = {}
        self._lock = asyncio.Lock()

    def configured(self) -> bool:
        try:
            clusters, _default = load_config(self._env)
        except ConfigError:
            return True  # misconfigured is not "absent": get() will say what is wrong
        return bool(clusters)

    async def get(self, name: str | None = None) -> AdminGateway:
        """The gateway for ``name`` (None: the default cluster). Raises live.ConfigError."""
        config = get_cluster(name, self._env)
        async with self._lock:
            gw = self._gateways.get(config.name)
            if gw is None:
                gw = AdminGateway(config, timeout_s=self.timeout_s)
                self._gateways[config.name] = gw
            return gw

    async def close(self) -> None:
        async with self._lock:
            gateways, self._gateways = list(self._gateways.values()), {}
        await asyncio.gather(*(gw.close() for gw in gateways), return_exceptions=True)
