"""The failure lab on the 3-controller lab cluster (controllers 1-3, brokers 101-103; ports from
KBOT_LAB_QUORUM_PORT_BASE, default 24090): the modes that need a real quorum, losing one voter
(the quorum holds) and two (it is lost)."""

import shutil

import pytest
from labtest import ModeRuns, check_answer, check_reproduced, keep_clusters

from lab.modes import by_name
from lab.topology import quorum

pytestmark = pytest.mark.kafka

MODES = by_name()
ORDER = [m.name for m in MODES.values() if m.topology == "quorum" and m.feasible]


@pytest.fixture(scope="module")
def runs():
    if shutil.which("java") is None:
        pytest.skip("java is not installed: the lab's Kafka cluster needs a JDK 17+")
    cluster = quorum()
    if not keep_clusters():
        cluster.destroy()
    cluster.up(timeout=240)
    yield ModeRuns(cluster)
    if not keep_clusters():
        cluster.destroy()


def test_quorum_modes_exist():
    assert ORDER == ["controller-minority-loss", "controller-quorum-loss"]


@pytest.mark.parametrize("name", ORDER)
def test_reproduced(runs, name):
    check_reproduced(runs.result(MODES[name]))


@pytest.mark.parametrize("name", ORDER)
def test_answer(runs, name):
    check_answer(runs.result(MODES[name]))
