"""Shared fixtures: one real local Kafka cluster per test run (started on first use, healed after
each test that used it, removed at the end), one local SparkSession per run, for every folder
of tests that needs them, and an environment that means the same on every machine."""

import os
import sys
from pathlib import Path

import pytest

from localkafka.testing import kafka_autoheal, kafka_cluster  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tools/ (test and benchmark tooling) is not installed with the bot
    sys.path.insert(0, str(ROOT))

# The test harness's own settings, kept from the caller's environment: which ports and folders this
# run's clusters use (several people run suites on one machine), where the downloaded jars are,
# whether the knowledge base's seed files must be present, golden-file updates.
HARNESS_PREFIXES = ("KBOT_TEST_", "KBOT_LAB_")
HARNESS_VARS = frozenset({"KBOT_REQUIRE_SEEDS", "KBOT_SEEDS_DIR", "KBOT_CACHE_DIR", "KBOT_UPDATE_GOLDEN"})


def is_bot_setting(name: str) -> bool:
    """A variable that configures the bot (a cluster, Slack, the state folders), not the harness."""
    return name.startswith(("KBOT_", "SLACK_")) and not name.startswith(HARNESS_PREFIXES) and name not in HARNESS_VARS


@pytest.fixture(scope="session", autouse=True)
def hermetic_environment(tmp_path_factory):
    """No test sees the developer's bot configuration: KBOT_BOOTSTRAP pointing at a dev cluster, Slack
    tokens, an RBAC file, a state folder. Tests (and the processes they start with os.environ) set
    what they need; the state root defaults to a folder of this run, never ~/.kbot."""
    home = tmp_path_factory.mktemp("kbot-home")
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if is_bot_setting(n)]:
            mp.delenv(name)
        mp.setenv("KBOT_HOME", str(home))
        mp.setenv("KBOT_STATE_DIR", str(home))
        yield


@pytest.fixture(scope="session")
def spark():
    from lake.spark import build_session

    session = build_session(
        "local[2]",
        app_name="kbot-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.sql.ansi.enabled": "true",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
