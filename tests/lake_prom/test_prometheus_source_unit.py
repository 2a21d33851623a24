"""The Prometheus source without a Prometheus: configuration errors, window arithmetic and
resume state, and a round against a port nothing listens on (one error line, no crash)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from kbot_settings import load as load_settings
from lake.collector import Collector
from lake.prometheus_source import STATE_FILE, PrometheusSource, PrometheusSourceError, parse_selector, window_file_name


def test_source_env_defaults_to_exporters_and_rejects_unknown_names():
    assert load_settings({}).kbot_metrics_source == "exporters"
    assert load_settings({"KBOT_METRICS_SOURCE": "Prometheus"}).kbot_metrics_source == "prometheus"
    with pytest.raises(ValueError, match="KBOT_METRICS_SOURCE: must be 'exporters' or 'prometheus', not 'graphite'"):
        load_settings({"KBOT_METRICS_SOURCE": "graphite"})


def test_prometheus_mode_needs_a_url_but_no_targets(tmp_path):
    with pytest.raises(PrometheusSourceError, match="needs KBOT_PROMETHEUS_URL"):
        PrometheusSource.from_settings(tmp_path, "c", load_settings({}))
    with pytest.raises(PrometheusSourceError, match="must start with http"):
        PrometheusSource.from_settings(tmp_path, "c", load_settings({"KBOT_PROMETHEUS_URL": "localhost:9090"}))
    with pytest.raises(PrometheusSourceError, match="is not a label name"):
        PrometheusSource("http://p:9090", tmp_path, "c", broker_label="node-id")
    src = PrometheusSource.from_settings(
        tmp_path,
        "c",
        load_settings({"KBOT_PROMETHEUS_URL": "http://p:9090/", "KBOT_PROMETHEUS_BROKER_LABEL": "broker_id"}),
    )
    assert src.url == "http://p:9090" and src.broker_label == "broker_id"
    collector = Collector([], tmp_path / "landing", "c", source="prometheus", prometheus=src)
    assert collector.targets == [] and collector.prometheus is src
    with pytest.raises(ValueError, match="no metrics targets"):
        Collector([], tmp_path / "landing", "c", source="exporters")


def test_selector_accepts_label_matchers_only():
    assert parse_selector(' {cluster="prod", job=~"kafka.*"} ') == 'cluster="prod",job=~"kafka.*"'
    assert parse_selector("") == ""
    for bad in ('cluster="prod"} or vector(1) {', "cluster=prod", 'cluster="a" job="b"', 'up{a="b"}'):
        with pytest.raises(PrometheusSourceError, match="KBOT_PROMETHEUS_SELECTOR"):
            parse_selector(bad)


def test_query_names_every_mapped_series_and_requires_the_broker_label(tmp_path):
    src = PrometheusSource("http://p:9090", tmp_path, "c", selector='cluster="prod"')
    q = src.promql()
    assert "kafka_log_log_logendoffset|" in q and "kafka_server_replicamanager_isrshrinkspersec_total" in q
    assert q.endswith(',node_id!="",cluster="prod"}')


def test_windows_are_step_aligned_resume_after_the_last_instant_and_repeat_a_pending_one(tmp_path):
    src = PrometheusSource("http://p:9090", tmp_path, "c", step_s=10, settle_s=5, backfill_s=30)
    now = 1_700_000_047.3  # newest instant due: floor((now - 5) / 10) * 10 = ...040
    assert src.next_window({}, now) == (1_700_000_010.0, 1_700_000_040.0)
    assert src.next_window({"last": 1_700_000_040.0}, now) is None  # nothing new yet
    assert src.next_window({"last": 1_700_000_020.0}, now) == (1_700_000_030.0, 1_700_000_040.0)
    # a window started before a crash is fetched again exactly, whatever the time now
    pending = {"last": 1_700_000_020.0, "pending": [1_700_000_030.0, 1_700_000_040.0]}
    assert src.next_window(pending, now + 100) == (1_700_000_030.0, 1_700_000_040.0)
    # a long outage is caught up in windows of at most 1000 points
    first, last = src.next_window({"last": 1_600_000_000.0}, now)
    assert (first, last) == (1_600_000_010.0, 1_600_000_010.0 + 999 * 10)
    # the same window gives the same landing file name (ingest skips a re-delivery by name)
    assert window_file_name(1.7e9, 1.7e9 + 40, 10) == window_file_name(1.7e9, 1.7e9 + 40, 10)
    assert window_file_name(1.7e9, 1.7e9 + 40, 10) != window_file_name(1.7e9, 1.7e9 + 50, 10)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_unreachable_prometheus_is_one_error_and_the_state_stays(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}"
    src = PrometheusSource(url, tmp_path, "c", step_s=10, settle_s=0, clock=lambda: 1_700_000_000.0)
    (tmp_path / STATE_FILE).write_text(json.dumps({"last": 1_699_999_980.0}))
    collector = Collector([], tmp_path / "landing", "c", source="prometheus", prometheus=src)
    report = asyncio.run(collector.collect_once())
    assert report.error is not None and f"cannot reach {url}/api/v1/query_range" in report.error
    assert "\n" not in report.summary() and "retrying from" in report.summary()
    assert report.rows == 0 and report.file is None
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["last"] == 1_699_999_980.0 and state["pending"] == [1_699_999_990.0, 1_700_000_000.0]
