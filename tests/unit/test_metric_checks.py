"""The pure parts of the metric-based live checks: parsing an exposition, the runbook's alert
bounds, per-partition rates and the hot-partition rule."""

from __future__ import annotations

from diagnosis import metric_checks as mc
from live import exporters
from live.model import PartitionOffsets

EXPOSITION = """\
# HELP kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent idle
# TYPE kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent gauge
kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent 0.05
kafka_server_kafkarequesthandlerpool_brokerrequesthandleravgidlepercent 0.9
kafka_log_log_logendoffset{partition="0",topic="orders"} 100.0
kafka_log_log_logendoffset{partition="1",topic="orders"} 40.0
kafka_log_log_logendoffset{partition="0",topic="__consumer_offsets"} 7.0
kafka_network_requestmetrics_requestqueuetimems{quantile="0.99",request="Produce"} NaN
"""


def test_parse_keeps_only_the_named_series_and_their_labels():
    LEO = "kafka_log_log_logendoffset"
    names = frozenset({mc.HANDLER_IDLE, LEO, mc.QUEUE_TIME})
    samples = exporters.parse(EXPOSITION, 101, names)
    assert [(s.name, s.value) for s in samples if s.name == mc.HANDLER_IDLE] == [(mc.HANDLER_IDLE, 0.05)]
    leo = {(s.label("topic"), s.label("partition")): s.value for s in samples if s.name == LEO}
    assert leo == {("orders", "0"): 100.0, ("orders", "1"): 40.0, ("__consumer_offsets", "0"): 7.0}
    assert not [s for s in samples if s.name == mc.QUEUE_TIME]  # NaN: no samples yet, not a reading


def test_alert_bounds_come_from_the_runbook():
    assert mc.alert_bounds("RequestHandlerAvgIdlePercent") == {"warning": ("<", 0.2), "critical": ("<", 0.1)}
    assert mc.alert_bounds("disk usage") == {"warning": (">", 0.70), "critical": (">", 0.85)}
    bounds = mc.alert_bounds("RequestHandlerAvgIdlePercent")
    assert mc.classify(0.05, bounds) == "critical"
    assert mc.classify(0.15, bounds) == "warning"
    assert mc.classify(0.5, bounds) == "ok"


def _offsets(hws: dict[tuple[str, int], int]) -> dict:
    return {k: PartitionOffsets(k[0], k[1], hw, hw) for k, hw in hws.items()}


def test_partition_rates_and_the_hot_rule():
    first = _offsets({("orders", 0): 1_000, ("orders", 1): 1_000, ("orders", 2): 1_000, ("quiet", 0): 5})
    second = _offsets({("orders", 0): 1_900, ("orders", 1): 1_040, ("orders", 2): 1_060, ("quiet", 0): 5})
    rates = mc.partition_rates(first, second, 2.0)
    assert rates == {("orders", 0): 450.0, ("orders", 1): 20.0, ("orders", 2): 30.0, ("quiet", 0): 0.0}
    assert mc.hot_partitions(rates) == [(("orders", 0), 450.0, 30.0)]
    # even traffic: nothing is hot; a lone busy partition of a one-partition topic is not "skewed"
    assert mc.hot_partitions({("a", 0): 100.0, ("a", 1): 90.0, ("b", 0): 500.0}) == []
