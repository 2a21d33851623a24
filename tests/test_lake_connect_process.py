"""The Spark Connect tests (tests/lake_connect) in a pytest process of their own: pyspark refuses a
Connect session in a process that already runs the in-process Spark the rest of the suite shares."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.spark
def test_the_spark_connect_tests_pass_in_a_process_of_their_own():
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-ra", "tests/lake_connect"],
        cwd=ROOT,
        env={**os.environ, "KBOT_TEST_CONNECT_PROCESS": "1"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 5 and "skipped" not in summary, tail
