"""Fixtures of the Spark Connect tests (helpers: connectkit.py).

pyspark refuses a Spark Connect session in a process that already runs an in-process Spark
(SESSION_ALREADY_EXIST), and the rest of the suite shares one in-process session: these tests are
collected only in a pytest process of their own, which tests/test_lake_connect_process.py starts.
"""

from __future__ import annotations

import os

import pytest

CHILD_ENV = "KBOT_TEST_CONNECT_PROCESS"
if os.environ.get(CHILD_ENV) != "1":
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="module")
def lake_env(tmp_path_factory):
    """A lake dir of this module, and the environment a bot process needs to use it."""
    lake_dir = tmp_path_factory.mktemp("lake")
    env = {k: v for k, v in os.environ.items() if k != "KBOT_SPARK_MASTER"}
    env.update({"KBOT_LAKE_DIR": str(lake_dir), "KBOT_LAKE": "1"})
    return lake_dir, env
