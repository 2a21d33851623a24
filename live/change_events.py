"""What changed in a cluster between two reads of its metadata: the pure half of "what changed?".

Kafka keeps no history of its own metadata an operator can ask for, so the bot keeps one: the
collector reads a :class:`MetadataSnapshot` every interval and :func:`diff` turns two of them into
:class:`ChangeEvent` rows (only the differences are stored). The first snapshot of a process is a
baseline: it yields no events, since "everything was created just now" is not a change.

Sensitive config values never leave the snapshot: a snapshot holds a keyed digest of them (the key
lives only in the collecting process), so a change is seen and said ("changed"), never its value.
Many leaderships or replica sets moving in one interval (a broker lost, a rebalance) are one event
that says how many moved from where to where, not thousands of rows.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections import Counter
from dataclasses import dataclass, field, replace

# More partitions than this moving in one interval are one summary event per source broker.
SUMMARISE_OVER = 10
SENSITIVE = "(sensitive)"  # what an event says instead of a sensitive value

Partition = tuple[str, int]


@dataclass(frozen=True)
class BrokerState:
    rack: str | None = None
    endpoint: str = ""  # host:port
    started_ms: int | None = None  # the JVM's start (its exporter's process_start_time_seconds)
    epoch: int | None = None  # the broker's registration epoch, where the metadata gives it
    fenced: bool = False


@dataclass(frozen=True)
class TopicState:
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)  # non-default only; sensitive ones as digests


@dataclass(frozen=True)
class GroupState:
    state: str
    members: frozenset[str]  # client ids (with host): who is in the group, not the member ids
    protocol: str = ""  # the assignor
    generation: int | None = None


@dataclass(frozen=True)
class Move:
    """A reassignment in progress, as ListPartitionReassignments gives it."""

    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class MetadataSnapshot:
    """One read of the cluster's metadata. A part that could not be read is None (not empty):
    no event is made from what was not seen."""

    at_ms: int
    brokers: dict[int, BrokerState]
    controller: int | None = None
    controller_epoch: int | None = None
    topics: dict[str, TopicState] | None = None
    leaders: dict[Partition, int | None] | None = None
    replicas: dict[Partition, tuple[int, ...]] | None = None
    broker_configs: dict[str, dict[str, str]] | None = None  # "101" or "cluster" -> dynamic configs
    acls: frozenset[str] | None = None  # one string per binding
    quotas: dict[str, dict[str, float]] | None = None  # "client-id=slowapp" -> {producer_byte_rate: 1024}
    reassignments: dict[Partition, Move] | None = None
    groups: dict[str, GroupState] | None = None


@dataclass(frozen=True)
class ChangeEvent:
    at_ms: int
    kind: str  # broker, controller, topic, config, broker_config, acl, quota, leadership, replicas, reassignment, group
    resource: str  # "broker 102", "topic orders", "group billing", "client-id=slowapp" ...
    change: str  # what happened, in words: "restarted", "min.insync.replicas 2 -> 3" ...
    before: str | None = None
    after: str | None = None
    count: int = 1  # partitions a summary event stands for

    def to_row(self) -> dict[str, object]:
        return {
            "at_ms": self.at_ms,
            "kind": self.kind,
            "resource": self.resource,
            "change": self.change,
            "before": self.before,
            "after": self.after,
            "count": self.count,
        }


@dataclass(frozen=True)
class RecordedChange:
    """A change event as read back from the lake's change table (lake/changes.py), or one of the
    bot's own confirmed actions read from its audit log (kind "action"): when, in which cluster."""

    ts_ms: int
    cluster: str
    kind: str
    resource: str
    change: str
    before: str | None
    after: str | None
    count: int = 1


_DIGEST_KEY = os.urandom(32)  # per process: a digest is comparable within one collector's life only


def sensitive_digest(value: str | None) -> str:
    """What a snapshot keeps of a sensitive config's value: enough to see that it changed."""
    return "sha256:" + hmac.new(_DIGEST_KEY, (value or "").encode(), hashlib.sha256).hexdigest()[:16]


def _shown(key: str, value: str | None) -> str | None:
    return SENSITIVE if value is not None and value.startswith("sha256:") else value


def carry_forward(before: MetadataSnapshot | None, after: MetadataSnapshot) -> MetadataSnapshot:
    """``after`` with what it could not read this round taken from ``before``: a broker whose
    exporter was slow keeps its last known start time, so its restart is still seen next round
    (against the old time) instead of being lost between a read that failed and one that did not."""
    if before is None:
        return after
    brokers = {
        b: replace(s, started_ms=before.brokers[b].started_ms) if s.started_ms is None and b in before.brokers else s
        for b, s in after.brokers.items()
    }
    return replace(after, brokers=brokers)


def diff(before: MetadataSnapshot | None, after: MetadataSnapshot) -> list[ChangeEvent]:
    """The changes from ``before`` to ``after``; none when ``before`` is None (a baseline)."""
    if before is None:
        return []
    at = after.at_ms
    out: list[ChangeEvent] = []
    out += _brokers(before, after, at)
    if after.controller is not None and before.controller is not None and after.controller != before.controller:
        epochs = (
            f" (epoch {before.controller_epoch} -> {after.controller_epoch})"
            if after.controller_epoch is not None
            else ""
        )
        out.append(
            ChangeEvent(
                at,
                "controller",
                "controller",
                f"active controller {before.controller} -> {after.controller}{epochs}",
                str(before.controller),
                str(after.controller),
            )
        )
    if before.topics is not None and after.topics is not None:
        out += _topics(before.topics, after.topics, at)
    if before.leaders is not None and after.leaders is not None:
        out += _leaders(before.leaders, after.leaders, at)
    if before.replicas is not None and after.replicas is not None:
        out += _replicas(before.replicas, after.replicas, at)
    if before.broker_configs is not None and after.broker_configs is not None:
        for scope in sorted(set(before.broker_configs) | set(after.broker_configs)):
            resource = "cluster (all brokers)" if scope == "cluster" else f"broker {scope}"
            out += _configs(
                before.broker_configs.get(scope, {}), after.broker_configs.get(scope, {}), at, "broker_config", resource
            )
    if before.acls is not None and after.acls is not None:
        out += [
            ChangeEvent(at, "acl", binding, "ACL added", None, binding) for binding in sorted(after.acls - before.acls)
        ]
        out += [
            ChangeEvent(at, "acl", binding, "ACL removed", binding, None)
            for binding in sorted(before.acls - after.acls)
        ]
    if before.quotas is not None and after.quotas is not None:
        out += _quotas(before.quotas, after.quotas, at)
    if before.reassignments is not None and after.reassignments is not None:
        out += _reassignments(before, after, at)
    if before.groups is not None and after.groups is not None:
        out += _groups(before.groups, after.groups, at)
    return out


def _brokers(before: MetadataSnapshot, after: MetadataSnapshot, at: int) -> list[ChangeEvent]:
    out = []
    for b in sorted(set(before.brokers) | set(after.brokers)):
        old, new = before.brokers.get(b), after.brokers.get(b)
        res = f"broker {b}"
        if old is None and new is not None:
            out.append(ChangeEvent(at, "broker", res, "registered", None, new.endpoint))
            continue
        if new is None and old is not None:
            out.append(ChangeEvent(at, "broker", res, "left the cluster (no longer registered)", old.endpoint, None))
            continue
        assert old is not None and new is not None
        restarted = (
            old.started_ms is not None and new.started_ms is not None and new.started_ms != old.started_ms
        ) or (old.epoch is not None and new.epoch is not None and new.epoch != old.epoch)
        if restarted:
            out.append(
                ChangeEvent(
                    at, "broker", res, "restarted", _when(old.started_ms, old.epoch), _when(new.started_ms, new.epoch)
                )
            )
        if old.rack != new.rack:
            out.append(ChangeEvent(at, "broker", res, f"rack {old.rack} -> {new.rack}", old.rack, new.rack))
        if old.fenced != new.fenced:
            out.append(
                ChangeEvent(at, "broker", res, "fenced" if new.fenced else "unfenced", str(old.fenced), str(new.fenced))
            )
    return out


def _when(started_ms: int | None, epoch: int | None) -> str:
    return f"started at {started_ms} ms" if started_ms is not None else f"epoch {epoch}"


def _topics(before: dict[str, TopicState], after: dict[str, TopicState], at: int) -> list[ChangeEvent]:
    out = []
    for t in sorted(set(after) - set(before)):
        s = after[t]
        out.append(
            ChangeEvent(
                at, "topic", f"topic {t}", "created", None, f"{s.partitions} partitions, RF {s.replication_factor}"
            )
        )
    for t in sorted(set(before) - set(after)):
        s = before[t]
        out.append(
            ChangeEvent(
                at, "topic", f"topic {t}", "deleted", f"{s.partitions} partitions, RF {s.replication_factor}", None
            )
        )
    for t in sorted(set(before) & set(after)):
        old, new = before[t], after[t]
        res = f"topic {t}"
        if old.partitions != new.partitions:
            out.append(
                ChangeEvent(
                    at,
                    "topic",
                    res,
                    f"partitions {old.partitions} -> {new.partitions}",
                    str(old.partitions),
                    str(new.partitions),
                )
            )
        if old.replication_factor != new.replication_factor:
            out.append(
                ChangeEvent(
                    at,
                    "topic",
                    res,
                    f"replication factor {old.replication_factor} -> {new.replication_factor}",
                    str(old.replication_factor),
                    str(new.replication_factor),
                )
            )
        if old.configs != new.configs:
            out += _configs(old.configs, new.configs, at, "config", res)
    return out


def _configs(old: dict[str, str], new: dict[str, str], at: int, kind: str, resource: str) -> list[ChangeEvent]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        shown_a, shown_b = _shown(key, a), _shown(key, b)
        if a is None:
            change = f"{key} set to {shown_b}" if shown_b != SENSITIVE else f"{key} set (sensitive)"
        elif b is None:
            change = (
                f"{key} back to its default (was {shown_a})" if shown_a != SENSITIVE else f"{key} removed (sensitive)"
            )
        elif SENSITIVE in (shown_a, shown_b):
            change = f"{key} changed (sensitive: value not kept)"
        else:
            change = f"{key} {a} -> {b}"
        out.append(ChangeEvent(at, kind, resource, change, shown_a, shown_b))
    return out


def _moved(
    kind: str, noun: str, changed: list[tuple[Partition, str, str]], sources: Counter[str], at: int
) -> list[ChangeEvent]:
    """Per-partition events, or one summary per source when many moved at once."""
    if len(changed) <= SUMMARISE_OVER:
        return [ChangeEvent(at, kind, f"{t}-{p}", f"{noun} {a} -> {b}", a, b) for (t, p), a, b in changed]
    out = []
    for source, n in sorted(sources.items(), key=lambda kv: (-kv[1], kv[0])):
        targets = sorted({b for (_tp, a, b) in changed if a == source})
        out.append(
            ChangeEvent(
                at,
                kind,
                f"{n:,} partitions",
                f"{n:,} {noun}s moved from {source} to {'/'.join(targets)}",
                source,
                "/".join(targets),
                count=n,
            )
        )
    return out


def _leaders(before: dict[Partition, int | None], after: dict[Partition, int | None], at: int) -> list[ChangeEvent]:
    changed = [
        (tp, _broker(before[tp]), _broker(after[tp]))
        for tp in sorted(before.keys() & after.keys())
        if before[tp] != after[tp]
    ]
    return _moved("leadership", "leadership", changed, Counter(a for _tp, a, _b in changed), at)


def _broker(b: int | None) -> str:
    return "none" if b is None else str(b)


def _replicas(
    before: dict[Partition, tuple[int, ...]], after: dict[Partition, tuple[int, ...]], at: int
) -> list[ChangeEvent]:
    changed = [
        (tp, ",".join(map(str, before[tp])), ",".join(map(str, after[tp])))
        for tp in sorted(before.keys() & after.keys())
        if set(before[tp]) != set(after[tp])
    ]
    return _moved("replicas", "replica set", changed, Counter(a for _tp, a, _b in changed), at)


def _quota_text(value: float | None) -> str | None:
    """A quota as kafka-configs shows it: 1048576, not 1.04858e+06 (a rate in bytes is whole)."""
    if value is None:
        return None
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _quotas(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], at: int) -> list[ChangeEvent]:
    out = []
    for entity in sorted(set(before) | set(after)):
        old, new = before.get(entity, {}), after.get(entity, {})
        for key in sorted(set(old) | set(new)):
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            sa, sb = _quota_text(a), _quota_text(b)
            change = (
                f"quota {key} set to {sb}"
                if a is None
                else f"quota {key} removed (was {sa})"
                if b is None
                else f"quota {key} {sa} -> {sb}"
            )
            out.append(ChangeEvent(at, "quota", entity, change, sa, sb))
    return out


def _reassignments(before: MetadataSnapshot, after: MetadataSnapshot, at: int) -> list[ChangeEvent]:
    assert before.reassignments is not None and after.reassignments is not None
    out = []
    for tp in sorted(after.reassignments.keys() - before.reassignments.keys()):
        m = after.reassignments[tp]
        out.append(
            ChangeEvent(
                at,
                "reassignment",
                f"{tp[0]}-{tp[1]}",
                f"reassignment started: adding {_ids(m.adding)}, removing {_ids(m.removing)}",
                None,
                f"+{_ids(m.adding)} -{_ids(m.removing)}",
            )
        )
    for tp in sorted(before.reassignments.keys() - after.reassignments.keys()):
        m = before.reassignments[tp]
        now = set((after.replicas or {}).get(tp, ()))
        if not now:
            ended = "ended"
        elif set(m.adding) <= now and not (set(m.removing) & now):
            ended = "finished"
        else:
            ended = "cancelled (the replicas went back)"
        out.append(
            ChangeEvent(
                at,
                "reassignment",
                f"{tp[0]}-{tp[1]}",
                f"reassignment {ended}",
                f"+{_ids(m.adding)} -{_ids(m.removing)}",
                None,
            )
        )
    return out


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "none"


def _groups(before: dict[str, GroupState], after: dict[str, GroupState], at: int) -> list[ChangeEvent]:
    out = []
    for g in sorted(set(after) - set(before)):
        out.append(
            ChangeEvent(at, "group", f"group {g}", f"appeared ({len(after[g].members)} members)", None, after[g].state)
        )
    for g in sorted(set(before) - set(after)):
        out.append(ChangeEvent(at, "group", f"group {g}", "gone (deleted or expired)", before[g].state, None))
    for g in sorted(set(before) & set(after)):
        old, new = before[g], after[g]
        res = f"group {g}"
        joined, left = sorted(new.members - old.members), sorted(old.members - new.members)
        if joined:
            out.append(
                ChangeEvent(
                    at,
                    "group",
                    res,
                    f"{len(joined)} member(s) joined: {', '.join(joined[:5])}",
                    None,
                    ", ".join(joined),
                )
            )
        if left:
            out.append(
                ChangeEvent(
                    at, "group", res, f"{len(left)} member(s) left: {', '.join(left[:5])}", ", ".join(left), None
                )
            )
        if old.protocol != new.protocol and old.protocol and new.protocol:
            out.append(
                ChangeEvent(at, "group", res, f"assignor {old.protocol} -> {new.protocol}", old.protocol, new.protocol)
            )
        if (
            old.generation is not None
            and new.generation is not None
            and new.generation != old.generation
            and not (joined or left)
        ):
            out.append(
                ChangeEvent(
                    at,
                    "group",
                    res,
                    f"rebalanced (generation {old.generation} -> {new.generation})",
                    str(old.generation),
                    str(new.generation),
                )
            )
    return out
