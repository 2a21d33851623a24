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


# ---- running on two workers (scripts/test.sh: pytest-xdist, --dist loadgroup) -------------------------
# A worker is a process with its own session fixtures, so each test that shares a real resource
# (fixed ports, a cluster folder, an in-process Spark) must run on the worker that holds it: every
# module is put in the group of the heaviest resource any of its tests uses, and a group never
# leaves its worker. Groups are handed out in the order below (--no-loadscope-reorder), longest
# first, so the lab's waits on the broker's own clocks overlap the shared cluster's tests instead
# of following them; modules with no shared resource fill in on whichever worker is free.
MODULE_GROUPS = {  # modules that start clusters or processes of their own, not through a fixture
    "lab/test_lab_standard.py": "lab-standard",  # own cluster on KBOT_LAB_PORT_BASE
    "lab/test_lab_quorum.py": "lab-quorum",  # own cluster on KBOT_LAB_QUORUM_PORT_BASE
    "test_lake_connect_process.py": "spark-connect",  # its own pytest process with Connect servers
}
FIXTURE_GROUPS = (  # (fixture in a test's closure, group), heaviest first
    ("secure_kafka_cluster", "secure"),  # two clusters of tests/secure, package scope
    ("kafka_cluster", "kafka"),  # the shared test cluster (its tests may use Spark too)
    ("spark", "spark"),  # the in-process SparkSession
)
GROUP_ORDER = ("lab-standard", "kafka", "spark", "spark-connect", "secure", "lab-quorum")


def resource_group(item: pytest.Item) -> str | None:
    """The group of the one shared resource this test needs, or None."""
    rel = item.path.relative_to(Path(__file__).parent).as_posix()
    if rel in MODULE_GROUPS:
        return MODULE_GROUPS[rel]
    names = set(getattr(item, "fixturenames", ()))
    return next((group for fixture, group in FIXTURE_GROUPS if fixture in names), None)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items):
    needs: dict[Path, set[str]] = {}
    for item in items:
        needs.setdefault(item.path, set()).add(resource_group(item))
    precedence = (*MODULE_GROUPS.values(), *(group for _fixture, group in FIXTURE_GROUPS))
    module_group = {path: next((g for g in precedence if g in groups), None) for path, groups in needs.items()}
    for item in items:
        if module_group[item.path] is not None:
            item.add_marker(pytest.mark.xdist_group(module_group[item.path]))
    if config.getvalue("dist") == "loadgroup":

        def rank(item: pytest.Item) -> int:
            group = module_group[item.path]
            return GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)

        items[:] = sorted(items, key=rank)  # stable: modules keep their own order inside a group


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
