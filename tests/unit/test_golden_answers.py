"""Golden answers for every command, in terminal text and Block Kit (issues 9 and 25).

The commands run for real (parse, run, render) against an in-memory gateway, so the answers are
the same on every machine: every command the registry lists has at least one case (a test fails
when one has none), most on a degraded cluster (broker 103 gone), some on a cluster made for
them (two brokers down, durability findings, hanging transactions, a throttle in place), plus
two errors. Each answer is also checked against Slack's limits, short and full. Regenerate
after a deliberate change with KBOT_UPDATE_GOLDEN=1 and read the diff: these files are what an
on-call engineer reads.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from action_fakes import FakeGateway, FakePool, GroupReadingGateway, cv, producer  # noqa: E402
from block_limits import violations  # noqa: E402

from bot.render import render_text  # noqa: E402
from bot.render_slack import render_blocks
from commands import hot_partitions
from commands.registry import ROUTER, answer
from commands.triage import engine as triage_engine  # noqa: E402
from diagnosis import metric_checks
from framework.actions import Pending
from framework.context import Context
from framework.router import BadInput
from gate.audit import AuditLog  # noqa: E402
from gate.confirmation import ConfirmationGate, PendingStore  # noqa: E402
from live.model import HangingTransaction, LogDir, LogDirPartition, PartitionOffsets, Reassignment  # noqa: E402

GOLDEN = Path(__file__).parent.parent / "golden" / "answers"
EXPIRES_AT = 1_795_000_000.0  # a fixed time, so the preview's expiry line never changes
NOW = EXPIRES_AT - 300  # the context's clock
TRIAGE_TOKEN = "0123456789ab"  # the triage threads' token (random in the bot)
MINUTE_MS = 60_000


def degraded_gateway() -> FakeGateway:
    """Broker 103 is gone: its replicas left the ISRs of all three partitions of orders."""
    gw = FakeGateway(
        brokers=(101, 102),
        topics={
            "orders": [
                (101, [101, 102, 103], [101, 102]),
                (102, [102, 103, 101], [102, 101]),
                (101, [103, 101, 102], [101, 102]),
            ]
        },
    )
    return gw


def _txn_cap(gw: FakeGateway, values: dict[int, str]) -> FakeGateway:
    for b, v in values.items():
        gw.broker_cfg[b]["transaction.max.timeout.ms"] = cv(v, "STATIC_BROKER_CONFIG")
    return gw


def two_down_gateway() -> FakeGateway:
    """Brokers 102 and 103 are gone: orders (RF 3, min ISR 2) is left with 101 alone in every ISR,
    and audit-log (RF 1, on 103) has no leader."""
    gw = FakeGateway(
        brokers=(101,),
        topics={
            "orders": [
                (101, [101, 102, 103], [101]),
                (101, [102, 103, 101], [101]),
                (101, [103, 101, 102], [101]),
            ],
            "audit-log": [(None, [103], [103])],
        },
    )
    gw.topic_cfg["audit-log"]["min.insync.replicas"] = cv("1")
    return gw


def audit_gateway() -> FakeGateway:
    """Every broker up; topics that break each durability rule once, and a broker whose
    transaction.max.timeout.ms differs from the others' (a rolling change left half done)."""
    rf3, rf2, rf1 = [101, 102, 103], [101, 102], [103]
    gw = FakeGateway(
        topics={
            "orders": [(101, rf3, rf3)],
            "payments": [(102, rf3, rf3)],
            "clicks": [(101, rf2, rf2)],
            "audit-log": [(103, rf1, rf1)],
            "legacy": [(101, rf3, rf3)],
        }
    )
    gw.topic_cfg["payments"]["min.insync.replicas"] = cv("3")
    gw.topic_cfg["clicks"]["min.insync.replicas"] = cv("1")
    gw.topic_cfg["audit-log"]["min.insync.replicas"] = cv("1")
    gw.topic_cfg["legacy"]["unclean.leader.election.enable"] = cv("true")
    return _txn_cap(gw, {101: "900000", 102: "900000", 103: "600000"})


def txn_gateway(now_s: float) -> FakeGateway:
    """Every broker up; two transactions hold payments back as of ``now_s``: producer 4001's on
    payments-0, which no coordinator knows (idle 20 min), and payments-app-7's on payments-1, an
    hour past its 60 s timeout. hanging-txns reads the wall clock, abort-txn the context's."""
    rf3 = [101, 102, 103]
    now_ms = int(now_s * 1000)
    gw = FakeGateway(
        topics={"payments": [(101, rf3, rf3), (102, rf3, rf3)]},
        producers={
            ("payments", 0): [producer(4001, 940, epoch=2, last_ts=now_ms - 20 * MINUTE_MS)],
            ("payments", 1): [producer(5002, 980, epoch=0, last_ts=now_ms - 61 * MINUTE_MS)],
        },
    )
    gw.hanging = [HangingTransaction("payments-app-7", 5002, 0, "Ongoing", 61 * MINUTE_MS, 102, [("payments", 1)])]
    return _txn_cap(gw, {b: "900000" for b in gw.brokers})


def hanging_txns_gateway() -> FakeGateway:
    return txn_gateway(time.time())


def abort_txn_gateway() -> FakeGateway:
    return txn_gateway(NOW)


def _in_sync(leaders=(101, 102, 103)) -> list:
    """orders with every replica in sync, one partition led by each broker."""
    return [(leader, [101, 102, 103], [101, 102, 103]) for leader in leaders]


def reassigning_gateway() -> FakeGateway:
    """Every broker up, broker 104 new; orders-0 is being moved from 103 to 104."""
    return FakeGateway(
        brokers=(101, 102, 103, 104),
        topics={"orders": _in_sync()},
        reassignments=[Reassignment("orders", 0, [101, 102, 103, 104], [104], [103])],
    )


def moving_gateway() -> FakeGateway:
    """A user's reassignment in progress under a 1 kB/s throttle: orders-0 (RF 2 on 101, 102) moves
    its replica on 102 to 103, which holds 2 MB of the leader's 16 MB."""
    gw = FakeGateway(
        topics={"orders": [(101, [101, 103, 102], [101, 102])]},
        reassignments=[Reassignment("orders", 0, [101, 103, 102], [103], [102])],
    )
    gw.topic_cfg["orders"]["min.insync.replicas"] = cv("1")
    for b in gw.brokers:
        for side in ("leader", "follower"):
            gw.broker_cfg[b][f"{side}.replication.throttled.rate"] = cv("1000", "DYNAMIC_BROKER_CONFIG")
    gw.topic_cfg["orders"]["leader.replication.throttled.replicas"] = cv("0:101,0:102")
    gw.topic_cfg["orders"]["follower.replication.throttled.replicas"] = cv("0:103")
    gw.dirs = [
        LogDir(101, "/var/lib/kafka/data", None, [LogDirPartition("orders", 0, 16_000_000, 0)]),
        LogDir(103, "/var/lib/kafka/data", None, [LogDirPartition("orders", 0, 2_000_000, 0)]),
    ]
    return gw


def throttled_gateway() -> FakeGateway:
    """The throttle a finished reassignment left behind: 50 MB/s on every broker, orders-0's replicas listed."""
    gw = FakeGateway(topics={"orders": _in_sync()})
    for b in gw.brokers:
        for side in ("leader", "follower"):
            gw.broker_cfg[b][f"{side}.replication.throttled.rate"] = cv("50000000", "DYNAMIC_BROKER_CONFIG")
    gw.topic_cfg["orders"]["leader.replication.throttled.replicas"] = cv("0:101,0:102")
    gw.topic_cfg["orders"]["follower.replication.throttled.replicas"] = cv("0:103")
    return gw


def sized_gateway() -> FakeGateway:
    """The degraded cluster with its log directories: orders holds 12 GB on the two live brokers."""
    gw = degraded_gateway()
    gw.dirs = [
        LogDir(b, "/var/lib/kafka/data", None, [LogDirPartition("orders", p, 2_000_000_000, 0) for p in range(3)])
        for b in gw.brokers
    ]
    return gw


def lag_gateway() -> FakeGateway:
    """The degraded cluster with the real gateway's group read: reads half a second apart."""
    ticks = itertools.count()
    return GroupReadingGateway(
        brokers=(101, 102),
        topics=degraded_gateway().layout,
        read_clock=lambda: NOW + 0.5 * next(ticks),
    )


class GrowingOffsetsGateway(FakeGateway):
    """Every partition is written between two end-offset reads: orders-0 3,000 records a read (a hot
    key), the other partitions 100."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.reads = 0

    async def stable_offsets(self, topic_partitions):
        read = await super().stable_offsets(topic_partitions)
        n, self.reads = self.reads, self.reads + 1
        step = {("orders", 0): 3_000}
        return {
            k: PartitionOffsets(
                o.topic, o.partition, o.last_stable + n * step.get(k, 100), o.high_watermark + n * step.get(k, 100)
            )
            for k, o in read.items()
        }


def hot_key_gateway() -> FakeGateway:
    """Every broker up; orders-0 is written 30 times faster than its siblings."""
    return GrowingOffsetsGateway(topics={"orders": _in_sync()})


@dataclass(frozen=True)
class Case:
    text: str
    cluster: Callable[[], FakeGateway] = degraded_gateway
    before: tuple[str, ...] = ()  # asked first, in the same state (a triage answer needs its triage)


CASES = {
    "help": Case("help"),
    "runbook": Case("runbook hanging transaction"),
    "why_urp_degraded": Case("why URP"),
    "why_urp_reassigning": Case("why URP", moving_gateway),
    "why_offline": Case("why offline", two_down_gateway),
    "why_under_min_isr": Case("why UnderMinIsr", two_down_gateway),
    "status_degraded": Case("status"),
    "at_min_isr": Case("at-min-isr"),
    "audit": Case("audit", audit_gateway),
    "hanging_txns": Case("hanging-txns", hanging_txns_gateway),
    "lag_groups": Case("lag"),
    "lag_group": Case("lag payments", lag_gateway),
    "describe": Case("describe orders"),
    "hot_partitions_live": Case("hot-partitions"),
    "hot_partitions_live_hot_key": Case("hot-partitions", hot_key_gateway),
    "history_no_lake": Case("history URP"),
    "changes_no_lake": Case("changes --since 2h"),
    "digest": Case("digest"),
    "triage_start": Case("triage URP"),
    "triage_answer": Case(f"triage answer {TRIAGE_TOKEN} q1 no", before=("triage URP",)),
    "preview_elect_leaders": Case("elect-leaders orders"),
    "preview_throttle_set": Case("throttle set 50MB/s", reassigning_gateway),
    "preview_throttle_clear": Case("throttle clear", throttled_gateway),
    "preview_retention": Case("retention orders 3d", sized_gateway),
    "preview_abort_txn": Case("abort-txn payments 0", abort_txn_gateway),
    "confirm_unknown_token": Case("confirm no-such-token"),
    "cancel_unknown_token": Case("cancel no-such-token"),
    "break_glass_unknown_token": Case("break-glass no-such-token approver unreachable at night"),
    "timeline_unknown_thread": Case("timeline C0INC/1700000000.000100"),
    "error_unknown_topic": Case("describe no-such-topic"),
    "error_bad_input": Case("frobnicate the cluster"),
}


class FixedTokenGate(ConfirmationGate):
    """The real gate (confirm, cancel, the state database triage threads live in) in a private
    folder, except that a preview records nothing and always gets the same token and expiry."""

    def __init__(self, state_dir: Path):
        super().__init__(
            PendingStore(state_dir / "pending.sqlite3"),
            AuditLog(state_dir / "audit.jsonl"),
            router=ROUTER,
            clock=lambda: NOW,
        )

    async def propose(self, plan, request) -> Pending:
        second = bool(plan.high_risk or plan.kind in self.high_risk_kinds or request.spec.name in self.high_risk_kinds)
        return Pending("TOKEN-FOR-GOLDEN-FILES", plan, request.user or "U0ALICE", EXPIRES_AT, second)


@pytest.fixture(autouse=True)
def _same_everywhere(monkeypatch):
    """What would differ between machines and runs: the triage token, the digest's and the lake's
    groups from the environment, the seconds between two end-offset reads (3 s on the clock the
    reads are timed with, at once on the wall clock)."""
    monkeypatch.setattr(triage_engine, "secrets", SimpleNamespace(token_hex=lambda _n: TRIAGE_TOKEN))
    monkeypatch.delenv("KBOT_DIGEST_GROUPS", raising=False)
    monkeypatch.delenv("KBOT_LAKE_GROUPS", raising=False)
    ticks = itertools.count(0.0, 3.0)
    monkeypatch.setattr(metric_checks, "monotonic", lambda: next(ticks))
    monkeypatch.setattr(metric_checks, "RATE_GAP_S", 0.0)
    monkeypatch.setattr(hot_partitions, "LIVE_GAP_S", 0.0)


async def _answer(text: str, state_dir: Path, cluster: Callable[[], FakeGateway] = degraded_gateway, before=()):
    ctx = Context(live=FakePool(cluster()), gate=FixedTokenGate(state_dir), clock=lambda: NOW)
    for earlier in before:
        assert (await answer(earlier, ctx, user="U0ALICE")).outcome == "answered", earlier
    return await answer(text, ctx, user="U0ALICE")


async def _case(name: str, state_dir: Path):
    case = CASES[name]
    return await _answer(case.text, state_dir, case.cluster, case.before)


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KBOT_UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"golden file {path} missing; run with KBOT_UPDATE_GOLDEN=1 once and review it"
    assert actual == path.read_text(encoding="utf-8"), f"{name} changed: review, then KBOT_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(CASES))
async def test_golden_answer(name, tmp_path):
    result = await _case(name, tmp_path)
    # a bug in the command, not an answer to keep (an action that cannot go ahead fails on purpose)
    assert result.reply.title != "Internal error", render_text(result.reply)
    _golden(f"{name}.txt", render_text(result.reply))
    _golden(f"{name}.blocks.json", json.dumps(render_blocks(result.reply), indent=2, ensure_ascii=False) + "\n")
    for full in (False, True):
        for n, message in enumerate(render_blocks(result.reply, full=full), 1):
            assert violations(message) == [], (name, full, n)


async def test_why_urp_short_answer_acts_within_forty_lines(tmp_path):
    result = await _case("why_urp_degraded", tmp_path)
    text = render_text(result.reply)
    lines = text.splitlines()
    assert len(lines) <= 40, text
    assert lines[0] == "[WARNING] Why URP?"
    assert lines[1].startswith("Broker 103 is gone"), lines[1]
    # a broker that is down may have crashed or been halted by its failed log dirs: the first steps
    # find out which (issue 27, finding 4), none moves its replicas away
    assert lines[2].startswith("Sources: admin read"), lines[2]  # what the answer read (issue 35)
    assert lines[4] == "Check first: Broker loss or Log-directory / disk failure"
    assert "kafka-reassign-partitions" not in text.split("Evidence")[0]
    full = render_text(result.reply, full=True)
    assert len(full.splitlines()) > 2 * len(lines)  # everything is still there, on request


async def test_errors_are_short_and_say_what_to_do(tmp_path):
    for name in ("error_unknown_topic", "error_bad_input"):
        result = await _case(name, tmp_path)
        assert result.outcome == "bad_input"
        assert result.reply.outcome == "bad_input"
        text = render_text(result.reply)
        assert len(text.splitlines()) <= 6 and "Traceback" not in text
        assert "More: " in text  # what to try next


def test_every_registered_command_has_a_golden_case():
    """Adding a command means its module, its registry line and its golden case here (issue 25)."""

    covered = set()
    for case in CASES.values():
        try:
            covered.add(ROUTER.parse(case.text).spec.name)
        except BadInput:  # the error cases are not commands
            continue
    missing = [name for name in ROUTER.names() if name not in covered]
    assert not missing, f"commands without a golden case in CASES: {missing}"


def test_every_golden_file_has_its_case():
    """A renamed or removed case leaves no stale file behind for someone to read as current."""
    expected = {f"{name}{suffix}" for name in CASES for suffix in (".txt", ".blocks.json")}
    stale = sorted(p.name for p in GOLDEN.iterdir() if p.name not in expected)
    assert not stale, f"golden files without a case: {stale}"


def _every_example() -> list[str]:

    examples = [e for c in ROUTER._by_words for e in c.spec.examples if "..." not in e and "--cluster" not in e]
    # Every runbook entry in full (the longest answers the bot gives) and every symptom's why.
    from runbook_kb import default_kb

    kb = default_kb()
    examples += [f"runbook {eid}" for eid in kb.failure_modes] + [f"why {eid}" for eid in kb.failure_modes]
    return examples


@pytest.mark.parametrize("text", _every_example())
async def test_every_command_answer_fits_slack(text, tmp_path):
    """Every command's answer, short and full, renders to messages Slack accepts (issue 9)."""
    result = await _answer(text, tmp_path)
    assert result.reply.title != "Internal error", (text, result.reply.verdict)  # a bug, not an answer
    for full in (False, True):
        messages = render_blocks(result.reply, full=full)
        for n, message in enumerate(messages, 1):
            assert violations(message) == [], (text, full, n)
    assert "Traceback" not in render_text(result.reply)
