#!/usr/bin/env python3
"""CPU of one round of "what changed?"'s metadata diff (live/change_events.py) at scale.

    scripts/bench_changes.py [--partitions 30000] [--topics 3000] [--rounds 20]

Builds two snapshots of a cluster of ``--partitions`` partitions (RF 3 over 6 brokers, 3 non-default
configs a topic, 500 groups) in memory, where the second differs as an ordinary minute does (1 % of
the leaderships moved, one topic config changed, one group member joined), and times the diff with
the process's CPU clock. Target (issue 38): under 1 s of CPU a round at 30,000 partitions. The live
read that builds a snapshot is not counted here.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from live.change_events import BrokerState, GroupState, MetadataSnapshot, TopicState, diff  # noqa: E402

BROKERS = (101, 102, 103, 104, 105, 106)


def snapshot(partitions: int, topics: int, rng: random.Random) -> MetadataSnapshot:
    per = max(1, partitions // topics)
    leaders, replicas, tstates = {}, {}, {}
    for t in range(topics):
        name = f"topic-{t:05d}"
        tstates[name] = TopicState(
            per, 3, {"retention.ms": "604800000", "min.insync.replicas": "2", "cleanup.policy": "delete"}
        )
        for p in range(per):
            reps = tuple(rng.sample(BROKERS, 3))
            replicas[(name, p)] = reps
            leaders[(name, p)] = reps[0]
    groups = {
        f"group-{g}": GroupState("STABLE", frozenset(f"c{g}-{m}@h" for m in range(4)), "range", 1) for g in range(500)
    }
    return MetadataSnapshot(
        at_ms=0,
        brokers={b: BrokerState(endpoint=f"h:{b}", started_ms=1) for b in BROKERS},
        controller=1,
        topics=tstates,
        leaders=leaders,
        replicas=replicas,
        broker_configs={"cluster": {}},
        acls=frozenset(),
        quotas={},
        reassignments={},
        groups=groups,
    )


def next_minute(s: MetadataSnapshot, rng: random.Random) -> MetadataSnapshot:
    assert s.leaders is not None and s.replicas is not None and s.topics is not None and s.groups is not None
    leaders = dict(s.leaders)
    for tp in rng.sample(sorted(leaders), max(1, len(leaders) // 100)):
        leaders[tp] = rng.choice([b for b in s.replicas[tp] if b != leaders[tp]])
    topics = dict(s.topics)
    name = rng.choice(sorted(topics))
    topics[name] = replace(topics[name], configs={**topics[name].configs, "retention.ms": "60000"})
    groups = dict(s.groups)
    g = rng.choice(sorted(groups))
    groups[g] = replace(groups[g], members=groups[g].members | {"new@h"})
    return replace(s, at_ms=s.at_ms + 60_000, leaders=leaders, topics=topics, groups=groups)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=30_000)
    ap.add_argument("--topics", type=int, default=3_000)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(1)
    a = snapshot(args.partitions, args.topics, rng)
    pairs = []
    for _ in range(args.rounds):
        b = next_minute(a, rng)
        pairs.append((a, b))
        a = b
    cpu = []
    events = 0
    for before, after in pairs:
        t0 = time.process_time()
        events += len(diff(before, after))
        cpu.append(time.process_time() - t0)
    load = os.getloadavg()[0]
    print(
        f"diff of {args.partitions:,} partitions ({args.topics:,} topics, 500 groups), {args.rounds} rounds, load {load:.1f}: "
        f"CPU per round median {statistics.median(cpu) * 1000:.0f} ms, max {max(cpu) * 1000:.0f} ms; "
        f"{events / args.rounds:.1f} events a round; target < 1000 ms: {'met' if max(cpu) < 1 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
