"""A reassignment in flight and its replication throttle: how far each move got, which brokers hold
a throttle, and the answer when out-of-ISR replicas are only being moved."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from diagnosis.findings import ExpectedCause
from diagnosis.live_common import LOG_DIRS_BUDGET_S
from diagnosis.rules import (
    PartitionState,
)
from diagnosis.snapshot import broker_list
from framework.partial import note_missing
from framework.reply import Action, Evidence, Step
from live.gateway import AdminGateway, GatewayError, NotAuthorized
from live.model import ConfigValue, LogDir

THROTTLE_KEYS = ("follower.replication.throttled.rate", "leader.replication.throttled.rate")


async def throttle_evidence(gw: AdminGateway, brokers: list[int], notes: list[str]) -> list[Evidence]:
    """A follower that is up but out of ISR is often throttled on purpose (a reassignment's
    replication quota): show the brokers' throttle rates, since lifting one is the fix."""
    try:
        configs = await gw.broker_configs()
    except NotAuthorized as exc:
        note_missing("the brokers' replication throttles", exc)
        return []
    except GatewayError as exc:
        notes.append(f"Replication throttles not read ({exc}).")
        return []
    return throttle_lines(configs)


def throttle_lines(configs: dict[int, dict[str, ConfigValue]]) -> list[Evidence]:
    """Pure: a line per replication throttle setting, naming the brokers that have it (a throttle
    is usually set alike on every broker: one line, not one per broker)."""
    by_value: dict[str, list[int]] = {}
    for b, cfg in sorted(configs.items()):
        set_ = {
            k: v
            for k, v in ((k, cfg[k].value) for k in THROTTLE_KEYS if k in cfg)
            if v is not None and v not in ("", UNSET_RATE)
        }
        if set_:
            text = ", ".join(f"{k}={int(v):,} B/s" if v.isdigit() else f"{k}={v}" for k, v in set_.items())
            by_value.setdefault(text, []).append(b)
    return [
        Evidence(f"Broker {broker_list(bs)} replication throttle", text, "live: broker configs", "bad")
        for text, bs in by_value.items()
    ]


UNSET_RATE = "9223372036854775807"  # Long.MAX_VALUE: the broker's "no throttle"
REPLICA_LIST_KEYS = {
    "leader": "leader.replication.throttled.replicas",
    "follower": "follower.replication.throttled.replicas",
}


def _size(n: int) -> str:
    for size, unit in ((10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,} B"


def _rate(cfg: dict[str, ConfigValue], key: str) -> int | None:
    v = cfg.get(key)
    value = v.value if v is not None else None
    return int(value) if value and value.isdigit() and value != UNSET_RATE else None


def _lists(cfg: dict[str, ConfigValue], side: str, partition: int, broker: int) -> bool:
    """Whether a topic's leader/follower.replication.throttled.replicas names this replica ('*': all)."""
    v = cfg.get(REPLICA_LIST_KEYS[side])
    entries = {e.strip() for e in (v.value or "").split(",")} if v is not None else set()
    return "*" in entries or f"{partition}:{broker}" in entries


@dataclass(frozen=True)
class MoveProgress:
    """One partition a reassignment is moving: how much of the leader's log each new replica holds
    (DescribeLogDirs sizes, None when not read), and the throttles that apply to its copy."""

    part: PartitionState
    leader_bytes: int | None
    new_bytes: dict[int, int | None]
    throttles: tuple[tuple[int, str, int], ...]  # (broker, config key, bytes/s) holding this copy back

    def to_copy(self) -> int | None:
        if self.leader_bytes is None or any(v is None for v in self.new_bytes.values()):
            return None
        return sum(max(0, self.leader_bytes - (v or 0)) for v in self.new_bytes.values())

    def describe(self) -> str:
        p = self.part
        text = f"replicas {broker_list(p.replicas)}: adding {broker_list(p.adding)}"
        if p.removing:
            text += f", removing {broker_list(p.removing)}"
        if self.leader_bytes is not None:
            text += f"; leader {p.leader} holds {_size(self.leader_bytes)}"
            copied = [f"new replica {b} has {_size(v)}" for b, v in sorted(self.new_bytes.items()) if v is not None]
            if copied:
                text += ", " + ", ".join(copied)
            left = self.to_copy()
            if left is not None:
                text += f" ({_size(left)} still to copy)"
        return text


def move_progress(
    moving: list[PartitionState],
    dirs: list[LogDir] | None,
    broker_cfgs: dict[int, dict[str, ConfigValue]] | None,
    topic_cfgs: dict[str, dict[str, ConfigValue]] | None,
) -> list[MoveProgress]:
    """Pure: partitions under reassignment, the log dirs of their leaders and new replicas, and the
    brokers' and topics' configs -> each move's progress and the throttles that hold it back. A
    throttle holds a copy back where the rate is set on the broker and the topic lists the replica:
    the leader's leader.replication.throttled.rate for its own replica, the new replica's
    follower.replication.throttled.rate for the new one (Kafka throttles a follower only while it
    is out of the ISR, which a replica being added is)."""
    sizes: dict[tuple[str, int, int], int] = {}
    for d in dirs or []:
        for lp in d.partitions:
            if not lp.is_future:
                sizes[(lp.topic, lp.partition, d.broker)] = sizes.get((lp.topic, lp.partition, d.broker), 0) + lp.size
    out = []
    for p in moving:
        new = [b for b in p.adding if b not in p.isr]
        held: list[tuple[int, str, int]] = []
        tcfg = (topic_cfgs or {}).get(p.topic, {})
        if broker_cfgs is not None and p.leader is not None:
            rate = _rate(broker_cfgs.get(p.leader, {}), THROTTLE_KEYS[1])
            if rate is not None and _lists(tcfg, "leader", p.partition, p.leader):
                held.append((p.leader, THROTTLE_KEYS[1], rate))
            for b in new:
                rate = _rate(broker_cfgs.get(b, {}), THROTTLE_KEYS[0])
                if rate is not None and _lists(tcfg, "follower", p.partition, b):
                    held.append((b, THROTTLE_KEYS[0], rate))
        out.append(
            MoveProgress(
                p,
                sizes.get((p.topic, p.partition, p.leader)) if dirs is not None and p.leader is not None else None,
                {b: sizes.get((p.topic, p.partition, b), 0) if dirs is not None else None for b in new},
                tuple(held),
            )
        )
    return out


def _throttle_text(held: list[tuple[int, str, int]]) -> str:
    """'leader rate 1,000 B/s on broker 101, follower rate 1,000 B/s on broker 103'."""
    return ", ".join(f"{k.split('.')[0]} rate {r:,} B/s on broker {b}" for b, k, r in sorted(set(held)))


async def reassignment_answer(
    gw: AdminGateway, moving: list[PartitionState], urp_count: int, notes: list[str]
) -> tuple[list[Evidence], str, ExpectedCause, list[Action]]:
    """Every replica out of sync is one a reassignment is adding: how far each copy is (the leader's
    and the new replica's log sizes), and the replication throttle that holds it back, with what to
    change. Nothing here is a fault, so no failure mode's steps apply."""
    brokers = sorted({p.leader for p in moving if p.leader is not None} | {b for p in moving for b in p.adding})
    topics = sorted({p.topic for p in moving})
    dirs_r, bcfg_r, tcfg_r = await asyncio.gather(
        asyncio.wait_for(gw.log_dirs(brokers), 2 * LOG_DIRS_BUDGET_S),
        gw.broker_configs(),
        gw.topic_configs(topics),
        return_exceptions=True,
    )
    for what, res in (
        ("the moving replicas' log sizes", dirs_r),
        ("the brokers' replication throttles", bcfg_r),
        ("the topics' throttled replicas", tcfg_r),
    ):
        if isinstance(res, NotAuthorized):
            note_missing(what, res)
        elif isinstance(res, asyncio.TimeoutError):
            notes.append(f"{what[0].upper()}{what[1:]} not read: no answer within {2 * LOG_DIRS_BUDGET_S:g} s.")
        elif isinstance(res, BaseException):
            notes.append(f"{what[0].upper()}{what[1:]} not read ({res}).")
    dirs = dirs_r if isinstance(dirs_r, list) else None
    bcfg = bcfg_r if isinstance(bcfg_r, dict) else None
    tcfg = tcfg_r if isinstance(tcfg_r, dict) else None
    progress = move_progress(moving, dirs, bcfg, tcfg)
    evidence = [
        Evidence(
            f"Reassignment of {m.part.topic}-{m.part.partition}",
            m.describe(),
            "live: list_partition_reassignments + describe_log_dirs",
            "neutral",
        )
        for m in progress[:4]
    ]
    if len(progress) > 4:
        evidence.append(Evidence("More partitions being moved", f"{len(progress) - 4:,}", "live", "neutral"))
    evidence += throttle_lines(bcfg or {})
    for t in topics:
        lists = {k: v.value for k in REPLICA_LIST_KEYS.values() if (v := (tcfg or {}).get(t, {}).get(k)) and v.value}
        if lists:
            evidence.append(
                Evidence(
                    f"Topic {t} throttled replicas",
                    "; ".join(f"{k}={v}" for k, v in lists.items()),
                    "live: topic configs",
                    "bad",
                )
            )
    held = sorted({h for m in progress for h in m.throttles})
    first = progress[0]
    p = first.part
    verdict = (
        f"{urp_count:,} partitions are under-replicated by a reassignment in progress; that is expected while it "
        f"copies: {p.topic}-{p.partition} is adding broker {broker_list(p.adding)}"
        + (f" and removing {broker_list(p.removing)}" if p.removing else "")
    )
    left = first.to_copy()
    if left is not None and first.leader_bytes:
        done = max(0.0, min(1.0, 1 - left / (first.leader_bytes * max(1, len(first.new_bytes)))))
        verdict += f", {done:.0%} copied ({_size(left)} to go)"
    verdict += "."
    if held:
        verdict += (
            f" A replication throttle holds it back ({_throttle_text(held)}): raise it to finish sooner "
            "(`throttle set <rate>`), or remove it (`throttle clear`) once client traffic no longer needs the headroom."
        )
    elif bcfg is not None:
        verdict += " No replication throttle applies to it: it copies as fast as the disks and the network allow."
    steps = [
        Step(
            "Let it finish: nothing failed; each new replica joins the ISR once it has copied the leader's log, "
            "and the replicas being removed are dropped then. Follow it until no partition lists adding replicas.",
            command="kafka-reassign-partitions.sh --bootstrap-server <broker:9092> --list",
        )
    ]
    if held:
        steps.append(
            Step(
                "Raise or remove the replication throttle that holds it back: `throttle set <rate>` or "
                "`throttle clear`, each previewed, then confirmed. "
                f"Now: {_throttle_text(held)}; the same by hand, per broker:",
                command="kafka-configs.sh --bootstrap-server <broker:9092> --alter --entity-type brokers --entity-name "
                f"<id> --add-config {','.join(sorted({f'{k}=50000000' for _, k, _ in held}))}",
            )
        )
    else:
        steps.append(
            Step(
                "If the copy competes with client traffic, throttle it (`throttle set <rate>`, previewed, then "
                "confirmed); no replication throttle applies to it now."
            )
        )
    steps.append(
        Step(
            "Only if the move must stop: cancel it. The partitions keep their original replicas and the new "
            "brokers' partial copies are deleted.",
            command="kafka-reassign-partitions.sh --bootstrap-server <broker:9092> --reassignment-json-file move.json --cancel",
        )
    )
    expected = ExpectedCause(
        topic="reassignment",
        title="Reassignment in progress",
        reason=f"live: {len(progress):,} partition(s) have replicas being added by a reassignment, and no other replica is out of sync",
        steps=steps,
        do_not=[
            "Follow the broker-loss steps or start another reassignment of these partitions: nothing is down, and "
            "a new reassignment of a moving partition replaces the one running.",
            "Restart the new replica's broker or raise replica.lag.time.max.ms to clear the URP: neither makes the "
            "copy faster; the new replica enters the ISR as soon as it has caught up.",
        ],
    )
    actions = (
        [
            Action("Raise the replication throttle", "throttle set 50MB/s", mutating=True),
            Action("Clear the replication throttle", "throttle clear", mutating=True),
        ]
        if held
        else []
    )
    return evidence, verdict, expected, actions
