"""The runbook names the functions that gather its evidence (issue 12): every name it uses has a
function, and every function is bound to some entry. Rewording a triage step cannot change which
probe answers it, because the binding is by step number, not by matching the prose."""

from __future__ import annotations

from commands.triage import PROBES
from diagnosis.lake_evidence import LAKE_CHECKS
from diagnosis.runbook_checks import LIVE_CHECKS
from runbook_kb import default_kb

KB = default_kb()


def test_every_live_check_name_has_a_function_and_every_function_an_entry():
    named = {e.id: e.checks.live for e in KB.failure_modes.values() if e.checks.live}
    named |= {t.id: t.live for t in KB.topics.values() if t.live}  # a reference topic may lead with one too
    unknown = {eid: name for eid, name in named.items() if name not in LIVE_CHECKS}
    assert not unknown, f"entries name live checks that do not exist: {unknown}"
    unbound = set(LIVE_CHECKS) - set(named.values())
    assert not unbound, f"live checks no entry binds: {unbound}"


def test_every_lake_check_name_has_a_function_and_every_function_an_entry():
    named = {e.id: e.checks.lake for e in KB.failure_modes.values() if e.checks.lake}
    unknown = {eid: name for eid, name in named.items() if name not in LAKE_CHECKS}
    assert not unknown, f"entries name lake checks that do not exist: {unknown}"
    assert set(LAKE_CHECKS) == set(named.values()), (
        f"lake checks no entry binds: {set(LAKE_CHECKS) - set(named.values())}"
    )


def test_every_triage_probe_name_has_a_function_and_every_probe_a_step():
    used: set[str] = set()
    for entry in KB.failure_modes.values():
        for step, names in entry.checks.triage.items():
            assert 0 <= step < len(entry.triage), (entry.id, step)
            missing = set(names) - set(PROBES)
            assert not missing, f"{entry.id} step {step} names unknown probes {missing}"
            used |= set(names)
    assert set(PROBES) == used, f"probes no step binds: {set(PROBES) - used}"


def test_the_urp_entries_share_one_live_check():
    urp = {eid for eid, e in KB.failure_modes.items() if e.checks.live == "urp"}
    assert {"broker-loss", "slow-follower", "network-partition", "gc-pauses", "log-dir-failure"} == urp


def test_every_threshold_the_code_reads_is_a_number_in_the_kb_and_every_kb_threshold_is_read():
    from commands.triage import view
    from diagnosis import cold_reads, quorum_checks, thresholds

    read = {
        ("hot-partition", thresholds.HOT_SKEW_KEY),
        ("hot-partition", thresholds.HOT_MIN_RATE_KEY),
        ("broker-loss", view.THROTTLE_KEY),
        (cold_reads.ENTRY, cold_reads.RATE_KEY),
        (cold_reads.ENTRY, cold_reads.LAG_KEY),
        ("metadata-lag", quorum_checks.METADATA_STALE_KEY),
    }
    for entry, key in read:
        value = KB.failure_modes[entry].checks.thresholds.get(key)
        assert isinstance(value, (int, float)), f"{entry}: checks.thresholds.{key} missing or not a number"
    in_kb = {(e.id, k) for e in KB.failure_modes.values() for k in e.checks.thresholds}
    assert in_kb == read, f"thresholds in the KB that no code reads: {in_kb - read}"


def test_the_live_and_lake_checks_read_one_bound_each():
    """Handler saturation: the alert table's bounds (the lake takes the warning one for the window's
    mean); hot partitions: the hot-partition entry's skew and minimum rate, for live rates, the lake's
    ranking and the digest alike."""
    from diagnosis import thresholds

    assert (
        thresholds.handler_idle_saturated_below()
        == thresholds.alert_bounds("RequestHandlerAvgIdlePercent")["warning"][1]
    )
    rule = thresholds.hot_rule()
    assert (rule.skew, rule.min_rate) == (3.0, 20.0)
    assert rule.is_hot(30.0, 3.0) and not rule.is_hot(19.0, 10.0) and not rule.is_hot(100.0, None)
