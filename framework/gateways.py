"""Which admin gateway a command talks to: the observer's for every read, and the principal of the
action's role (config, operator) for a change, refused up front when that principal is not set."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from framework.context import Context
from framework.errors import Unavailable
from live.config import ConfigError
from live.gateway import AdminGateway

NO_CLUSTER_CONFIGURED = "No Kafka cluster is configured"  # the bot runs with no cluster: what an answer says


async def action_gateway(ctx: Context, cluster: str | None, role: str) -> AdminGateway:
    """The gateway an action changes ``cluster`` with: the credentials of ``role``'s principal
    ("config": retention, throttle; "operator": elect-leaders, abort-txn; live/config.py). Reads -
    previews, rechecks, read-backs - use the observer's (framework.gateways.gateway), so the rights
    to change the cluster are used only for the change itself and its validate_only dry run, which
    changes nothing but proves the principal may. A principal that is not configured is refused here,
    up front, with what to set (Unavailable); the change is never tried with another one's rights."""
    pool = ctx.live
    get: Callable[..., Awaitable[AdminGateway]] | None = getattr(pool, "get", None)
    if pool is None or get is None or not hasattr(pool, "operator"):  # a pool with one principal per cluster
        return await gateway(ctx, cluster)
    try:
        return await get(cluster, role=role)
    except ConfigError as exc:
        raise Unavailable(str(exc)) from None


def require_principal(ctx: Context, cluster: str | None, role: str) -> None:
    """Refuse an action up front (Unavailable, naming what to set) when the principal it runs as is
    not configured for the cluster; dispatch calls this before the preview reads anything."""

    check: Callable[[str | None, str], None] | None = getattr(ctx.live, "check_role", None)
    if check is None:
        return
    try:
        check(cluster, role)
    except ConfigError as exc:
        raise Unavailable(str(exc)) from None


async def operator_gateway(ctx: Context, cluster: str | None) -> AdminGateway:
    """The operator principal's gateway (elect-leaders, abort-txn): :func:`action_gateway`."""
    return await action_gateway(ctx, cluster, "operator")


async def config_gateway(ctx: Context, cluster: str | None) -> AdminGateway:
    """The config principal's gateway (retention, throttle): :func:`action_gateway`."""
    return await action_gateway(ctx, cluster, "config")


async def gateway(ctx: Context, cluster: str | None) -> AdminGateway:
    """The admin gateway of ``cluster`` (a request's --cluster, or the cluster a plan was made on;
    None: the default one)."""
    if ctx.live is None:
        raise Unavailable(
            f"{NO_CLUSTER_CONFIGURED}."
            "[[terminal: Set KBOT_BOOTSTRAP=host:port (or a clusters file), or start the local one with `kbot cluster up`.]]"
            "[[slack: Whoever runs the bot points it at a cluster (KBOT_BOOTSTRAP or a clusters file).]]"
        )

    try:
        gw = await ctx.live.get(cluster)
    except ConfigError as exc:
        raise Unavailable(str(exc)) from None
    # Nothing listening at any bootstrap address is known in a millisecond (the gateway's probe),
    # not after the admin timeout. An in-memory gateway in tests has no addresses to probe.
    check = getattr(gw, "raise_if_nothing_listens", None)
    if check is not None:
        await check()
    return gw
