"""One read of a cluster's metadata for "what changed?" (live/change_events.py).

Every part is read at once with its own failure: a part the bot may not read (ACLs without DESCRIBE
on the cluster) or that did not answer is None in the snapshot, so the diff makes no event of it,
instead of "every ACL removed". A broker's restart is seen by its JVM's start time, from its
exporter (``process_start_time_seconds``): KRaft's broker epoch is not in any admin API answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from live import exporters
from live.change_events import BrokerState, GroupState, MetadataSnapshot, Move, TopicState, sensitive_digest
from live.gateway import AdminGateway, GatewayError
from live.model import ConfigValue, TopicInfo

STARTED = exporters.PROCESS_STARTED
DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
EXPORTER_TIMEOUT_S = exporters.SCRAPE_TIMEOUT_S  # not interactive: the collector waits as long as a scrape

T = TypeVar("T")


async def _part(read: Callable[[], Awaitable[T]]) -> T | None:
    """A part of the snapshot, or None when it could not be read (refused, timed out)."""
    try:
        return await read()
    except GatewayError:
        return None


def _kept(cfg: ConfigValue) -> str:
    return sensitive_digest(cfg.value) if cfg.sensitive else (cfg.value or "")


def _non_default(configs: dict[str, ConfigValue]) -> dict[str, str]:
    return {k: _kept(v) for k, v in configs.items() if not v.is_default and v.source.startswith("DYNAMIC_TOPIC")}


async def read_metadata(
    gw: AdminGateway, quotas: Callable[[], Awaitable[dict[str, dict[str, float]]]] | None = None
) -> MetadataSnapshot:
    """The cluster's metadata now. ``quotas``: how to read the client quotas, instead of the
    gateway's DescribeClientQuotas."""
    at_ms = int(time.time() * 1000)
    cluster = await gw.describe_cluster()  # without the brokers there is nothing to compare: raise
    # every part at once, each with its own failure
    topics_t = asyncio.ensure_future(_part(lambda: gw.describe_topics(None)))
    quorum_t = asyncio.ensure_future(_part(gw.metadata_quorum))
    brokers_cfg_t = asyncio.ensure_future(_part(gw.broker_configs))
    acls_t = asyncio.ensure_future(_part(gw.describe_acls))
    moves_t = asyncio.ensure_future(_part(gw.reassignments))
    groups_t = asyncio.ensure_future(_part(lambda: _groups(gw)))
    quotas_t = asyncio.ensure_future(_part(quotas or (lambda: _client_quotas(gw))))
    started_t = asyncio.ensure_future(_started(gw))
    topics, quorum, brokers_cfg = await topics_t, await quorum_t, await brokers_cfg_t
    acls, moves, groups, quota_map, started = (
        await acls_t,
        await moves_t,
        await groups_t,
        await quotas_t,
        await started_t,
    )
    configs = await _part(lambda: gw.topic_configs([t.name for t in topics or []])) if topics else None
    brokers = {
        b.id: BrokerState(rack=b.rack, endpoint=f"{b.host}:{b.port}", started_ms=started.get(b.id))
        for b in cluster.brokers
    }
    snap = MetadataSnapshot(
        at_ms=at_ms,
        brokers=brokers,
        controller=quorum.leader_id if quorum else None,
        controller_epoch=quorum.leader_epoch if quorum else None,
        acls=None
        if acls is None
        else frozenset(
            f"{a.permission} {a.principal} {a.operation} {a.resource_type}:{a.resource_name} ({a.pattern}, host {a.host})"
            for a in acls
        ),
        quotas=quota_map,
        reassignments=None
        if moves is None
        else {(m.topic, m.partition): Move(tuple(m.adding), tuple(m.removing)) for m in moves},
        groups=groups,
    )
    if topics is not None:
        snap = _with_topics(snap, topics, configs)
    if brokers_cfg is not None:
        snap = _with_broker_configs(snap, brokers_cfg)
    return snap


async def _client_quotas(gw: AdminGateway) -> dict[str, dict[str, float]]:
    """Every client quota (DescribeClientQuotas), by entity: "client-id=slowapp" -> its limits."""
    return {q.entity_label: dict(q.values) for q in await gw.client_quotas()}


def _with_topics(
    snap: MetadataSnapshot, topics: list[TopicInfo], configs: dict[str, dict[str, ConfigValue]] | None
) -> MetadataSnapshot:
    states: dict[str, TopicState] = {}
    leaders: dict[tuple[str, int], int | None] = {}
    replicas: dict[tuple[str, int], tuple[int, ...]] = {}
    for t in topics:
        states[t.name] = TopicState(
            len(t.partitions), t.replication_factor, _non_default(configs.get(t.name, {})) if configs else {}
        )
        for p in t.partitions:
            leaders[(t.name, p.partition)] = p.leader
            replicas[(t.name, p.partition)] = tuple(p.replicas)
    return replace(snap, topics=states, leaders=leaders, replicas=replicas)


def _with_broker_configs(snap: MetadataSnapshot, per_broker: dict[int, dict[str, ConfigValue]]) -> MetadataSnapshot:
    out: dict[str, dict[str, str]] = {"cluster": {}}
    for bid, cfg in per_broker.items():
        out[str(bid)] = {k: _kept(v) for k, v in cfg.items() if v.source == DYNAMIC_BROKER}
        out["cluster"].update({k: _kept(v) for k, v in cfg.items() if v.source == DYNAMIC_DEFAULT})
    return replace(snap, broker_configs=out)


async def _groups(gw: AdminGateway) -> dict[str, GroupState]:
    listed = await gw.list_consumer_groups()
    if listed.failed_brokers:  # some coordinators did not answer: their groups would read as gone
        raise GatewayError(f"ListGroups not answered by {sorted(listed.failed_brokers)}", gw.name)
    names = [g.group_id for g in listed.groups if g.protocol_type in ("consumer", "")]
    reads = await gw.consumer_groups_read(names)
    out = {}
    for g in listed.groups:
        r = reads.get(g.group_id)
        if r is None or isinstance(r, GatewayError):
            continue
        members = frozenset(f"{m.client_id}@{m.host.lstrip('/')}" for m in r.members)
        out[g.group_id] = GroupState(g.state, members, r.protocol)
    return out


async def _started(gw: AdminGateway) -> dict[int, int]:
    """Each broker's JVM start (ms), from its exporter; brokers whose exporter did not answer are
    left out (no restart is made of a read that failed)."""
    urls = gw.config.metrics_urls
    if not urls:
        return {}
    reading = await exporters.read(urls, frozenset({STARTED}), EXPORTER_TIMEOUT_S)
    return {s.node: int(s.value * 1000) for s in reading.named(STARTED)}
