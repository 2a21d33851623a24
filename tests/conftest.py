"""Shared fixtures: one real local Kafka cluster per test run (started on first use, healed after
each test that used it, removed at the end), one local SparkSession per run, for every folder
of tests that needs them, and an environment that means the same on every machine."""

import json
import os
import tempfile
from pathlib import Path

import pytest

from localkafka.testing import kafka_autoheal, kafka_cluster  # noqa: F401

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


@pytest.fixture(autouse=True)
def fresh_bot_memory():
    """Each test starts with an empty memory of what the bot observed (diagnosis/observations.py):
    in one test process, a broker another test killed would otherwise read as "recovering" here."""
    from diagnosis import observations

    observations.forget()
    yield


# ---- running on two workers (scripts/test.sh: pytest-xdist) --------------------------------------------
# A worker is a process with its own session fixtures, so each test that shares a real resource
# (fixed ports, a cluster folder, an in-process Spark) must run on the worker that holds it: every
# module is put in the group of the heaviest resource any of its tests uses, and a group is one unit
# of work that never leaves its worker. Groups are handed out in GROUP_ORDER, longest first, so the
# lab's waits on the brokers' own clocks overlap the shared cluster's tests instead of following
# them; modules with no shared resource fill in on whichever worker is free.
MODULE_GROUPS = {  # modules that start clusters or processes of their own, not through a fixture
    "lab/test_lab_standard.py": "lab-standard",  # own cluster on KBOT_LAB_PORT_BASE
    "lab/test_lab_quorum.py": "lab-quorum",  # own cluster on KBOT_LAB_QUORUM_PORT_BASE
    "test_lake_connect_process.py": "spark-connect",  # its own pytest process with Connect servers
    # `kbot run`'s own dev cluster on KBOT_TEST_SECOND_PORT_BASE: beside tests/secure's second cluster,
    # never at the same time (that one is package-scoped, and a group stays on one worker)
    "kafka/test_run_prompt_first.py": "secure",
}
FIXTURE_GROUPS = (  # (fixture in a test's closure, group), heaviest first
    ("secure_kafka_cluster", "secure"),  # the two clusters of tests/secure, package scope
    ("kafka_cluster", "kafka"),  # the shared test cluster (its tests may use Spark too)
    ("spark", "spark"),  # the in-process SparkSession
)
GROUP_ORDER = ("lab-standard", "kafka", "spark", "spark-connect", "secure", "lab-quorum")
GROUPS_FILE = "kbot_test_groups_file"  # workerinput key: where the workers write {test id: group}


def resource_group(item: pytest.Item) -> str | None:
    """The group of the one shared resource this test needs, or None."""
    rel = item.path.relative_to(Path(__file__).parent).as_posix()
    if rel in MODULE_GROUPS:
        return MODULE_GROUPS[rel]
    names = set(getattr(item, "fixturenames", ()))
    return next((group for fixture, group in FIXTURE_GROUPS if fixture in names), None)


def module_groups(items: list[pytest.Item]) -> dict[Path, str | None]:
    needs: dict[Path, set[str | None]] = {}
    for item in items:
        needs.setdefault(item.path, set()).add(resource_group(item))
    precedence = (*MODULE_GROUPS.values(), *(group for _fixture, group in FIXTURE_GROUPS))
    return {path: next((g for g in precedence if g in groups), None) for path, groups in needs.items()}


def pytest_collection_modifyitems(config, items):
    workerinput = getattr(config, "workerinput", None)  # set in an xdist worker only
    if not workerinput or GROUPS_FILE not in workerinput:
        return
    group_of = module_groups(items)

    def rank(item: pytest.Item) -> int:
        group = group_of[item.path]
        return GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)

    items[:] = sorted(items, key=rank)  # stable: modules keep their own order inside a group
    # The controller schedules by test id and never collects: it reads the groups from this file.
    target = Path(workerinput[GROUPS_FILE])
    mine = target.with_name(f"{target.name}.{workerinput['workerid']}")
    mine.write_text(json.dumps({item.nodeid: group_of[item.path] for item in items if group_of[item.path]}))
    os.replace(mine, target)  # every worker writes the same map: the last rename wins whole


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: tell each worker where to write the groups."""
    config = node.config
    if not hasattr(config, "kbot_groups_file"):
        config.kbot_groups_file = Path(tempfile.mkdtemp(prefix="kbot-test-groups-")) / "groups.json"
    node.workerinput[GROUPS_FILE] = str(config.kbot_groups_file)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist controller, whatever --dist says (spreading a group's tests would start its cluster twice
    on the same ports): one unit of work per resource group, in collection order (GROUP_ORDER)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # by count of tests would put the long lab module last

    class ResourceGroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once: every worker has collected before scheduling starts
                self.groups = json.loads(config.kbot_groups_file.read_text())
            return self.groups.get(nodeid, nodeid)

    return ResourceGroupScheduling(config, log)


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
