"""The lake and the alert webhook read their configuration through the one settings object
(kbot_settings, issue 12): a variable means the same there as at `kbot` start - same defaults
(KBOT_HOME/lake), same accepted spellings, same limits - and a wrong value is one line naming
it. Each reader that takes a mapping gets its own; those that read the process environment
(the `kbot lake` commands, the jar cache) get theirs set through monkeypatch."""

from __future__ import annotations

import datetime as dt

import pytest

from kbot_settings import SettingsError
from kbot_settings import load as load_settings

# --------------------------------------------------------------------------- the lake service


def test_the_lake_service_takes_its_table_master_cluster_and_timeout_from_the_settings(tmp_path):
    from lake.service import LakeService

    lake = LakeService.from_settings(
        load_settings(
            {
                "KBOT_HOME": str(tmp_path / "home"),  # no KBOT_LAKE_DIR: the lake is under the state root
                "KBOT_SPARK_MASTER": "  local[1] ",
                "KBOT_LAKE_CLUSTER": "prod",
                "KBOT_LAKE_TIMEOUT_S": "45.5",
            }
        )
    )
    assert lake.path == str(tmp_path / "home" / "lake" / "samples")
    assert (lake.master, lake.cluster, lake.query_timeout_s, lake.conf) == ("local[1]", "prod", 45.5, {})


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("soon", "KBOT_LAKE_TIMEOUT_S: must be a number, not 'soon'"),
        ("0", "KBOT_LAKE_TIMEOUT_S: must be greater than 0, not '0'"),
        ("7200", "KBOT_LAKE_TIMEOUT_S: must be less than or equal to 3600, not '7200'"),
    ],
)
def test_a_wrong_lake_timeout_is_the_settings_line_not_a_float_traceback(tmp_path, value, line):
    from lake.service import LakeService

    with pytest.raises(SettingsError) as caught:
        LakeService.from_settings(
            load_settings({"KBOT_HOME": str(tmp_path), "KBOT_SPARK_MASTER": "local[1]", "KBOT_LAKE_TIMEOUT_S": value})
        )
    assert caught.value.lines == [line]


def test_a_malformed_spark_conf_names_the_variable(tmp_path):
    from lake.service import LakeService

    with pytest.raises(ValueError, match=r"KBOT_SPARK_CONF: expected key=value, got 'spark\.ui'"):
        LakeService.from_settings(
            load_settings({"KBOT_HOME": str(tmp_path), "KBOT_SPARK_MASTER": "local[1]", "KBOT_SPARK_CONF": "spark.ui"})
        )


@pytest.mark.parametrize("off", ["0", "off", "False", "no"])
def test_kbot_lake_off_turns_the_lake_off_in_every_spelling_the_settings_accept(tmp_path, off):
    from lake.service import lake_from_settings

    assert lake_from_settings(load_settings({"KBOT_LAKE_DIR": str(tmp_path), "KBOT_LAKE": off}), start=False) is None


def test_kbot_lake_on_or_a_lake_uri_configures_a_lake_that_does_not_exist_yet(tmp_path):
    from lake.service import lake_from_settings

    home = tmp_path / "home"
    env = {"KBOT_HOME": str(home), "KBOT_SPARK_MASTER": "local[1]"}
    assert lake_from_settings(load_settings(env), start=False) is None  # nothing configured and no table on disk
    on = lake_from_settings(load_settings({**env, "KBOT_LAKE": "yes"}), start=False)
    assert on is not None and on.path == str(home / "lake" / "samples") and on.state == "new"
    uri = lake_from_settings(load_settings({**env, "KBOT_LAKE_URI": "s3a://bucket/kbot/samples"}), start=False)
    assert uri is not None and uri.path == "s3a://bucket/kbot/samples"


def test_a_kbot_lake_value_the_settings_refuse_is_refused_here_too(tmp_path):
    from lake.service import lake_from_settings

    with pytest.raises(SettingsError) as caught:
        lake_from_settings(load_settings({"KBOT_HOME": str(tmp_path), "KBOT_LAKE": "maybe"}), start=False)
    assert caught.value.lines == ["KBOT_LAKE: must be 1/0, true/false or yes/no, not 'maybe'"]


# --------------------------------------------------------------------------- the Connect server


def test_the_connect_port_is_the_settings_one_and_a_wrong_one_is_named_at_the_load():
    from lake.connect import default_port

    assert default_port(load_settings({})) == 15002
    assert default_port(load_settings({"KBOT_SPARK_CONNECT_PORT": " 15010 "})) == 15010
    # a wrong one stops the load, at the process's edge, as one line naming it
    with pytest.raises(SettingsError, match=r"^KBOT_SPARK_CONNECT_PORT: must be a whole number, not 'abc'$"):
        load_settings({"KBOT_SPARK_CONNECT_PORT": "abc"})
    with pytest.raises(SettingsError, match=r"^KBOT_SPARK_CONNECT_PORT: must be less than or equal to 65535"):
        load_settings({"KBOT_SPARK_CONNECT_PORT": "70000"})


def test_the_connect_server_gets_its_memory_and_extra_conf_from_the_settings():
    from lake.connect import server_conf

    conf = server_conf(
        15010,
        "local[2]",
        load_settings(
            {
                "KBOT_SPARK_CONNECT_MEMORY": " 3g ",
                "KBOT_SPARK_CONF": "spark.sql.session.timeZone=UTC; spark.ui.enabled=true",
            }
        ),
        {"spark.ui.enabled": "false"},
    )
    assert conf["spark.driver.memory"] == "3g"
    assert conf["spark.connect.grpc.binding.port"] == "15010"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.ui.enabled"] == "false"  # the caller's conf wins over KBOT_SPARK_CONF
    assert server_conf(15010, "local[2]", load_settings({}), None)["spark.driver.memory"] == "1g"


def test_kbot_lake_serve_with_a_wrong_port_is_exit_2_and_one_line(monkeypatch, capsys, tmp_path):
    from lake import cli

    monkeypatch.setenv("KBOT_SPARK_CONNECT_PORT", "fifteen")
    assert cli.main(["serve", "--lake-dir", str(tmp_path), "--no-warm"]) == 2
    err = capsys.readouterr().err
    assert err == "error: KBOT_SPARK_CONNECT_PORT: must be a whole number, not 'fifteen'\n"
    assert not (tmp_path / "connect" / "server.json").exists()  # nothing was started


# --------------------------------------------------------------------------- collection and retention


def test_retention_is_the_settings_string_parsed_by_the_lake():
    from lake.errors import BadRetention
    from lake.maintenance import retention_from_settings

    assert retention_from_settings(load_settings({})) == {"raw": dt.timedelta(days=7), "rollups": dt.timedelta(days=90)}
    assert retention_from_settings(load_settings({"KBOT_LAKE_RETENTION": "raw=2d"}))["raw"] == dt.timedelta(days=2)
    with pytest.raises(BadRetention, match="KBOT_LAKE_RETENTION: raw must keep at least 1 day"):
        retention_from_settings(load_settings({"KBOT_LAKE_RETENTION": "raw=3h"}))


def test_targets_and_source_come_from_the_settings():
    from lake.collector import Target, targets_from_settings

    assert targets_from_settings(load_settings({})) == []
    assert targets_from_settings(
        load_settings({"KBOT_METRICS_TARGETS": "2=http://b:7071/metrics, 1=http://a:7071/metrics"})
    ) == [
        Target(2, "http://b:7071/metrics"),
        Target(1, "http://a:7071/metrics"),
    ]
    assert load_settings({}).kbot_metrics_source == "exporters"
    assert load_settings({"KBOT_METRICS_SOURCE": " PROMETHEUS "}).kbot_metrics_source == "prometheus"
    with pytest.raises(ValueError, match="KBOT_METRICS_SOURCE: must be 'exporters' or 'prometheus', not 'statsd'"):
        load_settings({"KBOT_METRICS_SOURCE": "statsd"})


def test_another_wrong_variable_is_not_reported_as_the_metrics_source():

    with pytest.raises(SettingsError) as caught:
        load_settings({"KBOT_METRICS_SOURCE": "prometheus", "KBOT_LAKE_TIMEOUT_S": "-1"})
    assert caught.value.lines == ["KBOT_LAKE_TIMEOUT_S: must be greater than 0, not '-1'"]


def test_the_prometheus_source_reads_url_label_and_selector_from_the_settings(tmp_path):
    from lake.prometheus_source import PrometheusSource, PrometheusSourceError

    src = PrometheusSource.from_settings(tmp_path, "prod", load_settings({"KBOT_PROMETHEUS_URL": " http://prom:9090 "}))
    assert (src.url.rstrip("/"), src.broker_label) == ("http://prom:9090", "node_id")
    assert 'node_id!=""' in src.promql() and 'cluster="prod"' not in src.promql()
    src = PrometheusSource.from_settings(
        tmp_path,
        "prod",
        load_settings(
            {
                "KBOT_PROMETHEUS_URL": "http://prom:9090",
                "KBOT_PROMETHEUS_BROKER_LABEL": "broker_id",
                "KBOT_PROMETHEUS_SELECTOR": 'cluster="prod"',
            }
        ),
    )
    assert 'broker_id!=""' in src.promql() and 'cluster="prod"' in src.promql()
    with pytest.raises(PrometheusSourceError, match="needs KBOT_PROMETHEUS_URL"):
        PrometheusSource.from_settings(tmp_path, "prod", load_settings({"KBOT_PROMETHEUS_URL": "  "}))


def test_lake_collect_takes_its_cluster_name_and_groups_from_the_settings():
    import argparse

    from lake import cli

    prod = load_settings({"KBOT_LAKE_CLUSTER": "prod-eu"})
    assert cli._cluster_name(argparse.Namespace(cluster=None, local="dev"), prod) == "prod-eu"
    assert cli._cluster_name(argparse.Namespace(cluster="given", local=None), prod) == "given"
    assert cli._cluster_name(argparse.Namespace(cluster=None, local="dev"), load_settings({})) == "dev"


def test_the_delta_jar_cache_is_the_settings_cache_dir(monkeypatch, tmp_path):
    from lake import jars

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KBOT_CACHE_DIR", "~/jar-cache")
    assert jars.cache_root() == tmp_path / "jar-cache"
    assert jars.jars_dir().parent == tmp_path / "jar-cache"
    monkeypatch.delenv("KBOT_CACHE_DIR")
    assert jars.cache_root() == tmp_path / ".cache" / "kbot"


# --------------------------------------------------------------------------- the alert webhook


def test_the_alert_webhook_reads_token_routes_and_channel_from_the_settings(tmp_path, monkeypatch):
    from bot.alertmanager import AlertConfig

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "routes.yaml").write_text(
        "default_channel: C0DEFAULT\nroutes:\n  - match: {topic: orders}\n    channel: '#orders'\n"
    )
    cfg = AlertConfig.from_settings(
        load_settings({"KBOT_ALERT_TOKEN": " s3cret ", "KBOT_ALERT_ROUTES": "~/routes.yaml"})
    )
    assert cfg is not None and cfg.token == "s3cret"
    assert cfg.route({"topic": "orders"}).channel == "#orders"
    assert cfg.route({"topic": "other"}).channel == "C0DEFAULT"
    assert AlertConfig.from_settings(load_settings({"KBOT_ALERT_TOKEN": "   "})) is None  # empty is unset, as at start
    cfg = AlertConfig.from_settings(load_settings({"KBOT_ALERT_TOKEN": "t", "KBOT_ALERT_CHANNEL": " #kafka-alerts "}))
    assert cfg is not None and cfg.default_channel == "#kafka-alerts"


def test_a_wrong_setting_stops_the_load_before_the_webhook_without_the_secret():
    # the settings are validated once, where the process loads them: the webhook never sees a wrong one
    with pytest.raises(SettingsError) as caught:
        load_settings(
            {"KBOT_ALERT_TOKEN": "very-secret-token", "KBOT_ALERT_CHANNEL": "C0X", "KBOT_CONFIRM_TTL_S": "never"}
        )
    assert str(caught.value) == "KBOT_CONFIRM_TTL_S: must be a number, not 'never'"
    assert "very-secret-token" not in str(caught.value)


def test_a_layout_from_settings_already_loaded_is_the_one_from_the_environment(tmp_path):
    from kbot_settings import load
    from lake.ingest import LakeLayout

    env = {"KBOT_LAKE_DIR": str(tmp_path / "a" / ".." / "lake"), "KBOT_LAKE_URI": "file://" + str(tmp_path / "t")}
    layout = LakeLayout.from_settings(load_settings(env))
    assert layout == LakeLayout.from_settings(load(env))
    assert (layout.state_dir, layout.table) == ((tmp_path / "lake").resolve(), str((tmp_path / "t").resolve()))
