"""Consumer-group reads: one group's or many groups' lag, members and protocol (DescribeGroups +
OffsetFetch + the log end offsets), and the listing of every group (ListGroups, broker by broker).

Why the group-coordinator requests go through kafka-python although librdkafka has them:
confluent-kafka 2.16 / librdkafka 2.16 crash the whole process when the group coordinator is not
ready (reproduced on a fresh cluster whose __consumer_offsets is still being created - the state
a coordinator is in after a failover, too): list_consumer_group_offsets -> SIGSEGV on the first
call; describe_consumer_groups(request_timeout=5) -> times out, and the next call aborts with
"rdkafka_queue.h:1086: rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0'
failed". A bot must not die on exactly the incident it is asked about. ListGroups goes through
kafka-python too, one request per broker. The one librdkafka group call left is
describe_consumer_groups for KIP-848 groups, which kafka-python cannot describe, and only after
their coordinator has answered. The log end offsets come from librdkafka's list_offsets
(partition leaders, not the coordinator).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, TopicPartition

from live import model
from live.gateway.confluent import earliest_offset, latest_offset
from live.gateway.convert import enum_name, snake
from live.gateway.errors import ClusterUnreachable, GatewayError, UnknownGroup
from live.gateway.kafkapython import COORDINATOR_RETRY_S, KP_COORDINATOR_RETRIABLE
from live.gateway.reads import ReadsMixin

log = logging.getLogger(__name__)

# One group found by _read_groups: its description, state, committed offsets, members and the
# partitions to report (committed or assigned).
_GroupFound = tuple[
    dict[str, Any], str, dict[tuple[str, int], "int | None"], list[model.GroupMember], list[tuple[str, int]]
]


class GroupsMixin(ReadsMixin):
    """Consumer-group reads; see the module docstring."""

    async def consumer_group_lag(self, group: str, read_committed: bool = False) -> model.GroupLag:
        """Committed offset, log end offset and lag per partition of ``group``
        (partitions with a commit plus partitions assigned to members).
        Committed offsets and members: kafka-python (OffsetFetch,
        DescribeGroups); log end offsets: confluent ``list_offsets``."""
        return (await self.consumer_group_read(group, read_committed)).lag

    async def consumer_group_read(self, group: str, read_committed: bool = False) -> model.GroupRead:
        """One read of ``group``: its lag (as :meth:`consumer_group_lag`) plus its
        members and protocol, stamped with the wall-clock time of the read so
        that two reads can be compared (lag growing, members coming and going)."""
        result = (await self._read_groups([group], read_committed))[group]
        if isinstance(result, GatewayError):
            raise result
        return result

    async def consumer_groups_read(
        self, groups: Iterable[str], read_committed: bool = False
    ) -> dict[str, model.GroupRead | GatewayError]:
        """:meth:`consumer_group_read` for many groups at once: DescribeGroups and
        OffsetFetch go once per coordinator for all its groups (kafka-python
        buckets them), the log end offsets of every partition in one
        list_offsets. A group-level error fails a batched OffsetFetch as a
        whole, so then the groups are read one by one and each keeps its own
        error (UnknownGroup, Timeout ...) as its value. ClusterUnreachable is raised."""
        groups = list(dict.fromkeys(groups))
        if not groups:
            return {}
        try:
            return await self._read_groups(groups, read_committed)
        except ClusterUnreachable:
            raise
        except GatewayError as exc:
            if len(groups) == 1:
                return {groups[0]: exc}
            log.debug("batched group read on %r failed (%s); reading one by one", self.name, exc)
        gate = asyncio.Semaphore(8)

        async def one(g: str) -> model.GroupRead | GatewayError:
            async with gate:
                try:
                    return (await self._read_groups([g], read_committed))[g]
                except ClusterUnreachable:
                    raise
                except GatewayError as e:
                    return e

        return dict(zip(groups, await asyncio.gather(*(one(g) for g in groups))))

    async def _read_groups(self, groups: list[str], read_committed: bool) -> dict[str, model.GroupRead | GatewayError]:
        self._check_open()
        what = repr(groups[0]) if len(groups) == 1 else f"of {len(groups)} groups"
        # kafka-python's answers, by group: its description / its committed offsets by partition
        desc_r: dict[str, Any] | BaseException
        offs_r: dict[str, Any] | BaseException
        desc_r, offs_r = await asyncio.gather(
            self._kp_coordinator_call(f"describe_groups {what}", "describe_groups", groups, 0, groups),
            self._kp_coordinator_call(
                f"list_group_offsets {what}", "list_group_offsets", groups, 0, {g: None for g in groups}
            ),
            return_exceptions=True,
        )
        if isinstance(desc_r, BaseException):
            raise desc_r
        if isinstance(offs_r, BaseException):
            raise offs_r
        read_at = time.time()
        found: dict[str, _GroupFound] = {}
        out: dict[str, model.GroupRead | GatewayError] = {}
        for group in groups:
            desc = desc_r.get(group) or {}
            if "not a classic group" in str(desc.get("error") or ""):
                desc = await self._describe_consumer_protocol_group(group)
            state = snake(desc.get("group_state") or "Dead")
            committed: dict[tuple[str, int], int | None] = {}
            for tp, om in (offs_r.get(group) or {}).items():
                committed[(tp.topic, tp.partition)] = om.offset if om.offset is not None and om.offset >= 0 else None
            members = [self._member(m) for m in desc.get("members") or []]
            assigned = {tp for m in members for tp in m.assigned}
            if state in ("DEAD", "UNKNOWN") and not committed and not assigned:
                out[group] = UnknownGroup(group, self.config.name)
                continue
            found[group] = (desc, state, committed, members, sorted(set(committed) | assigned))
        all_tps = sorted({tp for v in found.values() for tp in v[4]})
        (ends, errors), starts = await asyncio.gather(
            self._log_ends(all_tps, read_committed, f"list_offsets for group {what}"),
            self._log_starts(all_tps, f"list_offsets (earliest) for group {what}"),
        )
        for group, (desc, state, committed, members, tps) in found.items():
            parts = []
            for k in tps:
                c, e = committed.get(k), ends.get(k)
                lag = max(0, e - c) if c is not None and e is not None else None
                parts.append(model.PartitionLag(k[0], k[1], c, e, lag, errors.get(k), starts.get(k)))
            out[group] = model.GroupRead(
                lag=model.GroupLag(group, state, parts),
                members=sorted(members, key=lambda m: (m.client_id, m.member_id)),
                protocol_type=str(desc.get("protocol_type") or ""),
                protocol=str(desc.get("protocol_data") or ""),
                read_at=read_at,
            )
        return {g: out[g] for g in groups}

    async def _describe_consumer_protocol_group(self, group: str) -> dict[str, Any]:
        """A KIP-848 group (group.protocol=consumer) in the shape of kafka-python's
        DescribeGroups result. DescribeGroups answers such a group with
        GROUP_ID_NOT_FOUND "not a classic group", and kafka-python has no
        ConsumerGroupDescribe; librdkafka has. Its crash (top of this section)
        needs a coordinator that is not ready, and this one has just answered."""
        futs = self._rdkafka().describe_consumer_groups([group], request_timeout=self.timeout_s)
        d = await self._await(futs[group], f"describe_consumer_groups {group!r}")
        state = {"PREPARING_REBALANCING": "PREPARING_REBALANCE", "COMPLETING_REBALANCING": "COMPLETING_REBALANCE"}.get(
            enum_name(d.state), enum_name(d.state)
        )
        members: list[dict[str, Any]] = []
        for m in d.members or []:
            by_topic: dict[str, list[int]] = collections.defaultdict(list)
            for tp in getattr(m.assignment, "topic_partitions", None) or []:
                by_topic[tp.topic].append(tp.partition)
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "client_host": m.host,
                    "group_instance_id": m.group_instance_id,
                    "member_assignment": {
                        "assigned_partitions": [
                            {"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())
                        ]
                    },
                }
            )
        return {
            "group_state": state,
            "members": members,
            "protocol_type": "consumer",
            "protocol_data": d.partition_assignor or "",
        }

    @staticmethod
    def _member(m: dict[str, Any]) -> model.GroupMember:
        assigned: list[tuple[str, int]] = []
        assignment = m.get("member_assignment")
        # a non-consumer protocol (connect ...) leaves the assignment as undecoded bytes
        if isinstance(assignment, dict):
            for t in assignment.get("assigned_partitions") or []:
                assigned.extend((t["topic"], p) for p in t.get("partitions") or [])
        return model.GroupMember(
            member_id=str(m.get("member_id") or ""),
            client_id=str(m.get("client_id") or ""),
            host=str(m.get("client_host") or ""),
            group_instance_id=m.get("group_instance_id") or None,
            assigned=sorted(assigned),
        )

    async def _log_ends(
        self, tps: list[tuple[str, int]], read_committed: bool, what: str
    ) -> tuple[dict[tuple[str, int], int | None], dict[tuple[str, int], str]]:
        """Log end offsets (confluent ``list_offsets``: partition leaders, not the
        group coordinator) and, per partition, why one could not be read."""
        ends: dict[tuple[str, int], int | None] = {}
        errors: dict[tuple[str, int], str] = {}
        if not tps:
            return ends, errors
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        futs = self._rdkafka().list_offsets(
            {TopicPartition(t, p): latest_offset() for t, p in tps},
            isolation_level=level,
            request_timeout=self.timeout_s,
        )
        res = await self._await_all({(tp.topic, tp.partition): f for tp, f in futs.items()}, what)
        for k, r in res.items():
            if isinstance(r, KafkaError):
                ends[k] = None
                errors[k] = f"log end offset: {r.name()}: {r.str()}"
            elif r.offset is None or r.offset < 0:
                # librdkafka 2.16 can hand back offset -1001 (OFFSET_INVALID)
                # *without* an error for a partition whose leader is gone
                ends[k] = None
                errors[k] = f"log end offset unavailable (got {r.offset}); the partition may have no leader"
            else:
                ends[k] = r.offset
        return ends, errors

    async def _log_starts(self, tps: list[tuple[str, int]], what: str) -> dict[tuple[str, int], int]:
        """Log start offsets, where they could be read: a committed offset below one means retention
        deleted records the group never read. A partition that did not answer is left out (the lag
        figures stand without it; only the deleted-unread count needs it)."""
        if not tps:
            return {}
        futs = self._rdkafka().list_offsets(
            {TopicPartition(t, p): earliest_offset() for t, p in tps}, request_timeout=self.timeout_s
        )
        try:
            res = await self._await_all({(tp.topic, tp.partition): f for tp, f in futs.items()}, what)
        except GatewayError:
            return {}
        return {k: r.offset for k, r in res.items() if not isinstance(r, KafkaError) and (r.offset or 0) >= 0}

    async def list_consumer_groups(self, broker_ids: Iterable[int] | None = None) -> model.GroupListings:
        """Every group of the cluster (ListGroups). A broker answers ListGroups
        with the groups it coordinates, so every registered broker is asked, in
        parallel; a broker that fails (down, coordinator still loading after the
        retries) is reported in ``failed_brokers`` instead of failing the whole
        listing. kafka-python, like the other group-coordinator reads (see the
        comment at the top of this section). Raises the error when every
        broker failed."""
        self._check_open()
        ids = list(broker_ids) if broker_ids is not None else await self._live_broker_ids()

        async def one(bid: int) -> list[dict[str, Any]]:
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    listed: list[dict[str, Any]] = await self._kp_call(
                        f"list_groups on broker {bid}", "list_groups", broker_ids=[bid]
                    )
                    return listed
                except GatewayError as e:
                    # a coordinator still loading __consumer_offsets answers
                    # COORDINATOR_LOAD_IN_PROGRESS: ask again until the timeout
                    if e.code in KP_COORDINATOR_RETRIABLE and time.monotonic() + COORDINATOR_RETRY_S < deadline:
                        await asyncio.sleep(COORDINATOR_RETRY_S)
                        continue
                    raise

        results = await asyncio.gather(*(one(b) for b in ids), return_exceptions=True)
        groups: dict[str, model.GroupListing] = {}
        failed: dict[int, str] = {}
        errors: list[BaseException] = []
        for bid, r in zip(ids, results):
            if isinstance(r, BaseException):
                if not isinstance(r, GatewayError):
                    raise r
                errors.append(r)
                failed[bid] = str(r)
                continue
            for g in r:
                gid = str(g.get("group_id") or "")
                if not gid:
                    continue
                groups[gid] = model.GroupListing(
                    group_id=gid,
                    state=snake(g.get("group_state") or "Unknown"),
                    protocol_type=str(g.get("protocol_type") or ""),
                    coordinator=bid,
                    group_type=g.get("group_type") or None,
                )
        if ids and len(failed) == len(ids):
            raise errors[0]
        for bid, why in failed.items():
            log.warning("list_consumer_groups: broker %s of cluster %r failed: %s", bid, self.name, why)
        return model.GroupListings(sorted(groups.values(), key=lambda g: g.group_id), failed)
