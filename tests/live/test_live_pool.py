"""live.pool: one gateway per cluster and principal; reads and actions never share a client."""

from __future__ import annotations

from kbot_settings import load as load_settings
from live.pool import GatewayPool

ENV = {
    "KBOT_BOOTSTRAP": "127.0.0.1:1",
    "KBOT_CLUSTER_NAME": "prod",
    "KBOT_SECURITY_PROTOCOL": "SASL_SSL",
    "KBOT_SASL_MECHANISM": "SCRAM-SHA-512",
    "KBOT_SASL_USERNAME": "obs",
    "KBOT_SASL_PASSWORD": "a",
    "KBOT_OPERATOR_SASL_USERNAME": "op",
    "KBOT_OPERATOR_SASL_PASSWORD": "b",
}


async def test_observer_and_operator_get_their_own_gateways():
    pool = GatewayPool(load_settings(ENV))
    try:
        read = await pool.get()
        assert pool.connected() == [("prod", "observer")]
        act = await pool.operator("prod")
        assert act is not read and act is await pool.operator(None) and read is await pool.get("prod")
        assert (read.config.sasl_username, act.config.sasl_username) == ("obs", "op")
        assert pool.connected() == [("prod", "observer"), ("prod", "operator")]
        assert pool.names() == (["prod"], "prod")
    finally:
        await pool.close()
