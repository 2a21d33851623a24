"""Pure verdicts of the live checks: the controller quorum from voter probes, metadata lag from the
quorum's observers, transactions from a report, and the URP cause of a paused or fenced broker."""

from __future__ import annotations

import time

from diagnosis.quorum_checks import metadata_lag_findings, quorum_view
from diagnosis.rules import BrokerFacts, PartitionState, urp_findings
from diagnosis.txn_checks import transaction_findings
from diagnosis.txn_evidence import OpenTxn, TxnReport
from live.model import PartitionOffsets, QuorumInfo, QuorumVoter, TransactionDescription
from live.probe import ProbeResult, api_versions_request, parse_addresses, parse_voters

NOW = 1_800_000_000_000


def probe(state: str, port: int = 9093) -> ProbeResult:
    return ProbeResult("127.0.0.1", port, state, 0.01)  # type: ignore[arg-type]


def quorum(leader: int = 1) -> QuorumInfo:
    return QuorumInfo(leader, 7, 100, [QuorumVoter(1, 100, 0), QuorumVoter(2, 100, 0), QuorumVoter(3, 90, 10)], [])


def test_quorum_lost_when_a_majority_of_voters_is_down():
    one = quorum_view({1: probe("refused")}, None)
    assert one.lost and one.severity == "critical"
    assert one.verdict.startswith("No active controller: 1 of 1 controller voter(s) (1) are down or not answering")
    two_of_three = quorum_view({1: probe("refused"), 2: probe("silent"), 3: probe("answers")}, None)
    assert two_of_three.lost
    one_of_three = quorum_view({1: probe("refused"), 2: probe("answers"), 3: probe("answers")}, quorum(2))
    assert not one_of_three.lost and one_of_three.severity == "warning"
    assert "keeps its majority (2 of 3)" in one_of_three.verdict
    healthy = quorum_view({1: probe("answers"), 2: probe("answers"), 3: probe("answers")}, quorum())
    assert healthy.severity == "ok" and healthy.verdict == ""
    assert "lagging: 3 by 10" in healthy.evidence[0].value
    leaderless = quorum_view({1: probe("answers")}, quorum(-1))
    assert leaderless.lost and leaderless.verdict == "No active controller: the KRaft quorum reports no leader."


def test_probe_helpers():
    assert parse_voters("1@127.0.0.1:9093,2@[::1]:9094, bad") == {1: ("127.0.0.1", 9093), 2: ("::1", 9094)}
    assert parse_addresses("a:1,b:2,c") == [("a", 1), ("b", 2)]
    req = api_versions_request(7)
    assert int.from_bytes(req[:4], "big") == len(req) - 4
    assert req[4:6] == b"\x00\x12" and req[8:12] == (7).to_bytes(4, "big")  # ApiVersions, correlation 7


def test_metadata_lag_names_the_registered_broker_that_is_behind():
    observers = [
        QuorumVoter(101, 100, 0, NOW, NOW - 200, True),
        QuorumVoter(102, 60, 40, NOW, NOW - 30_000, True),
        QuorumVoter(103, 10, 90, NOW, NOW - 60_000, True),
    ]
    q = QuorumInfo(1, 3, 100, [QuorumVoter(1, 100, 0)], observers)
    found = metadata_lag_findings(q, {101, 102}, NOW)  # 103 is fenced: broker loss, not metadata lag
    assert found.lead[0][0] == "metadata-lag"
    assert found.verdict.startswith(
        "Broker 102 is behind on metadata: broker 102 last caught up 30 s ago and is 40 records behind"
    )
    assert metadata_lag_findings(q, {101}, NOW).severity == "ok"


def _txn(**kw) -> OpenTxn:
    base = dict(
        topic="pay",
        partition=0,
        producer_id=7,
        producer_epoch=0,
        coordinator_epoch=1,
        start_offset=10,
        offsets=PartitionOffsets("pay", 0, 10, 135),
        transactional_id="tx-7",
        coordinator_id=101,
        start_time_ms=NOW - 30_000,
        timeout_ms=600_000,
    )
    base.update(kw)
    return OpenTxn(**base)


def test_transaction_within_its_timeout_is_a_warning_with_the_abort_time():
    found = transaction_findings(TxnReport(open=[_txn()], now_ms=NOW))
    assert found.severity == "warning"
    assert found.verdict.startswith(
        "1 open transaction(s) hold read_committed consumers back: producer 7 on pay-0, "
        "125 records behind the high watermark. Still within its timeout"
    )
    assert (
        "LSO 10 lags the high watermark 135 by 125 records for 30 s; within its 10.0 min timeout"
        in found.evidence[0].value
    )


def test_hanging_when_past_its_timeout_or_unknown_to_every_coordinator():
    past = transaction_findings(TxnReport(open=[_txn(start_time_ms=NOW - 700_000)], now_ms=NOW))
    assert past.severity == "critical" and past.verdict.startswith("1 hanging transaction(s): producer 7 holds pay-0's")
    assert "HANGING: past its 10.0 min timeout" in past.evidence[0].value
    orphan = transaction_findings(
        TxnReport(
            open=[_txn(transactional_id=None, start_time_ms=None, timeout_ms=None, last_write_ms=NOW - 5_000)],
            now_ms=NOW,
        )
    )
    assert (
        orphan.severity == "critical"
        and "no transaction coordinator knows this transaction" in orphan.evidence[0].value
    )


def test_after_an_abort_the_coordinator_listing_alone_is_not_critical():
    listed = TransactionDescription("tx-7", 101, "Ongoing", 7, 0, 600_000, NOW - 30_000, [("pay", 0)])
    found = transaction_findings(TxnReport(coordinator_only=[listed], now_ms=NOW))
    assert found.severity == "ok"
    assert "holds no partition's LSO" in found.evidence[0].value
    partial = transaction_findings(TxnReport(unread={"coordinator on broker 102": "timed out"}, now_ms=NOW))
    assert partial.severity == "warning" and partial.verdict.endswith(
        "This answer is partial: coordinator on broker 102 not read."
    )


def test_urp_cause_follows_the_probe():
    parts = [PartitionState("t", 0, 101, (101, 102, 103), (101, 102))]

    def cause(registered, liveness):
        facts = BrokerFacts(frozenset(registered), frozenset({101, 102, 103}), {}, liveness)
        return urp_findings(parts, facts)[0].cause

    assert cause({101, 102}, {103: "silent"}) == "gc-pauses"
    assert cause({101, 102}, {103: "refused"}) == "broker-loss"
    assert cause({101, 102}, {}) == "broker-loss"  # not probed: what the metadata says
    assert cause({101, 102}, {103: "answers"}) == "network-partition"
    # dropped packets (iptables DROP, a partition, a host that is down): cut off, not a dead process
    assert cause({101, 102}, {103: "unreachable"}) == "network-partition"
    assert cause({101, 102, 103}, {103: "silent"}) == "gc-pauses"  # hung before its session expired
    assert cause({101, 102, 103}, {103: "answers"}) == "slow-follower"


def test_fencing_names_the_transactional_id_that_was_taken_over():
    from diagnosis.txn_checks import fencing_findings

    fresh = TransactionDescription("app-a", 101, "Empty", 4, 0, 60_000, -1, [])
    taken = TransactionDescription("app-b", 102, "Ongoing", 9, 1, 60_000, NOW - 5_000, [("orders", 1)])
    found = fencing_findings([fresh, taken], NOW)
    assert found.lead[0][0] == "producer-fencing" and found.severity == "warning"
    assert found.verdict.startswith("Transactional id app-b was taken over: producer id 9 is at epoch 1")
    assert found.evidence[0].value == (
        "producer id 9, epoch 1 (initialised at least 2 times), state Ongoing, coordinator 102, "
        "its current transaction began 5 s ago"
    )
    assert fencing_findings([fresh], NOW).severity == "ok"


def _part(p: int, isr: tuple[int, ...], leader: int | None = 101) -> PartitionState:
    return PartitionState("orders", p, leader, (101, 102, 103), isr)


def test_reconcile_takes_the_view_most_brokers_share_and_names_the_stale_broker():
    from diagnosis.snapshot import reconcile

    # the gateway's one read landed on 103, which still lists itself in sync on partition 1
    states = [_part(0, (101, 102, 103)), _part(1, (101, 102, 103))]
    dropped = (101, (101, 102))
    views = {
        101: {("orders", 0): (101, (101, 102, 103)), ("orders", 1): dropped},
        102: {("orders", 0): (101, (101, 102, 103)), ("orders", 1): dropped},
        103: {("orders", 0): (101, (101, 102, 103)), ("orders", 1): (101, (101, 102, 103))},
    }
    out, stale = reconcile(states, views)
    assert [p.isr for p in out] == [(101, 102, 103), (101, 102)]
    assert stale == {103: [(("orders", 1), (101, (101, 102, 103)), dropped)]}
    # a tie (two brokers answered, one each way) goes to the view that shows the problem
    out, stale = reconcile(states, {101: views[101], 103: views[103]})
    assert out[1].isr == (101, 102) and list(stale) == [103]
    # one view, or none, cannot outvote the read: nothing changes
    assert reconcile(states, {103: views[103]}) == (states, {})
    assert reconcile(states, {}) == (states, {})
    # a partition only one broker answered for keeps the read's view
    out, _ = reconcile([_part(2, (101,))], {101: {}, 102: {("orders", 2): (101, (101, 102, 103))}})
    assert out[0].isr == (101,)
    # a tie between "no leader" and a leader, same ISR, goes to "no leader" (the problem)
    out, _ = reconcile(
        [_part(3, (103,), leader=103)], {101: {("orders", 3): (None, (103,))}, 103: {("orders", 3): (103, (103,))}}
    )
    assert out[0].leader is None and not out[0].has_leader


def test_a_stale_broker_cannot_hide_an_offline_partition_from_why_offline():
    """The read landed on a broker that still names a leader the others no longer have."""
    from diagnosis.live_common import stale_view_evidence
    from diagnosis.snapshot import Snapshot, reconcile
    from live.model import Broker, ClusterInfo

    states, stale = reconcile(
        [_part(0, (103,), leader=103)],
        {
            101: {("orders", 0): (None, (103,))},
            102: {("orders", 0): (None, (103,))},
            103: {("orders", 0): (103, (103,))},
        },
    )
    assert [p.has_leader for p in states] == [False]
    brokers = BrokerFacts(registered=frozenset({101, 102, 103}), expected=frozenset({101, 102, 103}))
    cluster = ClusterInfo("c", 101, [Broker(b, "127.0.0.1", 9000 + b) for b in (101, 102, 103)])
    snap = Snapshot(cluster, [], {}, states, brokers, stale_views=stale)
    assert snap.by_category()["Offline"] == states
    [line] = stale_view_evidence(snap)
    assert "orders-0" in line.value and "leader 103, ISR 103 there; no leader, ISR 103 on the others" in line.value


def test_a_stale_broker_cannot_hide_under_replication_from_why_urp():
    from diagnosis.live_common import stale_view_evidence
    from diagnosis.snapshot import Snapshot, reconcile
    from live.model import Broker, ClusterInfo

    states, stale = reconcile(
        [_part(1, (101, 102, 103))],
        {
            101: {("orders", 1): (101, (101, 102))},
            102: {("orders", 1): (101, (101, 102))},
            103: {("orders", 1): (101, (101, 102, 103))},
        },
    )
    brokers = BrokerFacts(registered=frozenset({101, 102, 103}), expected=frozenset({101, 102, 103}))
    cluster = ClusterInfo("c", 101, [Broker(b, "127.0.0.1", 9000 + b) for b in (101, 102, 103)])
    snap = Snapshot(cluster, [], {}, states, brokers, stale_views=stale)
    assert snap.by_category()["UnderReplicated"] == states
    [line] = stale_view_evidence(snap)
    assert line.label == "Broker 103's metadata" and line.status == "bad"
    assert "orders-1" in line.value and "ISR 101, 102, 103 there, 101, 102 on the others" in line.value
    # and the cause the diagnosis names is the broker that fell out, from the majority's view
    [finding] = urp_findings(states, brokers)
    assert finding.broker == 103 and finding.cause == "slow-follower"


async def test_a_broker_with_no_tcp_answer_is_cut_off_not_lost_and_no_replica_is_moved():
    """Its packets are dropped (a network partition, a firewall, a host that is down): the probe
    times out where a stopped process refuses at once, so the answer must not be broker loss."""
    from action_fakes import FakeGateway, FakePool

    from bot.render import render_text
    from commands.registry import answer
    from framework.context import Context
    from live.probe import ProbeResult

    class CutOff(FakeGateway):
        async def broker_liveness(self, broker_ids):
            return {
                b: ProbeResult("127.0.0.1", 9000 + b, "unreachable", 1.5, "no TCP answer within 1.5 s")
                for b in broker_ids
                if b == 103
            }

    gw = CutOff(brokers=(101, 102), topics={"orders": [(101, [101, 102, 103], [101, 102])]})
    result = await answer("why URP", Context(live=FakePool(gw)))
    reply = result.reply
    assert reply.verdict.startswith("Broker 103 cannot be reached: its port gives no TCP answer at all"), reply.verdict
    assert "Do not move its replicas" in reply.verdict
    text = render_text(reply)
    assert "Do now: Network partition" in text or "network-partition" in text.lower(), text[:600]
    assert "kafka-reassign-partitions" not in text and "Broker 103 is gone" not in text
    assert "fenced while its process answers" not in text  # it does not answer: the evidence says so
    assert "not registered and gives no TCP answer" in text


class _SlowLogDirs:
    """DescribeLogDirs slower than the diagnosis' short budget: on ``slow`` brokers only, or all."""

    def __init__(self, slow: set[int] | None):
        self.slow = slow

    def make(self):
        import asyncio

        from action_fakes import FakeGateway

        from diagnosis.live_common import LOG_DIRS_BUDGET_S
        from live.model import LogDir

        slow = self.slow

        class Gateway(FakeGateway):
            async def log_dirs(self, broker_ids=None):
                if slow is None or set(broker_ids or ()) & slow:
                    await asyncio.sleep(LOG_DIRS_BUDGET_S + 0.5)  # the scenario: a broker past the log-dirs budget
                return await super().log_dirs(broker_ids)

        gw = Gateway(topics={"orders": [(101, [101, 102, 103], [101, 102])], "other": [(101, [101, 102], [101, 102])]})
        gw.dirs = [LogDir(103, "/data/b", "KafkaStorageException", []), LogDir(101, "/data/a", None, [])]
        return gw


async def test_a_busy_cluster_is_not_read_as_a_stalled_disk():
    """Every broker answers DescribeLogDirs slowly (a machine at load 20): the suspect's failed log
    dir is still found, asked again with the full timeout, instead of calling its disk stalled."""
    from action_fakes import FakePool

    from commands.registry import answer
    from framework.context import Context

    reply = (await answer("why URP", Context(live=FakePool(_SlowLogDirs(None).make())))).reply
    assert reply.verdict.startswith("Broker 103 is up but lost its log directory /data/b"), reply.verdict
    assert any("the cluster or its host is busy" in n for n in reply.notes), reply.notes


async def test_only_the_suspect_slow_is_still_a_stalled_disk():
    from action_fakes import FakePool

    from commands.registry import answer
    from framework.context import Context

    reply = (await answer("why URP", Context(live=FakePool(_SlowLogDirs({103}).make())))).reply
    assert "Broker 103 does not answer DescribeLogDirs" in reply.verdict, reply.verdict
    assert not any("the cluster or its host is busy" in n for n in reply.notes)


# Recorded on the lab cluster with broker 103's listener port dropped by tc (issue 27, finding 2):
# 103 stayed registered and unfenced; the two partitions it leads shrank their ISR to 103 alone;
# the probe of its port timed out ("no TCP answer within 1.5 s") while 101 and 102 answered.
_CUT_PARTS = [
    PartitionState("lab-partition", 0, 101, (101, 102, 103), (101, 102, 103), 2),
    PartitionState("lab-partition", 1, 103, (103, 101, 102), (103,), 2),
    PartitionState("lab-partition", 3, 103, (103, 102, 101), (103,), 2),
]
_CUT_LIVENESS = {101: "answers", 102: "answers", 103: "unreachable"}


def test_a_registered_broker_with_no_tcp_answer_is_a_network_partition_named_by_its_leaderships():
    facts = BrokerFacts(frozenset({101, 102, 103}), frozenset({101, 102, 103}), {}, _CUT_LIVENESS)
    [finding] = urp_findings(_CUT_PARTS, facts)  # 101 and 102 are not slow followers: they cannot reach 103
    assert (finding.cause, finding.broker) == ("network-partition", 103)
    assert finding.partitions == (("lab-partition", 1), ("lab-partition", 3))  # once each, not per follower
    assert "registered and unfenced but its listener gives no TCP answer" in finding.detail
    # the same port refusing is a dead process's; answering, a live one: neither is a partition
    refused = BrokerFacts(frozenset({101, 102, 103}), frozenset({101, 102, 103}), {}, {103: "refused"})
    assert {f.cause for f in urp_findings(_CUT_PARTS, refused)} == {"slow-follower"}
    # not probed: nothing says the leader is cut off
    unprobed = BrokerFacts(frozenset({101, 102, 103}), frozenset({101, 102, 103}))
    assert {f.broker for f in urp_findings(_CUT_PARTS, unprobed)} == {101, 102}


def _cut_gateway():
    from action_fakes import FakeGateway

    from live.probe import ProbeResult

    class CutOffRegistered(FakeGateway):
        async def broker_liveness(self, broker_ids):
            return {
                b: ProbeResult("127.0.0.1", 16000 + b, "unreachable", 1.5, "no TCP answer within 1.5 s")
                if _CUT_LIVENESS[b] == "unreachable"
                else ProbeResult("127.0.0.1", 16000 + b, "answers", 0.01)
                for b in broker_ids
            }

    topics = {"lab-partition": [(p.leader, list(p.replicas), list(p.isr)) for p in _CUT_PARTS]}
    return CutOffRegistered(brokers=(101, 102, 103), topics=topics)


async def test_why_urp_on_a_registered_but_unreachable_broker_gives_no_destructive_advice():
    from action_fakes import FakePool

    from bot.render import render_text
    from commands.registry import answer
    from framework.context import Context

    reply = (await answer("why URP", Context(live=FakePool(_cut_gateway())))).reply
    assert reply.verdict.startswith("Broker 103 is cut off by the network, not down"), reply.verdict
    assert reply.severity == "critical"  # its partitions are under min ISR: acks=all writes fail
    assert "do not stop or restart it: with the ISR = {103}" in reply.verdict
    top = reply.diagnoses[0]
    assert top.entry_id == "network-partition"
    assert not any(s.destroys_data for s in top.mitigation)
    assert any(d.startswith("Stop, restart or move replicas away from a broker that is cut off") for d in top.do_not)
    labels = {e.label: e.value for e in reply.evidence}
    assert "Broker 101" not in labels and "Broker 102" not in labels  # no slow follower named
    assert (
        "2 of the 2 under-replicated partitions it leads have an ISR of 103 alone"
        in labels["For a network partition of broker 103"]
    )
    assert "Against it (broker 103)" in labels and "What would decide it" in labels
    text = render_text(reply)
    assert "kafka-reassign-partitions" not in text and "Broker 103 is gone" not in text
    assert "unclean.leader.election.enable: true" not in text


async def test_status_names_the_registered_broker_nobody_can_reach():
    from action_fakes import FakePool

    from commands.registry import answer
    from framework.context import Context

    reply = (await answer("status", Context(live=FakePool(_cut_gateway())))).reply
    assert "broker 103 registered but unreachable" in reply.verdict, reply.verdict
    assert "2 partition(s) it leads are down to an ISR of 103 alone" in reply.verdict
    assert any(e.label == "Broker 103 listener" and e.status == "bad" for e in reply.evidence)


# Recorded on the lab cluster (one-dir-halt, issue 27 finding 4): the partition folders of
# lab-one-dir-halt were removed under broker 102, its only log dir, while a producer wrote; the next
# segment roll failed and 102 logged "Shutdown broker because all log dirs in .../node-102/data have
# failed" and halted. From outside: 102 not registered, its port refusing, out of all three ISRs.
_HALTED_PARTS = [
    (101, [101, 102, 103], [101, 103]),
    (103, [103, 101, 102], [103, 101]),
    (101, [102, 101, 103], [101, 103]),
]


def _halted_gateway():
    from action_fakes import FakeGateway

    from live.probe import ProbeResult

    class Halted(FakeGateway):
        async def broker_liveness(self, broker_ids):
            return {
                b: ProbeResult("127.0.0.1", 16090 + b % 100, "refused", 0.001)
                if b == 102
                else ProbeResult("127.0.0.1", 16090 + b % 100, "answers", 0.01)
                for b in broker_ids
            }

    return Halted(brokers=(101, 103), topics={"lab-one-dir-halt": _HALTED_PARTS})


async def test_a_broker_whose_process_is_gone_may_have_crashed_or_halted_on_failed_log_dirs():
    """The bot reads neither the broker's server.log nor, while it is down, its log dirs: it must
    say that a crash and a halt on failed log dirs look the same from here, name what decides it,
    and ask for that before anything moves 102's replicas away."""
    from action_fakes import FakePool

    from bot.render import render_text
    from commands.registry import answer
    from framework.context import Context

    reply = (await answer("why URP", Context(live=FakePool(_halted_gateway())))).reply
    assert reply.verdict.startswith("Broker 102 is gone (its port refuses connections"), reply.verdict
    assert "cannot be told from here" in reply.verdict
    assert "server.log" in reply.verdict and "OfflineLogDirectoryCount" in reply.verdict
    top, second = reply.diagnoses[:2]
    assert top.entry_id == "broker-loss" and top.undecided_with == ["Log-directory / disk failure"]
    assert second.entry_id == "log-dir-failure"
    assert second.why_ranked.startswith("undecided: cannot be told from here while broker 102 is down")
    # the first steps gather the deciding evidence; nothing moves data on a guess
    assert "server.log" in (top.mitigation[0].command or "")
    assert top.mitigation[1].command == (
        "kafka-log-dirs.sh --bootstrap-server <broker:9092> --describe --broker-list 102"
    )
    assert not any(s.confirmed_only or "kafka-reassign-partitions" in (s.command or "") for s in top.mitigation)
    assert any(e.label == "Why broker 102 stopped" for e in reply.evidence)
    text = render_text(reply)
    assert "Check first: Broker loss or Log-directory / disk failure" in text
    assert "kafka-reassign-partitions" not in text and "move its replicas to other brokers" not in text
    assert "  - Log-directory / disk failure: cannot be told from here while broker 102 is down: " in text
    assert "Log-directory / disk failure: no evidence points at it" not in text


async def test_why_offline_with_its_broker_down_leaves_the_cause_of_the_stop_open():
    from action_fakes import FakeGateway, FakePool

    from commands.registry import answer
    from framework.context import Context

    gw = FakeGateway(brokers=(101, 103), topics={"lab-one-dir-halt": [(None, [102], [102])]})
    reply = (await answer("why offline", Context(live=FakePool(gw)))).reply
    assert reply.severity == "critical"
    assert "cannot be told from here while it is down" in reply.verdict, reply.verdict
    ids = [d.entry_id for d in reply.diagnoses]
    assert ids[:3] == ["offline-partitions", "broker-loss", "log-dir-failure"], ids
    lost = reply.diagnoses[1]
    assert lost.undecided_with and not any(s.confirmed_only for s in lost.mitigation)


def test_a_hot_partition_over_an_unmeasured_median_gives_its_share_not_its_rate_as_skew():
    """Seen: `hot-partitions` on a 90/10 key split said 809x: the live fallback divided the hot
    partition's rate by max(median, 1) when the rest of the topic was under 1 record/s."""
    from diagnosis.metric_checks import LiveRates, hot_partition_findings

    rates = {("orders", 0): 809.0, **{("orders", p): 0.33 for p in range(1, 12)}}
    found = hot_partition_findings(LiveRates(rates, {("orders", 0): 101}, 3.0))
    assert "809x" not in found.verdict and "99.6% of the topic's writes" in found.verdict, found.verdict
    measured = {("orders", 0): 900.0, **{("orders", p): 10.0 for p in range(1, 12)}}
    assert "(90x)" in hot_partition_findings(LiveRates(measured, {}, 3.0)).verdict


def test_status_calls_an_open_transaction_whose_producer_went_quiet_a_problem_and_a_busy_one_a_notice():
    """Chaos trial 1129:6: a producer SIGKILLed mid-transaction, `status` said "Healthy" (a notice,
    "1 open transaction(s) within their timeout") while `why hanging transaction` said warning."""
    from diagnosis.active_findings import ActiveFindings, _txn_part

    quiet = ActiveFindings()
    _txn_part(TxnReport(open=[_txn(last_write_ms=NOW - 6_000)], now_ms=NOW), quiet)
    assert quiet.problems == [
        "1 open transaction(s) whose producer stopped writing hold read_committed consumers back on pay-0 "
        "(within the timeout: the coordinator aborts it at "
        + time.strftime("%H:%M:%S", time.gmtime(NOW / 1000 + 570))
        + " UTC)"
    ], quiet.problems
    assert not quiet.critical and not quiet.notices
    busy = ActiveFindings()
    _txn_part(TxnReport(open=[_txn(last_write_ms=NOW - 200)], now_ms=NOW), busy)
    assert busy.problems == [] and busy.notices == ["1 open transaction(s) within their timeout"]


def test_a_broker_that_answers_late_leads_the_produce_latency_answer():
    """Chaos trial 1129:7: broker 103 in a cpu cgroup at 5 % of a core; the split named leader 101's
    p99, all RemoteTimeMs (waiting on followers), and no cause."""
    from diagnosis.latency import latency_findings
    from diagnosis.produce_latency import held_by
    from live import exporters

    lines = "".join(
        f'kafka_network_requestmetrics_{part.lower()}{{quantile="0.99",request="Produce"}} {ms}\n'
        for part, ms in (
            ("TotalTimeMs", 1776),
            ("RequestQueueTimeMs", 5),
            ("LocalTimeMs", 9),
            ("RemoteTimeMs", 1755),
            ("ResponseQueueTimeMs", 3),
            ("ResponseSendTimeMs", 1),
        )
    )
    from diagnosis.latency import timer_series

    reading = exporters.Reading(samples=exporters.parse(lines, 101, timer_series()))
    found = held_by(latency_findings(reading), [103], [])
    assert [e for e, _ in found.lead][:2] == ["starved-broker", "gc-pauses"]
    assert found.verdict.startswith("Broker 103 answers far later than the other brokers, or not at all"), found.verdict
    assert "The leaders' Produce split agrees: they wait on followers." in found.verdict
    assert found.undecided is not None and found.undecided.steps[0].command == "why starved broker"


async def test_status_probes_answering_brokers_again_and_keeps_the_slowest_answer():
    """Chaos trial 2911:42: broker 102 at 5 % of a core answered one probe promptly and `status`
    said Healthy; its second or third probe, landing outside its cgroup's slice, is slow."""
    from commands.status import PROBE_ROUNDS, _liveness

    rounds = iter(
        [
            {101: 0.002, 102: 0.05, 103: None},  # 103: refused (dead), not probed again
            {101: 0.003, 102: 1.2},
            {101: 0.002, 102: 0.04},
        ]
    )
    asked: list[list[int]] = []

    class Gw:
        async def broker_liveness(self, ids):
            asked.append(sorted(ids))
            times = next(rounds)
            return {
                b: ProbeResult("127.0.0.1", 9000 + b, "answers", times[b])
                if times[b] is not None
                else ProbeResult("127.0.0.1", 9000 + b, "refused", 0.001, "connection refused")
                for b in ids
            }

    out = await _liveness(Gw(), [101, 102, 103])  # type: ignore[arg-type]
    assert PROBE_ROUNDS == 3 and asked == [[101, 102, 103], [101, 102], [101, 102]]
    assert out[102].seconds == 1.2 and out[101].seconds == 0.003 and out[103].state == "refused"
