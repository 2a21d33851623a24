"""The chaos campaign's draw and judge, without a cluster: the same seed draws the same trials on
every machine, composed faults never share a broker nor take two away, and the judge fails an
answer that says all is well, leads with a cause not in place, forgets what was hit, or opens with
a step that moves data on a guess."""

import pytest

from lab.chaos import BROKERS, Expectation, draw_trial, judge_trial, runnable_modes


def test_the_same_seed_draws_the_same_campaign():
    a = [draw_trial(7, i) for i in range(30)]
    b = [draw_trial(7, i) for i in range(30)]
    assert [(t.shape, [f.name for f in t.faults], t.recovering, t.delay_s) for t in a] == [
        (t.shape, [f.name for f in t.faults], t.recovering, t.delay_s) for t in b
    ]
    other = [draw_trial(8, i) for i in range(30)]
    assert [[f.name for f in t.faults] for t in a] != [[f.name for f in t.faults] for t in other]


def test_a_campaign_draws_every_shape_and_brokers_at_random():
    trials = [draw_trial(1, i) for i in range(200)]
    assert {t.shape for t in trials} == {"single", "pair", "recovery"}
    killed = {f.name for t in trials for f in t.faults if f.name.startswith(("kill-", "pause-"))}
    assert {f"kill-{b}" for b in BROKERS} <= killed  # the broker is any broker, not the lab's fixed one
    assert len({f.name for t in trials for f in t.faults}) >= len(runnable_modes()) // 2


@pytest.mark.parametrize("seed", range(5))
def test_composed_faults_never_share_a_broker_nor_take_two_away(seed):
    for i in range(100):
        t = draw_trial(seed, i)
        if t.shape == "pair":
            first, second = t.faults
            assert not (first.brokers & second.brokers), (first.name, second.name)
            assert not (first.takes_broker and second.takes_broker), (first.name, second.name)
        if t.shape == "recovery":
            assert t.recovering not in t.faults[0].brokers


def _reply(entry, severity="warning", verdict="Broker 102 is gone", first_step=None):
    steps = [first_step] if first_step else [{"text": "Bring it back", "destroys_data": False, "confirmed_only": False}]
    return {
        "severity": severity,
        "verdict": verdict,
        "evidence": [],
        "diagnoses": [{"entry_id": entry, "mitigation": steps}],
    }


def test_the_judge_passes_a_right_answer_and_fails_each_wrong_one():
    want = [Expectation("why URP")]
    right = judge_trial({"broker-loss"}, want, ["102"], [("why URP", _reply("broker-loss")), ("status", _reply(None))])
    assert right.passed, right.failures()

    wrong_top = judge_trial({"broker-loss"}, want, ["102"], [("why URP", _reply("gc-pauses"))])
    assert not wrong_top.passed and wrong_top.failures() == ["top-1 gc-pauses"]

    unnamed = judge_trial({"broker-loss"}, want, ["103"], [("why URP", _reply("broker-loss"))])
    assert unnamed.named_missing == ["103"]

    all_clear = judge_trial(
        {"broker-loss"},
        want,
        ["102"],
        [("why URP", _reply("broker-loss")), ("status", _reply(None, "ok", "Healthy: 3 brokers"))],
    )
    assert all_clear.said_ok == ["status"] and not all_clear.passed

    moves = {"text": "Move its replicas away", "destroys_data": False, "confirmed_only": True}
    guess = judge_trial({"broker-loss"}, want, ["102"], [("why URP", _reply("slow-follower", first_step=moves))])
    assert guess.harmful and not guess.passed
    # the same step for the cause that is in place is not a guess
    assert not judge_trial(
        {"broker-loss"}, want, ["102"], [("why URP", _reply("broker-loss", first_step=moves))]
    ).harmful


def test_a_fault_judged_by_its_verdict_and_two_faults_either_cause_leading():
    stopped = Expectation("lag g1", verdict="its consumers stopped")
    reply = {"severity": "warning", "verdict": "Group g1: its consumers stopped", "evidence": [], "diagnoses": []}
    assert judge_trial(set(), [stopped], [], [("lag g1", reply)]).top1_ok
    pair = [Expectation("why URP"), Expectation("why hanging transaction")]
    answers = [("why URP", _reply("broker-loss")), ("why hanging transaction", _reply("broker-loss"))]
    assert judge_trial({"broker-loss", "hanging-transaction"}, pair, [], answers).top1_ok


def test_status_may_call_the_cluster_healthy_only_when_the_fault_is_a_clients():
    healthy = {"severity": "ok", "verdict": "Healthy: 3 brokers", "evidence": [], "diagnoses": []}
    answers = [("lag g1", _reply("rebalance-storm")), ("status", healthy)]
    client = judge_trial({"rebalance-storm"}, [Expectation("lag g1")], [], answers, status_must_show=False)
    assert client.passed, client.failures()
    broker = judge_trial({"rebalance-storm"}, [Expectation("lag g1")], [], answers, status_must_show=True)
    assert broker.said_ok == ["status"]
