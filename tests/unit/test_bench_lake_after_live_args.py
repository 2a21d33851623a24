"""scripts/bench_lake_after_live.py's options, its reading of an answer's lake part and its targets
(no cluster, no Spark: the figures are the benchmark's to measure, not a test's)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from framework.reply import Evidence, Reply

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(SCRIPTS))  # it imports bench_freshness's load sampler and percentile
    try:
        spec = importlib.util.spec_from_file_location("bench_lake_after_live", SCRIPTS / "bench_lake_after_live.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclass resolves its annotations through it
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_lake_after_live", None)
        sys.path.remove(str(SCRIPTS))


def test_the_defaults_are_the_issues_ten_minutes_asked_every_15_s(bench):
    a = bench.parse_args([])
    assert (a.after_s, a.every_s, a.kill, a.port_base, a.json) == (600.0, 15.0, 102, 22090, False)


@pytest.mark.parametrize(
    "argv",
    [["--after-s", "0"], ["--every-s", "-1"], ["--warmup-s", "-5"], ["--kill", "104"], ["--port-base", "32760"]],
)
def test_impossible_options_are_refused(bench, argv):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2


def test_a_lake_timeout_note_counts_as_a_timeout_and_a_missing_lake_part(bench):
    live = Evidence("Under-replicated partitions", "6 of 18", "live: metadata", "bad")
    fresh = Evidence("Metric lake", "data to 07:01:02 UTC, 9 s before this answer", "lake: freshness")
    came = Reply(title="Why URP?", evidence=[live, fresh, Evidence("URP", "flat 6", "lake: urp_trend", "bad")])
    assert bench.judge(came) == (False, False, None, fresh.value)
    note = "Metric lake: The metric lake's window did not answer within 30 s. This answer has no lake evidence."
    timed_out = Reply(title="Why URP?", evidence=[live], notes=[note])
    assert bench.judge(timed_out) == (True, True, note, None)
    never = Reply(title="Why URP?", evidence=[live], notes=["The metric lake's evidence could not be added."])
    assert bench.judge(never)[:2] == (False, True)


def _ask(bench, gap, load, missing=False):
    return bench.Ask("after", 10.0, 1.0, gap, True, missing, missing, load, "v", None, None)


def test_the_target_that_applies_follows_the_load_and_a_missing_part_fails_it(bench):
    idle = bench.summarize([_ask(bench, 1.5, 1.0), _ask(bench, 0.2, 1.2)], [1.0, 1.2], cores=2)
    assert (idle["gap_max_s"], idle["targets"]["applies"], idle["targets"]["gap_met"]) == (1.5, "idle", True)
    busy = bench.summarize([_ask(bench, 4.0, 15.0)], [14.0, 16.0], cores=2)
    assert (busy["targets"]["applies"], busy["targets"]["gap_met"], busy["targets"]["gap_idle_met"]) == (
        "load ~15",
        True,
        False,
    )
    lost = bench.summarize([_ask(bench, 0.1, 1.0), _ask(bench, 30.0, 1.0, missing=True)], [1.0], cores=2)
    assert lost["gap_max_s"] == 0.1  # the gap of the parts that came
    assert (lost["timeouts"], lost["targets"]["gap_met"], lost["targets"]["no_timeouts_met"]) == (1, False, False)
