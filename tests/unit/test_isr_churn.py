"""ISR churn (issue 27): a broker that keeps being fenced and coming back is back in every ISR in
most snapshots; `why URP` must still see it, from the leaders' ISR meters and the controller's view
(diagnosis.rules.isr_churn, diagnosis/isr_churn.py), and never answer "no URP, all fine"."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from action_fakes import FakeGateway, FakePool

from bot.render import render_text
from commands.registry import answer
from diagnosis import isr_churn, observations
from diagnosis.rules import ChurnFacts, IsrMeters, preferred_leadership
from diagnosis.rules import isr_churn as churn_rule
from framework.context import Context
from live import exporters

REGISTERED = frozenset({101, 102, 103})
RULE = {"min_rejoins_per_s": 0.05, "controller_share": 0.2, "late_heartbeat_ms": 3000.0}


def _facts(**kw) -> ChurnFacts:
    base = {
        "meters": {101: IsrMeters(0.15, 0.0), 102: IsrMeters(0.1, 0.0), 103: IsrMeters(0.0, 0.0)},
        "preferred": {101: (2, 2), 102: (2, 3), 103: (2, 0)},
    }
    return ChurnFacts(**{**base, **kw})


def test_rejoins_without_leader_shrinks_are_fencing_and_name_the_broker_that_lost_its_leaderships():
    f = churn_rule(_facts(), REGISTERED, **RULE)
    assert f is not None
    assert (f.cause, f.broker, f.named_by) == ("gc-pauses", 103, "lost-leadership")
    assert f.leaders == (101, 102) and f.rejoins_per_s == pytest.approx(0.25)


def test_no_churn_below_the_runbook_threshold():
    quiet = {101: IsrMeters(0.01, 0.0), 102: IsrMeters(0.02, 0.0)}
    assert churn_rule(_facts(meters=quiet), REGISTERED, **RULE) is None


def test_what_the_controller_sees_now_names_the_broker_before_the_leaderships():
    f = churn_rule(_facts(fenced=frozenset({102})), REGISTERED, **RULE)
    assert f is not None and (f.broker, f.named_by, f.cause) == (102, "fenced", "gc-pauses")
    f = churn_rule(_facts(heartbeat_age_ms={101: 200.0, 102: 300.0, 103: 3500.0}), REGISTERED, **RULE)
    assert f is not None and (f.broker, f.named_by) == (103, "heartbeat")
    # a silent exporter names a broker only when nothing steadier does (a busy host's exporter is slow too)
    f = churn_rule(_facts(silent=frozenset({101})), REGISTERED, **RULE)
    assert f is not None and (f.broker, f.named_by) == (103, "lost-leadership")
    leading = {101: (2, 2), 102: (2, 2), 103: (2, 2)}
    f = churn_rule(_facts(silent=frozenset({103}), preferred=leading), REGISTERED, **RULE)
    assert f is not None and (f.broker, f.named_by) == (103, "silent")


def test_leaders_dropping_a_lagging_follower_is_a_slow_follower():
    meters = {101: IsrMeters(0.2, 0.18), 102: IsrMeters(0.1, 0.1)}
    f = churn_rule(_facts(meters=meters, out_of_isr=frozenset({103})), REGISTERED, **RULE)
    assert f is not None and (f.cause, f.broker, f.named_by) == ("slow-follower", 103, "out-of-isr")


def test_no_broker_is_named_without_grounds():
    f = churn_rule(_facts(preferred={101: (1, 1), 102: (1, 1), 103: (1, 1)}), REGISTERED, **RULE)
    assert f is not None and f.broker is None and f.cause == "gc-pauses"


def test_preferred_leadership_counts_the_first_replica():
    from diagnosis.rules import PartitionState

    parts = [
        PartitionState("t", 0, 101, (101, 102, 103), (101, 102, 103)),
        PartitionState("t", 1, 101, (103, 101, 102), (101, 102, 103)),
        PartitionState("t", 2, 102, (102, 103, 101), (101, 102, 103)),
    ]
    assert preferred_leadership(parts) == {101: (1, 1), 103: (1, 0), 102: (1, 1)}


# ---- `why URP` on the in-memory gateway, the exporters' reading faked ------------------------------

# Broker 103 is back in every ISR; it is the preferred leader of orders-2 but leads nothing.
LAYOUT = {
    "orders": [
        (101, [101, 102, 103], [101, 102, 103]),
        (102, [102, 103, 101], [101, 102, 103]),
        (101, [103, 101, 102], [101, 102, 103]),
    ]
}


def _exposition(
    expands: float, shrinks: float = 0.0, b103_state: int = 30, b103_age: float = 150, total: float = 100.0
) -> dict[int, str]:
    def broker(rate: float, shrink: float) -> str:
        return (
            f"kafka_server_replicamanager_isrexpandspersec_oneminuterate {rate}\n"
            f"kafka_server_replicamanager_isrexpandspersec_total {total if rate else 0.0}\n"
            f"kafka_server_replicamanager_isrshrinkspersec_oneminuterate {shrink}\n"
        )

    controller = "kafka_controller_kafkacontroller_activecontrollercount 1.0\n" + "".join(
        f'kafka_controller_kafkacontroller_brokerregistrationstate{{broker="{b}"}} {s}\n'
        f'kafka_controller_kafkacontroller_timesincelastheartbeatreceivedms{{broker="{b}"}} {a}\n'
        for b, s, a in ((101, 30, 120), (102, 30, 80), (103, b103_state, b103_age))
    )
    return {1: controller, 101: broker(expands, shrinks), 102: broker(expands, shrinks), 103: broker(0.0, 0.0)}


class MeteredGateway(FakeGateway):
    config = type(
        "FakeConfig", (), {"name": "fake", "metrics_urls": {n: f"http://127.0.0.1:1/{n}" for n in (1, 101, 102, 103)}}
    )()


@pytest.fixture
def exposition(monkeypatch):
    """Set ``exposition.pages`` (node -> text; a missing node times out) for the exporters' read."""

    class Pages:
        pages: dict[int, str] = {}
        names: frozenset[str] = frozenset()

    async def read(urls, names, timeout_s=exporters.SCRAPE_TIMEOUT_S):
        Pages.names = names
        reading = exporters.Reading()
        for node in urls:
            if node in Pages.pages:
                reading.samples += exporters.parse(Pages.pages[node], node, names)
            else:
                reading.failed[node] = f"no answer within {timeout_s:g} s (the JVM may be paused)"
                reading.silent.add(node)
        return reading

    monkeypatch.setattr(isr_churn.exporters, "read", read)
    return Pages


async def _why_urp(question: str = "why URP"):
    return (await answer(question, Context(live=FakePool(MeteredGateway(topics=LAYOUT))))).reply


def _age_memory(seconds: float) -> None:
    """Move the bot's remembered readings ``seconds`` into the past (the next answer comes later)."""
    ring = observations._RINGS["fake"]
    aged = [dataclasses.replace(o, at=o.at - seconds) for o in ring]
    ring.clear()
    ring.extend(aged)


async def test_a_broker_rejoining_every_isr_is_the_finding_not_health_and_one_reading_does_not_call_it_a_flap(
    exposition,
):
    """Issue 35: the one-minute rate alone cannot count returns (it also carries deleted topics'
    rejoins: seen as 25 "returns" of a broker that stalled once), so the first answer says "maybe more
    than once" and what decides; the next counts the rejoins between the two readings."""
    exposition.pages = _exposition(expands=0.12)
    reply = await _why_urp()
    assert reply.severity == "warning" and reply.diagnoses[0].entry_id == "gc-pauses"
    assert reply.verdict.startswith(
        "Broker 103 dropped out of the ISRs and came back, maybe more than once: no partition is "
    ), reply.verdict
    assert "What decides it: ask again in a minute" in reply.verdict
    assert "Do not reassign its replicas" in reply.verdict
    rows = {e.label: e for e in reply.evidence}
    assert (
        rows["Under-replicated partitions"].value.startswith("0 of 3")
        and rows["Under-replicated partitions"].status == "ok"
    )
    assert rows["ISR rejoins (IsrExpandsPerSec)"].value.startswith("14.4 a minute")
    assert rows["Broker 103 leadership"].value == "leads 0 of the 1 partition(s) it is the preferred leader of"
    assert rows["Broker 103 at the controller"].value == "not fenced, last heartbeat 0.1 s ago"
    assert rows["Broker 103 drop-outs"].value.startswith("about 4.8 ("), rows["Broker 103 drop-outs"].value
    text = render_text(reply)
    assert "kafka-reassign-partitions" not in text and "reassigning" not in text.split("Evidence")[0], text[:1500]

    # 40 s later the leaders counted 3 rejoins each (6 = twice the 3 replicas broker 103 follows): a flap
    _age_memory(40)
    exposition.pages = _exposition(expands=0.12, total=103.0)
    reply = await _why_urp()
    assert reply.verdict.startswith("Broker 103 keeps dropping out of the ISRs and coming back: no partition is "), (
        reply.verdict
    )
    drops = {e.label: e for e in reply.evidence}["Broker 103 drop-outs"]
    # two returns counted since, after the drop-out the first reading's meters showed
    assert drops.value.startswith("about 3.0 (its replicas rejoined 2.0 time(s) over in the 40 s"), drops.value
    assert drops.status == "bad"
    # no GC was read: what stalls it comes first, not the runbook's heap tuning and restart
    first = reply.diagnoses[0].mitigation[0].text
    assert first.startswith("Find what stalls broker 103") and "G1GC" not in first, first


async def test_no_rejoins_counted_since_is_one_stall_and_one_more_return_is_a_flap(exposition):
    exposition.pages = _exposition(expands=0.12)
    await _why_urp()  # the meters show it dropped out and came back
    _age_memory(40)
    exposition.pages = _exposition(expands=0.12, total=100.0)  # nothing rejoined since
    reply = await _why_urp()
    assert reply.verdict.startswith("Broker 103 dropped out of the ISRs and came back once, it seems"), reply.verdict
    assert reply.severity == "warning" and reply.diagnoses[0].entry_id == "gc-pauses"
    _age_memory(40)
    # 3 rejoins: its 3 replicas once more (seen in the lab: 1.2 returns counted over 31 s of a
    # broker stopped every 15 s, which a restart 217 s before had been said to explain)
    exposition.pages = _exposition(expands=0.12, total=101.5)
    reply = await _why_urp()
    assert reply.verdict.startswith("Broker 103 keeps dropping out"), reply.verdict


async def test_readings_too_close_together_do_not_count(exposition):
    exposition.pages = _exposition(expands=0.12)
    await _why_urp()
    _age_memory(5)  # a broker that stalls every 10 s may well not have in 5 s
    exposition.pages = _exposition(expands=0.12, total=100.0)
    reply = await _why_urp()
    assert "maybe more than once" in reply.verdict, reply.verdict


async def test_the_same_churn_answers_why_isr_shrinks(exposition):
    exposition.pages = _exposition(expands=0.12)
    reply = await _why_urp("why IsrShrinksPerSec")
    assert reply.severity == "warning" and reply.diagnoses[0].entry_id == "gc-pauses", reply.verdict


async def test_a_stopped_broker_still_in_the_isrs_is_named_by_its_silent_exporter(exposition):
    exposition.pages = _exposition(expands=0.12)
    del exposition.pages[103]  # its JVM is stopped: its exporter does not answer
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}  # it leads its own
    reply = (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply
    assert reply.diagnoses[0].entry_id == "gc-pauses"
    assert "broker 103's metrics endpoint, which runs inside its JVM, does not answer" in reply.verdict


async def test_a_fenced_broker_is_named_by_the_controller(exposition):
    exposition.pages = _exposition(expands=0.12, b103_state=10, b103_age=4200)
    reply = await _why_urp()
    assert "the controller has broker 103 fenced right now" in reply.verdict
    assert {e.label: e.value for e in reply.evidence}[
        "Broker 103 at the controller"
    ] == "fenced, last heartbeat 4.2 s ago"


async def test_no_churn_is_still_no_urp(exposition):
    exposition.pages = _exposition(expands=0.0)
    reply = await _why_urp()
    assert (reply.severity, reply.verdict) == ("ok", "No under-replicated partitions right now.")


async def test_unreadable_exporters_leave_the_snapshot_answer_but_not_an_ok(exposition):
    """Issue 35: the snapshot's answer stands, but with the exporters unread it is not a clean
    bill of health: "can't tell", naming what did not answer."""
    exposition.pages = {}
    reply = await _why_urp()
    assert reply.severity == "unknown", reply.verdict
    assert reply.verdict.startswith("Can't tell: exporter "), reply.verdict
    assert reply.verdict.endswith("No under-replicated partitions right now."), reply.verdict
    assert reply.sources and all(r.state != "read" for r in reply.sources if r.source.startswith("exporter ")), (
        reply.sources
    )
    assert any(n.startswith("Whether ISRs keep churning was not checked: no exporter answered") for n in reply.notes)


async def test_a_cluster_without_metrics_endpoints_is_not_read():
    reply = (await answer("why URP", Context(live=FakePool(FakeGateway(topics=LAYOUT))))).reply
    assert (reply.severity, reply.verdict) == ("ok", "No under-replicated partitions right now.")


async def test_a_recent_start_is_said_and_decides_nothing_until_the_rejoins_are_counted(exposition):
    """Issue 35: a restart explains one return. Rejoins at 4.8 returns' worth 120 s after it are more
    than one return leaves by then (the rate falls by e a minute): the answer says the restart and
    what decides; counted between two readings, no new return is a recovery, one more a flap."""
    import re
    import time

    started = f"process_start_time_seconds {time.time() - 120:.3f}\n"

    async def ask(total: float):
        exposition.pages = _exposition(expands=0.12, total=total)
        exposition.pages[103] += started
        return await _why_urp()

    reply = await ask(100.0)
    assert reply.severity == "warning" and "maybe more than once" in reply.verdict, reply.verdict
    # (seconds from the fake's start time to the answer: 120 and a little, on a busy machine)
    assert re.search(r"But its process started 1[23]\d s ago: if that was a restart", reply.verdict), reply.verdict
    assert re.match(r"started 1[23]\d s ago", {e.label: e.value for e in reply.evidence}["Broker 103 process"])

    _age_memory(40)
    reply = await ask(100.0)  # nothing rejoined since: the one drop-out the meters showed was the restart
    assert reply.severity == "info" and reply.verdict.startswith("Recovered: broker 103 (re)started 1"), reply.verdict
    _nothing_to_do_now(reply)

    _age_memory(40)
    reply = await ask(101.5)  # its 3 replicas once more, 200 s after the restart: not the restart's
    assert reply.diagnoses[0].entry_id == "gc-pauses" and reply.severity == "warning"
    assert reply.verdict.startswith("Broker 103 keeps dropping out"), reply.verdict
    assert "if that was a restart" not in reply.verdict  # counted, not a guess


async def test_a_broker_seen_down_then_restarted_that_rejoins_since_its_return_is_not_recovered(exposition):
    """Chaos trial 6464:10: the bot saw 103 down; 103 restarted 160 s ago and then flapped. The
    leaders' counters since held 1.4 returns' worth (under the 1.5 a catching-up restart may take),
    and the answer was "Recovered"; but their one-minute rate held 1.6 returns' worth a minute, where
    a return 160 s old leaves a fraction: the rejoins came after the restart's return."""
    import time

    down = {
        "orders": [
            (101, [101, 102, 103], [101, 102]),
            (102, [102, 103, 101], [101, 102]),
            (101, [103, 101, 102], [101, 102]),
        ]
    }

    async def seen_down_then_back(ago: float, started_s: float, rate: float, returns: float):
        observations._RINGS.pop("fake", None)
        exposition.pages = _exposition(expands=0.001, total=100.0)  # (a rate, so the counter is written)
        del exposition.pages[103]
        seen = (await answer("why URP", Context(live=FakePool(MeteredGateway(brokers=(101, 102), topics=down))))).reply
        assert seen.diagnoses[0].entry_id == "broker-loss", seen.verdict
        # with URP the answer did not wait for the rejoin counters: the reading gets them when read
        for _ in range(200):
            if observations._RINGS["fake"][-1].rejoins:
                break
            await asyncio.sleep(0.01)
        assert observations._RINGS["fake"][-1].rejoins == {101: 100.0, 102: 100.0}
        _age_memory(ago)
        # each of the two leaders counts half of the rejoins of 103's 3 follower replicas
        exposition.pages = _exposition(expands=rate, total=100.0 + returns * 3 / 2)
        exposition.pages[103] += f"process_start_time_seconds {time.time() - started_s:.3f}\n"
        return await _why_urp()

    # 1.4 returns' worth counted since; 0.04/s on each leader: 1.6 returns' worth a minute
    reply = await seen_down_then_back(177, 160, 0.04, 1.4)
    assert not reply.verdict.startswith("Recovered"), reply.verdict
    assert reply.severity == "warning" and reply.diagnoses[0].entry_id == "gc-pauses", reply.verdict

    # one return counted, the rate one return 70 s old may still show: the restart's, recovered
    reply = await seen_down_then_back(80, 70, 0.03, 1.0)
    assert reply.verdict.startswith("Recovered: broker 103 (re)started 7"), reply.verdict


async def test_several_silent_exporters_are_a_busy_host_and_name_nobody(exposition):
    exposition.pages = _exposition(expands=0.12)
    del exposition.pages[101], exposition.pages[103]  # two late: the host is busy, not one JVM stopped
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}
    reply = (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply
    # no broker named: the rate cannot be turned into one broker's returns, so nothing is decided
    # until the leaders' counters are read twice (it said "A broker keeps dropping out" before)
    assert reply.verdict.startswith("Replicas dropped out of the ISRs and came back, maybe more than once"), (
        reply.verdict
    )
    assert "no one broker stands out" in reply.verdict
    assert "What decides it: ask again in a minute" in reply.verdict


async def test_with_no_broker_named_the_second_reading_counts_every_leaders_rejoins(exposition):
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}  # 103 leads its own

    async def ask(total: float):
        exposition.pages = _exposition(expands=0.12, total=total)
        return (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply

    first = await ask(100.0)
    assert "maybe more than once" in first.verdict and "no one broker stands out" in first.verdict, first.verdict
    _age_memory(40)
    reply = await ask(100.0)  # not one rejoin since on either leader
    assert reply.verdict.startswith("Replicas dropped out of the ISRs and came back, but none has rejoined since "), (
        reply.verdict
    )
    _age_memory(40)
    reply = await ask(104.0)  # 4 on each of the two leaders
    assert reply.verdict.startswith(
        "Replicas are still dropping out of the ISRs and coming back: the leaders counted 8 more rejoin(s) in the 40 s"
    ), reply.verdict
    assert reply.severity == "warning"


def _nothing_to_do_now(reply) -> None:
    """A settled answer lists the causes as possibilities: no "Do now" steps (the cluster-start answer
    once said "Do now: Broker loss ... Bring the missing broker back" with every broker up)."""
    text = render_text(reply)
    assert reply.settled and "Possible causes if it comes back" in text and "Do now" not in text, text


def _started(pages: dict[int, str], seconds_ago: float) -> dict[int, str]:
    import time

    line = f"process_start_time_seconds {time.time() - seconds_ago:.3f}\n"
    return {n: text + line for n, text in pages.items()}


async def test_a_cluster_that_just_started_is_its_start_not_a_flap(exposition):
    """Seen on a restarted `scripts/run.sh` cluster: every broker 51 s old, 26 rejoins counted on
    broker 101 (36 follower replicas), a one-minute rate of 59 a minute because a meter's first tick
    sets it outright; it said "A broker keeps dropping out". The counters since the start hold no
    more than one join per follower replica: the start's."""
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}
    exposition.pages = _started(_exposition(expands=0.8, total=3.0), 51)  # 6 counted, 6 followers
    reply = (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply
    assert reply.severity == "info", reply.verdict
    assert reply.verdict.startswith(
        "No partition is under-replicated, and the ISR rejoins are the cluster's own start: every broker's process "
        "started 5"
    ), reply.verdict
    assert "counted 6 rejoin(s) since, no more than one per follower replica (6)" in reply.verdict
    _nothing_to_do_now(reply)


async def test_more_rejoins_than_a_start_makes_are_not_the_start(exposition):
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}
    exposition.pages = _started(_exposition(expands=0.8, total=5.0), 51)  # 10 counted: 6 followers
    reply = (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply
    assert reply.severity == "warning" and "cluster's own start" not in reply.verdict, reply.verdict


async def test_a_broker_named_in_a_young_cluster_is_not_the_start(exposition):
    exposition.pages = _started(_exposition(expands=0.8, total=1.0, b103_state=10, b103_age=4200), 51)
    reply = await _why_urp()
    assert reply.severity == "warning" and "the controller has broker 103 fenced right now" in reply.verdict
    # nor one stripped of its leaderships: a broker stopped again and again in a young cluster looks so
    exposition.pages = _started(_exposition(expands=0.8, total=1.0), 51)
    reply = await _why_urp()
    assert reply.severity == "warning" and "broker 103 leads none of the" in reply.verdict, reply.verdict


async def test_rejoins_counted_after_a_young_clusters_start_are_not_the_start(exposition):
    layout = {"orders": [*LAYOUT["orders"][:2], (103, [103, 101, 102], [101, 102, 103])]}

    async def ask(total: float):
        exposition.pages = _started(_exposition(expands=0.8, total=total), 80)
        return (await answer("why URP", Context(live=FakePool(MeteredGateway(topics=layout))))).reply

    assert (await ask(1.0)).severity == "info"
    _age_memory(40)
    reply = await ask(2.0)  # one more on each leader since the bot's reading: not the start's
    assert reply.severity == "warning", reply.verdict
    assert reply.verdict.startswith("Replicas are still dropping out"), reply.verdict


async def test_status_keeps_a_churn_warning_in_view_while_every_isr_is_full(exposition):
    """Chaos trial 2911:14: `why URP` warned that broker 103 keeps dropping out; `status` a moment
    later, between two stalls, said "Healthy". Until the next reading of the meters finds no churn
    (or 3 minutes pass), status says what the last one saw."""
    pool = FakePool(MeteredGateway(topics=LAYOUT))
    exposition.pages = _exposition(expands=0.12)
    assert (await answer("why URP", Context(live=pool))).reply.severity == "warning"
    status = (await answer("status", Context(live=pool))).reply
    assert status.severity == "warning", status.verdict
    assert status.verdict.startswith(
        "Not healthy: broker 103 was dropping out of the ISRs and coming back when `why URP` read the ISR meters"
    ), status.verdict
    _age_memory(40)
    exposition.pages = _exposition(expands=0.0)  # the next reading finds no churn: it is over
    assert (await answer("why URP", Context(live=pool))).reply.severity == "ok"
    assert (await answer("status", Context(live=pool))).reply.verdict.startswith("Healthy"), status.verdict
    _age_memory(40)
    exposition.pages = _exposition(expands=0.12, total=100.0)
    await answer("why URP", Context(live=pool))
    _age_memory(observations.CHURN_MEMORY_S + 1)  # and an old warning is not kept
    assert (await answer("status", Context(live=pool))).reply.verdict.startswith("Healthy")
