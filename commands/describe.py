"""describe <topic>: partitions, leaders, replicas, ISR and the configs that matter in an incident."""

from __future__ import annotations

from collections.abc import Iterable

from diagnosis.rules import categories
from diagnosis.snapshot import config_value, snapshot
from framework.context import Context
from framework.gateways import gateway
from framework.reply import Cell, Evidence, Reply, Table
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("describe",),
    summary="One topic: partitions with leader, replicas, ISR and category, plus its durability and retention configs.",
    params=(Param("topic", "the topic name", kind="topic"),),
    examples=("describe orders",),
)

INCIDENT_CONFIGS = (
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "retention.ms",
    "retention.bytes",
    "cleanup.policy",
    "segment.bytes",
    "max.message.bytes",
    "message.timestamp.type",
)


async def run(request: CommandRequest, ctx: Context) -> Reply:
    gw = await gateway(ctx, request.cluster)
    topic = str(request.args["topic"])
    snap = await snapshot(gw, topics=[topic], min_isr="all")  # reads this topic's configs too
    configs = snap.configs.get(topic, {})
    rows: list[list[Cell]] = []
    bad = 0
    for p in sorted(snap.states, key=lambda p: p.partition):
        cats = categories(p)
        bad += cats != ["InSync"]
        preferred = None if not p.has_leader or p.leader == p.replicas[0] else p.replicas[0]
        rows.append(
            [p.partition, p.leader if p.has_leader else None, preferred, _ids(p.replicas), _ids(p.isr), "/".join(cats)]
        )
    rf = max((len(p.replicas) for p in snap.states), default=0)
    cfg_rows: list[list[Cell]] = [
        [k, config_value(configs, k, "?"), bool(configs.get(k) and configs[k].is_default)]
        for k in INCIDENT_CONFIGS
        if k in configs
    ]
    evidence = [
        Evidence(
            "Partitions", f"{len(rows)} (RF {rf}); {bad} not fully in sync", "live: metadata", "bad" if bad else "ok"
        )
    ]
    return Reply(
        title=f"Topic {topic}",
        severity="warning" if bad else "ok",
        verdict=f"{topic}: {len(rows)} partitions, RF {rf}, {bad} out of sync.",
        evidence=evidence,
        tables=[
            Table(
                "Partitions",
                ["partition", "leader", "preferred leader (if not leading)", "replicas", "ISR", "state"],
                rows,
            )
        ]
        + ([Table("Configs", ["config", "value", "default"], cfg_rows)] if cfg_rows else []),
    )


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


COMMAND = Command(SPEC, run)
