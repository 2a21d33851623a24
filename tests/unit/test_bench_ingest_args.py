"""scripts/bench_ingest.py's scale-out option, parsed (no Spark, no cluster: the figures are the
benchmark's to measure, not a test's)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_ingest.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_ingest", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_workers_the_run_stays_on_one_local_core(bench):
    a = bench.parse_args([])
    assert (a.workers, a.master) == (0, "local[1]")
    assert bench.parse_args(["--master", "local[2]"]).master == "local[2]"


def test_workers_start_a_cluster_on_ports_apart_from_the_tests(bench, tmp_path):
    a = bench.parse_args(["--workers", "2"])
    assert (a.workers, a.cluster_port, a.executor_memory) == (2, 17177, "2g")
    cluster = bench.StandaloneCluster(a.workers, tmp_path, a.cluster_port, a.executor_memory)
    # master 17177, its web UI 18281, the workers' 18282 and 18283: below Linux's ephemeral ports,
    # and not the standalone test's 17077 / 18181-18182
    assert cluster.url == "spark://127.0.0.1:17177"
    assert [cluster.ui_port, cluster.worker_ui(0), cluster.worker_ui(1)] == [18281, 18282, 18283]


@pytest.mark.parametrize(
    "argv",
    [
        ["--workers", "-1"],
        ["--workers", "2", "--master", "local[2]"],  # the cluster sets the master
        ["--workers", "2", "--cluster-port", "80"],
        ["--workers", "2", "--cluster-port", "65000"],  # no room for the web UIs above it
    ],
)
def test_contradictory_or_impossible_options_are_refused(bench, argv):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2
