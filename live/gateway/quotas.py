"""Client quotas (DescribeClientQuotas, KIP-546): the byte-rate and request-rate limits the brokers
enforce per user / client id. Neither library has an admin call for it (librdkafka lacks the API,
kafka-python 3.x ships the request but no KafkaAdminClient method), so the request is built here and
sent through kafka-python's client, as the quorum read is."""

from __future__ import annotations

from typing import Any

from live import model
from live.gateway.reads import ReadsMixin

# DescribeClientQuotas filter match types: "any entity of this type, named or default"
_MATCH_ANY = 2
_ENTITY_TYPES = ("user", "client-id", "ip")


class QuotasMixin(ReadsMixin):
    """Client-quota reads; see the module docstring."""

    async def client_quotas(self) -> list[model.ClientQuota]:
        """Every client quota set on the cluster: one row per entity (user, client id, both, or an
        IP) with its limits. Defaults (``<default>``) count as entities too."""
        client = await self._kafka_python()
        rows: list[model.ClientQuota] = []
        seen: set[tuple[tuple[str, str], ...]] = set()
        # one request per entity type: a non-strict filter on one component returns every entity that
        # has that component, including combined user + client-id entities
        for entity_type in _ENTITY_TYPES:
            entries = await self._blocking(
                f"describe_client_quotas ({entity_type})", describe_quotas_of, client, entity_type
            )
            for entity, values in entries:
                key = tuple(sorted(entity.items()))
                if key in seen:
                    continue
                seen.add(key)
                rows.append(model.ClientQuota(dict(key), dict(sorted(values.items()))))
        return sorted(rows, key=lambda q: q.entity_label)


def describe_quotas_of(
    client: Any, entity_type: str, node: int | None = None
) -> list[tuple[dict[str, str], dict[str, float]]]:
    """Thread body: DescribeClientQuotas for every entity with a component of ``entity_type``, as
    (entity type -> name, with ``<default>`` for the default; quota key -> value) pairs; asked of
    ``node``, or of the least loaded broker (each answers from its own copy of the metadata)."""
    import kafka.errors as E
    from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest

    comp = DescribeClientQuotasRequest.ComponentData(entity_type=entity_type, match_type=_MATCH_ANY, match=None)
    request = DescribeClientQuotasRequest(components=[comp], strict=False)
    response = client._manager.run(client._manager.send, request, node)
    err = E.for_code(response.error_code)
    if err is not E.NoError:
        raise err(response.error_message or "")
    out = []
    for entry in response.entries or []:
        entity = {e.entity_type: e.entity_name if e.entity_name is not None else "<default>" for e in entry.entity}
        out.append((entity, {v.key: float(v.value) for v in entry.values}))
    return out
