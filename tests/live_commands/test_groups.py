"""Consumer groups diagnosed right (issue 8, defects 4 and 6).

The ranking of causes is a pure function, tested on hand-made evidence; then the real cluster:
a stopped group (EMPTY, producer still writing) must rank "consumers stopped" first, a storming
group (separate processes joining and leaving, localkafka/groups.py) must rank the rebalance storm
first, `lag` without a group and the digest must list both, and a killed coordinator must give an
answer or a clean error, never a dead process. Questions go through the real dispatch path."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from commandkit import cluster_env as _env
from commandkit import unique_name as _name
from waiting import wait_until

from bot.render import render_json
from commands.registry import answer
from diagnosis.groups import GroupFacts, LagSignals, facts_from_reads, rank, signals_from_kb, watch_group
from framework.context import Context
from live.model import GroupLag, GroupMember, GroupRead, PartitionLag
from runbook_kb import default_kb

ROOT = Path(__file__).resolve().parents[2]


def facts(states, members, lags, moved=False, seconds=2.0, **kw) -> GroupFacts:
    return GroupFacts(
        group=kw.pop("group", "g10"),
        states=tuple(states),
        members=tuple(None if m is None else frozenset(m) for m in members),
        lags=tuple(lags),
        committed_moved=moved,
        seconds=seconds,
        now=kw.pop("now", 1_000_000.0),
        **kw,
    )


# ---- the pure ranking -------------------------------------------------------------------------------


def test_signals_come_from_the_kb():
    kb = default_kb()
    alerts = {a.metric: a for a in kb.reference["signals"].alerts}
    sig = signals_from_kb(kb)
    assert sig.lag_severity == alerts["records-lag-max"].severity
    assert sig.lag_entries == tuple(alerts["records-lag-max"].runbook)
    assert sig.rebalance_severity == alerts["rebalance-rate-per-hour"].severity
    assert all(e in kb.failure_modes for e in sig.lag_entries + sig.rebalance_entries)


def test_empty_group_with_growing_lag_is_stopped_not_a_storm():
    sig = LagSignals(lag_severity="warning")
    r = rank(
        facts(["EMPTY"] * 5, [()] * 5, [2400, 2410, 2420, 2430, 2438], group="g10", lake_last_commit=1_000_000.0 - 600),
        sig,
    )
    assert r.status == "STOP"
    assert [c.key for c in r.causes] == ["consumers-stopped", "rebalance-storm"]
    assert r.causes[0].entry_id is None and not r.causes[0].considered
    storm = r.causes[1]
    assert storm.considered and "no members" in storm.reason
    assert r.verdict.startswith("Group g10 has no members and is 2,438 records behind, growing (+38 in 2.0 s)")
    assert "Burrow: STOP" in r.verdict
    assert "10 min ago" in r.verdict  # since when nothing was committed, from the lake
    assert r.severity == "warning" and r.lag == 2438 and r.change == 38


def test_stopped_without_the_lake_says_what_it_does_not_know():
    r = rank(facts(["EMPTY"] * 3, [()] * 3, [50, 50, 50]))
    assert r.status == "STOP" and r.severity == "warning"
    assert "no commit during the 2.0 s watched" in r.verdict and "needs the metric lake" in r.verdict


def test_rebalancing_state_ranks_the_storm_first():
    r = rank(
        facts(
            ["STABLE", "PREPARING_REBALANCE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "STABLE"],
            [{"a", "b"}] * 5,
            [500, 520, 540, 560, 580],
        ),
        LagSignals(rebalance_severity="warning"),
    )
    assert r.status == "REBALANCING" and r.severity == "warning"
    assert r.causes[0].key == "rebalance-storm" and not r.causes[0].considered
    assert "COMPLETING_REBALANCE/PREPARING_REBALANCE in 3 of 5 read(s)" in r.causes[0].reason
    assert r.verdict.startswith("Group g10 is rebalancing again and again (state ")
    assert all(c.considered for c in r.causes[1:])


def test_members_churning_between_reads_is_a_storm_even_when_each_read_says_stable():
    r = rank(facts(["STABLE"] * 4, [{"a", "b"}, {"a", "c"}, {"c", "d"}, {"d", "e"}], [900, 905, 903, 910]))
    assert r.causes[0].key == "rebalance-storm"
    assert "5 different member ids" in r.causes[0].reason


def test_even_an_empty_read_in_a_churning_group_is_a_storm():
    r = rank(facts(["STABLE", "EMPTY", "STABLE"], [{"a"}, (), {"b"}], [10, 12, 14]))
    assert r.status == "REBALANCING"


def test_stable_members_with_growing_lag_are_slow_consumers():
    sig = signals_from_kb(default_kb())
    r = rank(
        facts(
            ["STABLE"] * 5,
            [{"a", "b"}] * 5,
            [100, 150, 200, 250, 300],
            moved=True,
            partitions=4,
            lagging_partitions=4,
            worst_partition="t-0",
            worst_share=0.3,
        ),
        sig,
    )
    assert r.status == "WARN" and r.severity == sig.lag_severity
    assert r.causes[0].key == "consumers-slower-than-producers"
    storm = next(c for c in r.causes if c.key == "rebalance-storm")
    assert storm.considered and "no rebalance seen" in storm.reason


def test_lag_on_one_partition_ranks_the_hot_partition_first():
    sig = signals_from_kb(default_kb())
    r = rank(
        facts(
            ["STABLE"] * 5,
            [{"a"}] * 5,
            [100, 150, 200, 250, 300],
            moved=True,
            partitions=6,
            lagging_partitions=1,
            worst_partition="orders-3",
            worst_share=0.95,
        ),
        sig,
    )
    assert [c.key for c in r.causes][:2] == ["hot-partition", "consumers-slower-than-producers"]
    assert "95% of the lag is on orders-3" in r.causes[0].reason


def test_a_small_skewed_lag_that_keeps_up_does_not_lead_with_redesigning_the_key():
    """A consumer 84 records behind and keeping up, its lag on one partition (a hot key upstream):
    the skew is shown, but nothing is ranked to act on and no "Do now" comes from it."""
    sig = signals_from_kb(default_kb())
    r = rank(
        facts(
            ["STABLE"] * 5,
            [{"a"}] * 5,
            [90, 84, 88, 80, 84],
            moved=True,
            partitions=6,
            lagging_partitions=1,
            worst_partition="billing-2",
            worst_share=0.9,
        ),
        sig,
    )
    assert (r.status, r.severity) == ("BEHIND", "info")
    assert [c.key for c in r.causes if not c.considered] == []
    hot = next(c for c in r.causes if c.key == "hot-partition")
    assert hot.considered and "90% of the lag is on billing-2" in hot.reason and "not growing" in hot.reason


def test_caught_up_is_ok():
    r = rank(facts(["STABLE"] * 5, [{"a"}] * 5, [0] * 5, moved=True))
    assert (r.status, r.severity, r.causes) == ("OK", "ok", ())


def test_behind_but_not_growing_is_info():
    r = rank(facts(["STABLE"] * 5, [{"a"}] * 5, [300, 280, 250, 240, 200], moved=True))
    assert r.status == "BEHIND" and r.severity == "info" and "not growing (-100 in 2.0 s)" in r.verdict


class _ScriptedGroup:
    """A gateway whose group reads follow a script of (state, member ids, lag); it counts the reads."""

    def __init__(self, script):
        self.script, self.reads = script, 0

    async def consumer_group_read(self, group, read_committed=False):
        state, ids, lag = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        members = [GroupMember(i, "c", "/h") for i in ids]
        return GroupRead(GroupLag(group, state, [PartitionLag("t", 0, 0, lag, lag)]), members, "consumer", "range", 0.0)


def test_a_steady_group_with_growing_lag_is_watched_longer_and_a_late_rebalance_is_seen():
    """Two quiet seconds do not rule out a storm whose rebalances come a few seconds apart (a CI run
    read a storming group STABLE with the same ids for 2.1 s and named the consumers' pace)."""
    steady = [("STABLE", {"a"}, 100 + 10 * i) for i in range(7)]
    gw = _ScriptedGroup([*steady, ("STABLE", {"b"}, 180)])
    reads = asyncio.run(watch_group(gw, "g", reads=5, gap_s=0.001, steady_watch_s=10))
    assert len(reads) == 8  # went on past five, stopped at the first new member id
    assert rank(facts_from_reads("g", reads)).status == "REBALANCING"

    gw = _ScriptedGroup([("STABLE", {"a"}, 100 + 10 * i) for i in range(100)])
    started = time.monotonic()
    reads = asyncio.run(watch_group(gw, "g", reads=5, gap_s=0.02, steady_watch_s=0.3))
    assert 0.28 <= time.monotonic() - started < 2 and 5 < len(reads) <= 16  # bounded by the longer watch
    assert rank(facts_from_reads("g", reads)).status == "WARN"

    # lag not growing, or a rebalance already seen: five reads are enough
    for script in ([("STABLE", {"a"}, 100)], [("PREPARING_REBALANCE", {"a"}, 100 + i) for i in range(9)]):
        gw = _ScriptedGroup(script)
        assert len(asyncio.run(watch_group(gw, "g", reads=5, gap_s=0.001, steady_watch_s=10))) == 5


# ---- the real cluster ----------------------------------------------------------------------------------


def _outside_admin(cluster):
    """A client of the test's own (kafka-python), to watch the fault from outside the bot."""
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)


@pytest.fixture
def groups(kafka_cluster):
    """A stopped group (EMPTY, lag growing) and a storming group (member processes joining and
    leaving), both running for the test."""
    from localkafka.groups import rebalance_storm, stopped_group

    stopped_name, storm_name = _name("stopped"), _name("storm")
    stopped = stopped_group(kafka_cluster, stopped_name, _name("stopped-t"), initial=50, rate=20)
    storm = rebalance_storm(kafka_cluster, storm_name, _name("storm-t"), members=3, records=2000, rate=20)
    admin = _outside_admin(kafka_cluster)
    try:
        wait_until(
            lambda: sum(stopped.lag().values()) > 20,
            60,
            f"{stopped_name} to fall behind",
            interval=0.3,
            ignore=(Exception,),
        )

        def storming():
            # members in the group, and a commit made (lag is measured from committed offsets)
            d = admin.describe_groups([storm_name])[storm_name]
            return d.get("members") and admin.list_group_offsets({storm_name: None}).get(storm_name)

        wait_until(storming, 90, f"members and a commit in {storm_name}", interval=0.3, ignore=(Exception,))
        yield {"stopped": stopped_name, "storm": storm_name, "storm_fault": storm, "stopped_fault": stopped}
    finally:
        storm.stop()
        stopped.stop()
        admin.close()


@pytest.mark.kafka
async def test_stopped_and_storming_groups_rank_their_own_cause_first(ctx, groups):
    # the stopped group: EMPTY with lag growing -> consumers stopped, Burrow STOP; the storm only considered
    asked = time.monotonic()
    result = await answer(f"lag {groups['stopped']}", ctx)
    stopped_s = time.monotonic() - asked
    assert result.outcome == "answered", result.reply.verdict
    data = json.loads(render_json(result.reply))
    lag = data["lag"]
    assert lag["status"] == "STOP" and lag["state"] == "EMPTY" and lag["members"] == 0
    assert isinstance(lag["total_lag"], int) and lag["total_lag"] > 0
    assert [c["key"] for c in lag["causes"]] == ["consumers-stopped", "rebalance-storm"]
    assert [c["considered"] for c in lag["causes"]] == [False, True]
    assert not any(d["entry_id"] == "rebalance-storm" for d in data["diagnoses"])  # no KIP-848 advice here
    assert f"Group {groups['stopped']} has no members and is {lag['total_lag']:,} records behind" in data["verdict"]
    assert "Burrow: STOP" in data["verdict"]
    causes = next(s for s in data["sections"] if s["heading"] == "Likely causes, ranked")["lines"]
    assert causes[0].startswith("1. Consumers stopped / no members: state EMPTY with 0 members")
    assert causes[1].startswith(
        "Considered: Consumer rebalance storm (rebalance-storm): ranks lower because the group has no members"
    )
    assert data["severity"] == "warning"
    assert stopped_s < 3 + 5  # five reads over 2 s; generous on a busy machine

    # the storming group: rebalance-storm first, with its runbook entry and mechanism lines
    result = await answer(f"lag {groups['storm']}", ctx)
    data = json.loads(render_json(result.reply))
    assert data["lag"]["status"] == "REBALANCING", data["verdict"]
    assert data["diagnoses"][0]["entry_id"] == "rebalance-storm"
    kb = default_kb()
    assert [m["label"] for m in data["diagnoses"][0]["mechanism"]] == [
        r.label for r in kb.failure_modes["rebalance-storm"].mechanism
    ]
    assert data["verdict"].startswith(f"Group {groups['storm']} is rebalancing")
    assert data["severity"] == signals_from_kb(kb).rebalance_severity


@pytest.mark.kafka
async def test_lag_without_a_group_and_the_digest_list_both(ctx, groups):
    result = await answer("lag", ctx)
    assert result.outcome == "answered", result.reply.verdict
    data = json.loads(render_json(result.reply))["lag"]
    by_name = {g["group"]: g for g in data["groups"]}
    stopped, storm = by_name[groups["stopped"]], by_name[groups["storm"]]
    assert stopped["state"] == "EMPTY" and stopped["members"] == 0 and stopped["total_lag"] > 0
    assert storm["total_lag"] > 0 and storm["coordinator"] in (101, 102, 103)
    order = [g["group"] for g in data["groups"]]
    lagging = [g["group"] for g in data["groups"] if g["total_lag"]]
    assert order[: len(lagging)] == lagging  # lagging ones first
    assert [g["total_lag"] for g in data["groups"][: len(lagging)]] == sorted(
        (g["total_lag"] for g in data["groups"][: len(lagging)]), reverse=True
    )
    lines = result.reply.sections[0].lines
    assert any(
        line.startswith(f"{groups['stopped']} (EMPTY, 0 member(s)): ") and "nobody is consuming" in line
        for line in lines
    ), lines
    assert any(line.startswith(f"{groups['storm']} (") for line in lines), lines

    digest = (await answer("digest", ctx)).reply
    section = next(s for s in digest.sections if s.heading == "Consumer lag (now)")
    assert any(
        line.startswith(f"{groups['stopped']} (EMPTY): ") and "nobody is consuming" in line for line in section.lines
    ), section.lines
    assert any(line.startswith(f"{groups['storm']} (") for line in section.lines), section.lines
    assert not any("No groups named" in line for line in section.lines)


def _coordinator_of(cluster, group: str) -> int:
    """The broker coordinating ``group``: ListGroups answers with the groups a broker coordinates."""
    admin = _outside_admin(cluster)
    try:
        for b in sorted(cluster.brokers):
            if any(g["group_id"] == group for g in admin.list_groups(broker_ids=[b])):
                return b
    finally:
        admin.close()
    raise AssertionError(f"no broker lists {group}")


@pytest.mark.kafka
def test_killed_coordinator_gives_an_answer_or_a_clean_error(kafka_cluster):
    """Kill the broker coordinating a group, then at once ask `lag <group>` and `lag` in a separate
    `kbot ask --json` process (a crash is then a failed test, not a dead run): the process exits
    with 0 (answered) or 1 (source down) and prints a JSON reply, never a traceback or a signal."""
    from localkafka.groups import stopped_group

    group = _name("orphan")
    fault = stopped_group(kafka_cluster, group, _name("orphan-t"), initial=10, rate=5)
    try:
        victim = _coordinator_of(kafka_cluster, group)
        kafka_cluster.faults.kill_broker(victim)
        env = {**os.environ, **_env(kafka_cluster), "KBOT_LAKE": "0", "KBOT_ADMIN_TIMEOUT_S": "5"}
        for question in (f"lag {group}", "lag"):
            proc = subprocess.run(
                [sys.executable, "-m", "cli.main", "ask", "--json", question],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=str(ROOT),
                env=env,
            )
            assert proc.returncode in (0, 1), f"{question}: rc={proc.returncode} {proc.stderr[-2000:]}"
            assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
            reply = json.loads(proc.stdout)
            assert reply["verdict"], reply
            if proc.returncode == 1:
                assert reply["severity"] == "error"
    finally:
        fault.stop()


@pytest.mark.kafka
async def test_a_kip848_group_that_keeps_up_is_ok_not_stopped(ctx, kafka_cluster):
    """DescribeGroups answers a KIP-848 (group.protocol=consumer) group with "not a classic group",
    state Dead and no members; read that way, a healthy group looked stopped."""
    from localkafka.groups import steady_group

    group = _name("k848")
    fault = steady_group(kafka_cluster, group, _name("k848-t"), records=60, protocol="consumer")
    admin = _outside_admin(kafka_cluster)
    try:

        def consumed_all():
            offsets = admin.list_group_offsets({group: None}).get(group) or {}
            listed = [g for g in admin.list_groups() if g["group_id"] == group]
            return sum(o.offset for o in offsets.values()) == 60 and listed and listed[0]["group_state"] == "Stable"

        wait_until(consumed_all, 90, f"{group} to consume all 60 records", interval=0.3, ignore=(Exception,))
        result = await answer(f"lag {group}", ctx)
    finally:
        fault.stop()
        admin.close()
    lag = json.loads(render_json(result.reply))["lag"]
    assert (lag["status"], lag["state"], lag["members"], lag["total_lag"]) == ("OK", "STABLE", 1, 0), (
        result.reply.verdict
    )
    assert result.reply.severity == "ok"


# ---- listing on a stand-in gateway (no cluster): caps, order, errors -----------------------------------


class ListingGateway:
    """Lists ``n`` groups; group i is i*10 behind (0 caught up); 'broken' fails to read."""

    name = "fake"

    def __init__(self, n: int, failed_brokers=None):
        from live.model import GroupListing, GroupListings

        names = [f"g{i:03d}" for i in range(n)] + ["broken"]
        self.listing = GroupListings(
            [GroupListing(g, "EMPTY" if g != "g001" else "STABLE", "consumer", 101) for g in names],
            failed_brokers or {},
        )
        self.asked: list[list[str]] = []

    async def list_consumer_groups(self):
        return self.listing

    async def consumer_groups_read(self, groups):
        from live.gateway import Timeout
        from live.model import GroupLag, GroupMember, GroupRead, PartitionLag

        self.asked.append(list(groups))
        out = {}
        for g in groups:
            if g == "broken":
                out[g] = Timeout("describe_groups 'broken' did not complete within 10s")
                continue
            i = int(g[1:])
            members = [GroupMember("m1", "c", "/h")] if g == "g001" else []
            out[g] = GroupRead(
                GroupLag(g, "STABLE" if members else "EMPTY", [PartitionLag("t", 0, 5, 5 + i * 10, i * 10)]),
                members,
                "consumer",
                "range",
                0.0,
            )
        return out


class ListingPool:
    def __init__(self, gw):
        self.gw = gw

    async def get(self, name=None):
        return self.gw


async def test_lag_without_a_group_lists_lagging_first_and_keeps_errors_in_place():
    gw = ListingGateway(4, failed_brokers={103: "Timeout: list_groups on broker 103"})
    result = await answer("lag", Context(live=ListingPool(gw)))
    data = json.loads(render_json(result.reply))
    assert [g["group"] for g in data["lag"]["groups"]] == ["g003", "g002", "g001", "broken", "g000"]
    assert data["lag"]["groups"][0]["total_lag"] == 30 and data["lag"]["failed_brokers"] == {
        "103": "Timeout: list_groups on broker 103"
    }
    lines = result.reply.sections[0].lines
    assert lines[0] == "g003 (EMPTY, 0 member(s)): 30 behind on 1 partition(s): no members, nobody is consuming"
    assert lines[2] == "g001 (STABLE, 1 member(s)): 10 behind on 1 partition(s)"
    assert lines[3] == "Caught up (1): g000" and lines[4].startswith("broken: could not read (describe_groups")
    assert any("103: Timeout" in n for n in result.reply.notes)
    assert data["verdict"] == "3 of 5 group(s) are behind; most: g003 with 30 records."
    assert gw.asked == [["broken", "g000", "g002", "g003", "g001"]]  # one batched read, EMPTY ones first


async def test_digest_lists_groups_itself_and_says_how_many_it_skipped(monkeypatch):
    from commands import digest

    monkeypatch.setattr(digest, "LISTED_GROUPS", 3)
    gw = ListingGateway(6)
    part = await digest._lag(gw, [])
    assert part.section.heading == "Consumer lag (now)"
    # read: the 3 first in read order (EMPTY before STABLE, then by name): broken, g000, g002
    assert part.section.lines == [
        "g002 (EMPTY): 20 behind with no members: nobody is consuming",
        "broken: could not read (describe_groups 'broken' did not complete within 10s)",
        "Caught up (1): g000",
        "4 more group(s) not read: at most 3 per digest (name them with --groups or $KBOT_DIGEST_GROUPS).",
    ]
    assert part.severity == "warning"


def test_a_runbook_entry_for_stopped_consumers_is_used_once_the_kb_has_one():
    r = rank(facts(["EMPTY"] * 3, [()] * 3, [50, 60, 70]), LagSignals(stopped_entry="consumers-stopped"))
    assert r.causes[0].entry_id == "consumers-stopped"


def test_the_lakes_window_verdict_counts_as_growing_when_the_reads_are_too_short_to_tell():
    r = rank(facts(["STABLE"] * 5, [{"a"}] * 5, [300] * 5, lake_worst="STALL"))
    assert r.status == "STALL" and r.causes[0].key == "consumers-slower-than-producers"
    assert "metric lake over its window: STALL" in r.causes[0].reason
