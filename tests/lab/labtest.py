"""Shared by the lab's cluster tests: run each mode once per module, keep the result for both of
its tests (reproduced / answered right), and write it as JSON for scripts/lab_report.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.runner import run_mode, unavailable

RESULTS_DIR = Path(os.environ.get("KBOT_LAB_RESULTS", "/tmp/kbot-lab-results"))


def keep_clusters() -> bool:
    return os.environ.get("KBOT_LAB_KEEP_CLUSTER", "") not in ("", "0", "false")


class ModeRuns:
    """One run per mode (inject, wait, ask, judge, heal), shared by the tests of a module."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.results: dict[str, dict] = {}

    def result(self, mode) -> dict:
        if mode.name not in self.results:
            why_not = unavailable(mode, self.cluster)
            if why_not:
                pytest.skip(f"{mode.name}: {why_not}")
            res = run_mode(mode, self.cluster, heal=True)
            RESULTS_DIR.mkdir(parents=True, exist_ok=True)
            (RESULTS_DIR / f"{mode.name}.json").write_text(json.dumps(res, indent=1, default=str))
            self.results[mode.name] = res
        return self.results[mode.name]


def check_reproduced(res: dict) -> None:
    assert res["error"] is None, res["error"]
    assert res["reproduced"], f"{res['mode']}: symptom not seen"
    assert res["healed"]


def check_answer(res: dict) -> None:
    if not res["reproduced"]:
        pytest.fail(f"{res['mode']} was not reproduced ({res['error']}): nothing to judge")
    j = res["judgement"]
    first = res["answers"][0]
    assert j["passed"], (
        f"'{first['question']}' answered [{first['reply']['severity']}] "
        f"{first['reply']['verdict']!r}; wrong: {'; '.join(j['failures'])}"
    )


def wrong_answer(reason: str):
    """The bot's answer for this mode is known wrong (the lead fixes the product): strict, so the
    test fails as soon as the answer becomes right, telling us to drop the mark."""
    return pytest.mark.xfail(strict=True, reason=reason)
