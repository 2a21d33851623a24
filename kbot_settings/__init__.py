"""The bot's whole configuration: one settings object, read from the environment.

Every variable the bot reads is a field of :class:`KbotSettings` (pydantic-settings): its name, its
type, its default, whether it is a secret and what it sets. The object is validated once at start
(:func:`load`): a mistake gives one line naming the variable and what it takes (``KBOT_PORT: must
be a whole number from 1 to 65535, not 'abc'``), never a traceback. ``kbot config`` prints the
effective values with secrets masked and where each came from (:func:`describe`), and the README's
configuration table is generated from the same fields (:func:`markdown_table`; a test compares).

One state root: ``KBOT_HOME`` (default ``~/.kbot``). Under it, unless a variable moves one part:

    <KBOT_HOME>/                 console history, spark.log, clusters.yaml (KBOT_CLUSTERS_FILE)
    <KBOT_HOME>/                 the state (KBOT_STATE_DIR): pending actions and triage threads
                                 (sqlite), the audit log, collector.log - 0700, files 0600
    <KBOT_HOME>/lake/            the metric lake (KBOT_LAKE_DIR): landing files, Delta tables

Downloaded jars live outside it, in ``KBOT_CACHE_DIR`` (default ``~/.cache/kbot``): a cache that
can be deleted at any time.

Loaded once per process, at its edge (the CLI, the Slack app, `kbot run`, the lab, a script), and
handed down typed: nothing outside this package reads ``os.environ`` (tests/unit/test_settings_edge.py
holds every package to that). The object keeps the environment it was read from
(:attr:`KbotSettings.environ`) for the two things that genuinely need raw variables: ``${VAR}`` in
clusters.yaml and the environment of a child process. :class:`HarnessSettings` are the test
harness's and the failure lab's own variables (``KBOT_TEST_*``, ``KBOT_LAB_*``): read the same
way, but not the bot's, so not in its README table or in `kbot config`.

This package is a leaf: it imports nothing of the project, so every layer may read it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import AliasChoices, Field, IPvAnyAddress, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

__all__ = [
    "ENV_NAMES",
    "HarnessSettings",
    "cache_dir",
    "KbotSettings",
    "SettingView",
    "SettingsError",
    "describe",
    "load",
    "load_harness",
    "markdown_table",
]

SECTIONS = ("Paths", "Kafka cluster", "Slack", "Access and the gate", "Digests and alerts", "Metric lake", "Logging")


def _f(
    default: Any,
    env: str,
    what: str,
    section: str,
    *,
    also: tuple[str, ...] = (),
    secret: bool = False,
    **constraints: Any,
) -> Any:
    """A field read from ``env`` (or, in that order, the names in ``also``)."""
    return Field(
        default,
        validation_alias=AliasChoices(env, *also),
        description=what,
        json_schema_extra={"env": [env, *also], "section": section, "secret": secret},
        **constraints,
    )


class _GivenOnly(BaseSettings):
    """Settings built only from the mapping their loader hands in: the environment is read there,
    once, as a mapping that can also be a run's own configuration (cli/run.py) or a test's - never
    merged with the process environment behind the loader's back."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


class KbotSettings(_GivenOnly):
    """Every setting of the bot. Field names are the variables' names in lower case."""

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True)

    # --- paths ------------------------------------------------------------------------------------------
    kbot_home: Path = _f(Path("~/.kbot"), "KBOT_HOME", "the state root: every folder below defaults under it", "Paths")
    kbot_state_dir: Path | None = _f(
        None, "KBOT_STATE_DIR", "pending actions, triage threads, the audit log (default: KBOT_HOME)", "Paths"
    )
    kbot_cache_dir: Path = _f(
        Path("~/.cache/kbot"),
        "KBOT_CACHE_DIR",
        "downloaded Kafka and Delta jars, the runbook cache (safe to delete)",
        "Paths",
    )

    # --- Kafka --------------------------------------------------------------------------------------------
    kbot_clusters_file: Path | None = _f(
        None,
        "KBOT_CLUSTERS_FILE",
        "clusters.yaml: several named clusters (default: KBOT_HOME/clusters.yaml)",
        "Kafka cluster",
    )
    kbot_cluster: str | None = _f(
        None, "KBOT_CLUSTER", "the default cluster's name when several are configured", "Kafka cluster"
    )
    kbot_bootstrap: str | None = _f(
        None, "KBOT_BOOTSTRAP", "host:port[,host:port]: one cluster without a file", "Kafka cluster"
    )
    kbot_cluster_name: str | None = _f(
        None, "KBOT_CLUSTER_NAME", 'that cluster\'s name (default "default")', "Kafka cluster"
    )
    kbot_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = _f(
        "PLAINTEXT", "KBOT_SECURITY_PROTOCOL", "how the bot connects to it", "Kafka cluster"
    )
    kbot_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = _f(
        None, "KBOT_SASL_MECHANISM", "SASL mechanism (with SASL_*)", "Kafka cluster"
    )
    kbot_sasl_username: str | None = _f(None, "KBOT_SASL_USERNAME", "the observer principal (reads)", "Kafka cluster")
    kbot_sasl_password: SecretStr | None = _f(None, "KBOT_SASL_PASSWORD", "its password", "Kafka cluster", secret=True)
    kbot_ssl_ca: Path | None = _f(None, "KBOT_SSL_CA", "CA bundle (PEM) that verifies the brokers", "Kafka cluster")
    kbot_ssl_cert: Path | None = _f(None, "KBOT_SSL_CERT", "client certificate (mTLS)", "Kafka cluster")
    kbot_ssl_key: Path | None = _f(None, "KBOT_SSL_KEY", "its key", "Kafka cluster")
    kbot_ssl_key_password: SecretStr | None = _f(
        None, "KBOT_SSL_KEY_PASSWORD", "the key's password", "Kafka cluster", secret=True
    )
    kbot_config_sasl_username: str | None = _f(
        None,
        "KBOT_CONFIG_SASL_USERNAME",
        "the config principal (confirmed retention and throttle only)",
        "Kafka cluster",
    )
    kbot_config_sasl_password: SecretStr | None = _f(
        None, "KBOT_CONFIG_SASL_PASSWORD", "its password", "Kafka cluster", secret=True
    )
    kbot_config_ssl_cert: Path | None = _f(
        None, "KBOT_CONFIG_SSL_CERT", "the config principal's client certificate", "Kafka cluster"
    )
    kbot_config_ssl_key: Path | None = _f(None, "KBOT_CONFIG_SSL_KEY", "its key", "Kafka cluster")
    kbot_config_ssl_key_password: SecretStr | None = _f(
        None, "KBOT_CONFIG_SSL_KEY_PASSWORD", "the key's password", "Kafka cluster", secret=True
    )
    kbot_operator_sasl_username: str | None = _f(
        None,
        "KBOT_OPERATOR_SASL_USERNAME",
        "the operator principal (confirmed elect-leaders and abort-txn only)",
        "Kafka cluster",
    )
    kbot_operator_sasl_password: SecretStr | None = _f(
        None, "KBOT_OPERATOR_SASL_PASSWORD", "its password", "Kafka cluster", secret=True
    )
    kbot_operator_ssl_cert: Path | None = _f(
        None, "KBOT_OPERATOR_SSL_CERT", "the operator's client certificate", "Kafka cluster"
    )
    kbot_operator_ssl_key: Path | None = _f(None, "KBOT_OPERATOR_SSL_KEY", "its key", "Kafka cluster")
    kbot_operator_ssl_key_password: SecretStr | None = _f(
        None, "KBOT_OPERATOR_SSL_KEY_PASSWORD", "the key's password", "Kafka cluster", secret=True
    )
    kbot_expected_brokers: str | None = _f(
        None,
        "KBOT_EXPECTED_BROKERS",
        "broker ids that should be registered, e.g. 1,2,3 (a missing one is then named)",
        "Kafka cluster",
    )
    kbot_admin_timeout_s: float = _f(
        10.0, "KBOT_ADMIN_TIMEOUT_S", "seconds an admin request may take", "Kafka cluster", gt=0, le=600
    )

    # --- Slack --------------------------------------------------------------------------------------------
    slack_bot_token: SecretStr | None = _f(
        None, "SLACK_BOT_TOKEN", "xoxb-... the bot's Web API token", "Slack", secret=True
    )
    slack_signing_secret: SecretStr | None = _f(
        None, "SLACK_SIGNING_SECRET", "verifies Slack's HTTP requests", "Slack", secret=True
    )
    slack_app_token: SecretStr | None = _f(
        None, "SLACK_APP_TOKEN", "xapp-...: Socket Mode instead of HTTP", "Slack", secret=True
    )
    slack_api_url: str = _f(
        "https://slack.com/api/",
        "SLACK_API_URL",
        "the Web API's base URL (tests point it at a local stand-in)",
        "Slack",
    )
    kbot_port: int = _f(
        3000,
        "KBOT_PORT",
        "HTTP port of the Slack app (PORT too, for platforms that set it)",
        "Slack",
        also=("PORT",),
        ge=1,
        le=65535,
    )
    kbot_health_host: IPvAnyAddress = _f(
        IPv4Address("127.0.0.1"),
        "KBOT_HEALTH_HOST",
        "the address GET /healthz and /metrics answer on (KBOT_PORT, no auth): 127.0.0.1 loopback only; 0.0.0.0 all",
        "Slack",
    )
    kbot_max_in_flight: int = _f(
        16, "KBOT_MAX_IN_FLIGHT", "requests worked on at once (more wait, already acked)", "Slack", ge=1, le=1000
    )
    kbot_channel_clusters: str | None = _f(
        None, "KBOT_CHANNEL_CLUSTERS", "channel -> cluster, e.g. C01=prod,C02=staging", "Slack"
    )

    # --- access and the gate --------------------------------------------------------------------------------
    kbot_allowed_team_ids: str | None = _f(
        None,
        "KBOT_ALLOWED_TEAM_IDS",
        "workspaces allowed to call the bot (comma list; empty: any)",
        "Access and the gate",
    )
    kbot_allowed_enterprise_ids: str | None = _f(
        None,
        "KBOT_ALLOWED_ENTERPRISE_IDS",
        "Enterprise Grid orgs allowed (comma list; empty: any)",
        "Access and the gate",
    )
    kbot_allowed_api_app_ids: str | None = _f(
        None,
        "KBOT_ALLOWED_API_APP_IDS",
        "Slack app ids whose requests are accepted (comma list; empty: any)",
        "Access and the gate",
    )
    kbot_rbac_file: Path | None = _f(
        None,
        "KBOT_RBAC_FILE",
        "who may run which action where (YAML); without it every action is refused",
        "Access and the gate",
    )
    kbot_confirm_ttl_s: float = _f(
        900.0, "KBOT_CONFIRM_TTL_S", "seconds a preview's Confirm stays valid", "Access and the gate", gt=0, le=86400
    )
    kbot_high_risk_kinds: str = _f(
        "abort-txn", "KBOT_HIGH_RISK_KINDS", "actions that need a second approver (comma list)", "Access and the gate"
    )
    kbot_approvers_required: int = _f(
        1,
        "KBOT_APPROVERS_REQUIRED",
        "approvers besides the requester a high-risk action needs",
        "Access and the gate",
        ge=1,
        le=10,
    )
    kbot_audit_topic: str | None = _f(
        None, "KBOT_AUDIT_TOPIC", "also write the audit log to this Kafka topic", "Access and the gate"
    )
    kbot_audit_cluster: str | None = _f(
        None,
        "KBOT_AUDIT_CLUSTER",
        "the cluster holding that topic (default: the default cluster)",
        "Access and the gate",
    )

    # --- digests and alerts ---------------------------------------------------------------------------------
    kbot_digest_schedules: str | None = _f(
        None,
        "KBOT_DIGEST_SCHEDULES",
        "health digests: '<cron> #channel [@cluster]', ';' separated",
        "Digests and alerts",
    )
    kbot_digest_groups: str | None = _f(
        None, "KBOT_DIGEST_GROUPS", "consumer groups the digest reports on", "Digests and alerts"
    )
    kbot_alert_channel: str | None = _f(
        None, "KBOT_ALERT_CHANNEL", "channel for alert threads (kbot run --alerts)", "Digests and alerts"
    )
    kbot_alert_routes: Path | None = _f(
        None, "KBOT_ALERT_ROUTES", "alert -> channel routes (YAML)", "Digests and alerts"
    )
    kbot_alert_token: SecretStr | None = _f(
        None,
        "KBOT_ALERT_TOKEN",
        "the Alertmanager webhook's bearer token (made up per run when unset)",
        "Digests and alerts",
        secret=True,
    )

    # --- the metric lake ------------------------------------------------------------------------------------
    kbot_lake: bool | None = _f(
        None,
        "KBOT_LAKE",
        "1: use the metric lake even when none exists yet (kbot run sets it); 0: never",
        "Metric lake",
    )
    kbot_lake_dir: Path | None = _f(None, "KBOT_LAKE_DIR", "the lake's folder (default: KBOT_HOME/lake)", "Metric lake")
    kbot_lake_uri: str | None = _f(
        None, "KBOT_LAKE_URI", "the lake's table root when not on local disk (s3a://, abfss://)", "Metric lake"
    )
    kbot_lake_cluster: str | None = _f(
        None, "KBOT_LAKE_CLUSTER", "the lake's cluster when a request names none", "Metric lake"
    )
    kbot_lake_timeout_s: float = _f(
        30.0, "KBOT_LAKE_TIMEOUT_S", "seconds a lake query may take", "Metric lake", gt=0, le=3600
    )
    kbot_lake_retention: str | None = _f(
        None, "KBOT_LAKE_RETENTION", "how long rows are kept (default raw=7d,rollups=90d)", "Metric lake"
    )
    kbot_lake_groups: str | None = _f(
        None, "KBOT_LAKE_GROUPS", "consumer groups whose commits are collected", "Metric lake"
    )
    kbot_changes_interval_s: float = _f(
        60.0,
        "KBOT_CHANGES_INTERVAL_S",
        "seconds between the collector's metadata snapshots for `changes` (0: none)",
        "Metric lake",
        ge=0,
        le=86400,
    )
    kbot_metrics_targets: str | None = _f(
        None, "KBOT_METRICS_TARGETS", "exporters to scrape: 101=http://host:7071/metrics,...", "Metric lake"
    )
    kbot_metrics_source: Literal["exporters", "prometheus"] = _f(
        "exporters",
        "KBOT_METRICS_SOURCE",
        "where the lake's samples come from: the exporters themselves, or a "
        "Prometheus that scrapes them (docs/metrics-sources.md)",
        "Metric lake",
    )
    kbot_prometheus_url: str | None = _f(
        None, "KBOT_PROMETHEUS_URL", "that Prometheus, e.g. http://prometheus:9090", "Metric lake"
    )
    kbot_prometheus_broker_label: str = _f(
        "node_id", "KBOT_PROMETHEUS_BROKER_LABEL", "the label holding the broker id in Prometheus", "Metric lake"
    )
    kbot_prometheus_selector: str | None = _f(
        None, "KBOT_PROMETHEUS_SELECTOR", 'extra label filters for its series, e.g. cluster="prod"', "Metric lake"
    )
    kbot_spark_master: str | None = _f(
        None,
        "KBOT_SPARK_MASTER",
        "local[*], sc://host:15002, spark://host:7077 "
        "(default: the warm local Connect server when it runs, else in-process)",
        "Metric lake",
    )
    kbot_spark_connect_port: int = _f(
        15002,
        "KBOT_SPARK_CONNECT_PORT",
        "port of the Spark Connect server `kbot run` and `kbot lake serve` keep warm (docs/lake-connect.md)",
        "Metric lake",
        ge=1,
        le=65535,
    )
    kbot_spark_connect_memory: str = _f("1g", "KBOT_SPARK_CONNECT_MEMORY", "that server's memory", "Metric lake")
    kbot_spark_conf: str | None = _f(
        None, "KBOT_SPARK_CONF", "extra Spark settings, 'key=value;key=value'", "Metric lake"
    )
    kbot_spark_log: Path | None = _f(
        None,
        "KBOT_SPARK_LOG",
        "where Spark's own output goes in the console (default: KBOT_HOME/spark.log)",
        "Metric lake",
    )

    # --- logging --------------------------------------------------------------------------------------------
    kbot_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = _f(
        "WARNING", "KBOT_LOG_LEVEL", "the bot's log level (stderr)", "Logging"
    )
    no_color: str | None = _f(
        None, "NO_COLOR", "any value: the CLI and the console print plain text, no colours (no-color.org)", "Logging"
    )

    # the environment this object was read from (load() keeps a copy): ${VAR} in clusters.yaml and
    # the environment of the processes the bot starts - never read for a setting of its own
    _environ: Mapping[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("kbot_metrics_source", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("kbot_log_level", "kbot_security_protocol", "kbot_sasl_mechanism", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("slack_api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        # slack_sdk joins base_url and the method name by plain concatenation
        return value if value.endswith("/") else value + "/"

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment these settings were loaded from (read-only; empty for settings built
        in code): what ``${VAR}`` in clusters.yaml expands to and what a child process inherits."""
        return MappingProxyType(dict(self._environ))

    @property
    def color(self) -> bool:
        """Whether a terminal may get colours: NO_COLOR unset (any non-empty value turns them off)."""
        return not self.no_color

    def child_environ(self) -> dict[str, str]:
        """The environment for a process this one starts to run with these settings (a `kbot lake
        collect` child of `kbot run`): the snapshot's other variables (PATH, JAVA_HOME, ...) and
        every setting given - loaded or :meth:`updated` - as its variable; none of the bot's
        variables from the snapshot that these settings do not hold."""
        out = {k: v for k, v in self._environ.items() if k not in ENV_NAMES}
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, bool):
                value = "1" if value else "0"
            out[_env_of(name)[0]] = str(value)
        return out

    def updated(self, **fields: Any) -> KbotSettings:
        """These settings with ``fields`` (field names, typed values) replaced, validated like a
        load, and the same environment snapshot: e.g. "this config plus the dev cluster's bootstrap"
        (``settings.updated(kbot_bootstrap="127.0.0.1:9092")``)."""
        unknown = set(fields) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"not settings: {sorted(unknown)}")
        values = {_env_of(n)[0]: v for n, v in {**self.model_dump(exclude_unset=True), **fields}.items()}
        out = _validated({k: v for k, v in values.items() if v is not None})
        out._environ = self._environ
        return out

    # --- derived paths: one root ----------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.kbot_home.expanduser()

    @property
    def state_dir(self) -> Path:
        return (self.kbot_state_dir or self.kbot_home).expanduser()

    @property
    def cache_dir(self) -> Path:
        return self.kbot_cache_dir.expanduser()

    @property
    def lake_dir(self) -> Path:
        return (self.kbot_lake_dir or self.kbot_home / "lake").expanduser()

    @property
    def clusters_file(self) -> Path:
        return (self.kbot_clusters_file or self.kbot_home / "clusters.yaml").expanduser()

    @property
    def spark_log(self) -> Path:
        return (self.kbot_spark_log or self.kbot_home / "spark.log").expanduser()

    def secrets(self) -> list[str]:
        """The values that must never reach a log line, an answer or the audit log."""
        out = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr) and value.get_secret_value():
                out.append(value.get_secret_value())
        return out


#: a derived default: where it comes from (for `kbot config`) and the property that computes it
DERIVED = {
    "kbot_state_dir": ("KBOT_HOME", "state_dir"),
    "kbot_lake_dir": ("KBOT_HOME/lake", "lake_dir"),
    "kbot_clusters_file": ("KBOT_HOME/clusters.yaml", "clusters_file"),
    "kbot_spark_log": ("KBOT_HOME/spark.log", "spark_log"),
}


def _meta(name: str) -> dict[str, Any]:
    """A field's own metadata (its variables, section, secrecy), as _f stored it."""
    extra = KbotSettings.model_fields[name].json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


def _env_of(name: str) -> list[str]:
    return [str(n) for n in _meta(name).get("env", [])]


def _is_secret(name: str) -> bool:
    return bool(_meta(name).get("secret"))


ENV_NAMES: frozenset[str] = frozenset(n for name in KbotSettings.model_fields for n in _env_of(name))


class SettingsError(ValueError):
    """One line per wrong variable, ready to print."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        super().__init__("; ".join(lines))


def _wanted(env: Mapping[str, str]) -> dict[str, str]:
    # an empty variable counts as unset, as it always has
    return {k: v for k, v in env.items() if k in ENV_NAMES and v.strip() != ""}


def load(env: Mapping[str, str] | None = None) -> KbotSettings:
    """The settings from ``env`` (default: the process environment), keeping a copy of it
    (:attr:`KbotSettings.environ`); SettingsError lists every mistake, one line each, naming the
    variable and never echoing a secret. Called once per process, at its edge."""
    env = os.environ if env is None else env
    settings = _validated(_wanted(env))
    settings._environ = dict(env)
    return settings


def _validated(given: Mapping[str, Any]) -> KbotSettings:
    try:
        return KbotSettings.model_validate(given)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            var = str(err["loc"][0]) if err.get("loc") else "?"
            field = next((n for n in KbotSettings.model_fields if var in _env_of(n)), None)
            shown = "" if field is not None and _is_secret(field) else f", not {str(err.get('input'))[:60]!r}"
            lines.append(f"{var}: {_plain(err['msg'])}{shown}")
        raise SettingsError(lines) from None


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``KBOT_CACHE_DIR`` alone (default ``~/.cache/kbot``), expanded: the root of the process-wide
    caches (the built runbook, the Kafka and Delta downloads) that are reached far below any
    request or command - from ``default_kb()``'s lru_cache, from a Spark session's jar list, from
    the test harness - and hold nothing a wrong setting elsewhere should stop."""
    env = os.environ if env is None else env
    value = env.get("KBOT_CACHE_DIR", "")
    return _validated({"KBOT_CACHE_DIR": value} if value.strip() else {}).cache_dir


def _plain(msg: str) -> str:
    """pydantic's messages, said the way an operator reads them."""
    return (
        msg.replace("Input should be a valid integer, unable to parse string as an integer", "must be a whole number")
        .replace("Input should be a valid number, unable to parse string as a number", "must be a number")
        .replace("Input should be a valid boolean, unable to interpret input", "must be 1/0, true/false or yes/no")
        .replace("Input should be", "must be")
    )


@dataclass(frozen=True)
class SettingView:
    """One setting as `kbot config` shows it."""

    env: str
    value: str | None
    source: str
    section: str
    what: str
    secret: bool


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, SecretStr):
        return "(set, hidden)"
    if isinstance(value, Path):
        return str(value.expanduser())
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def describe(settings: KbotSettings) -> list[SettingView]:
    """Every setting with its effective value (secrets masked) and where that value came from (the
    environment it was loaded from, :attr:`KbotSettings.environ`)."""
    given = _wanted(settings.environ)
    out = []
    for name, f in KbotSettings.model_fields.items():
        names = _env_of(name)
        extra = _meta(name)
        set_by = next((n for n in names if n in given), None)
        value = getattr(settings, name)
        if set_by is not None:
            source = f"environment ({set_by})"
        elif name in DERIVED:
            label, prop = DERIVED[name]
            source = f"default ({label})"
            value = getattr(settings, prop)
        else:
            source = "default"
        out.append(
            SettingView(
                names[0], _shown(value), source, str(extra.get("section", "")), f.description or "", _is_secret(name)
            )
        )
    return out


def markdown_table() -> str:
    """The README's configuration table, generated from the fields."""
    defaults = KbotSettings.model_validate({})
    lines = ["| Variable | Default | What it sets |", "|---|---|---|"]
    for section in SECTIONS:
        lines.append(f"| **{section}** | | |")
        for name, f in KbotSettings.model_fields.items():
            if _meta(name).get("section") != section:
                continue
            names = _env_of(name)
            default = (DERIVED[name][0] if name in DERIVED else _shown(getattr(defaults, name))) or ""
            if default.startswith(str(Path.home())):
                default = "~" + default[len(str(Path.home())) :]
            secret = " (secret)" if _is_secret(name) else ""
            lines.append(f"| `{'` / `'.join(names)}` | {default and f'`{default}`'} | {f.description}{secret} |")
    return "\n".join(lines)


# --- the test harness and the failure lab ---------------------------------------------------------------


class HarnessSettings(_GivenOnly):
    """Where the test harness and the failure lab put their clusters: ports and folders a run can
    move so that several runs share one machine. Not the bot's settings (the bot never reads them),
    so neither in the README's table nor in `kbot config`; same rules otherwise: validated, one
    line naming a wrong variable. ``None``: the caller's default (a folder under the cache root)."""

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True)

    kbot_test_port_base: int = Field(29090, validation_alias="KBOT_TEST_PORT_BASE", ge=1, le=65000)
    kbot_test_cluster_dir: Path | None = Field(None, validation_alias="KBOT_TEST_CLUSTER_DIR")
    kbot_test_secure_port_base: int = Field(28090, validation_alias="KBOT_TEST_SECURE_PORT_BASE", ge=1, le=65000)
    kbot_test_secure_cluster_dir: Path | None = Field(None, validation_alias="KBOT_TEST_SECURE_CLUSTER_DIR")
    kbot_test_second_port_base: int = Field(23090, validation_alias="KBOT_TEST_SECOND_PORT_BASE", ge=1, le=65000)
    kbot_test_second_cluster_dir: Path | None = Field(None, validation_alias="KBOT_TEST_SECOND_CLUSTER_DIR")
    kbot_test_keep_cluster: str | None = Field(None, validation_alias="KBOT_TEST_KEEP_CLUSTER")
    kbot_lab_port_base: int = Field(25090, validation_alias="KBOT_LAB_PORT_BASE", ge=1, le=65000)
    kbot_lab_cluster_dir: Path = Field(Path("/tmp/kbot-lab-cluster"), validation_alias="KBOT_LAB_CLUSTER_DIR")
    kbot_lab_quorum_port_base: int = Field(24090, validation_alias="KBOT_LAB_QUORUM_PORT_BASE", ge=1, le=65000)
    kbot_lab_quorum_dir: Path = Field(Path("/tmp/kbot-lab-quorum"), validation_alias="KBOT_LAB_QUORUM_DIR")
    kbot_lab_results: Path = Field(Path("/tmp/kbot-lab-results"), validation_alias="KBOT_LAB_RESULTS")
    # set by pytest-xdist in each worker ("gw0", "gw1" ...): a worker past the first gets a test cluster of its own
    pytest_xdist_worker: str | None = Field(None, validation_alias="PYTEST_XDIST_WORKER", pattern=r"^gw\d+$")

    @property
    def test_worker_index(self) -> int:
        """0 outside pytest-xdist and on its first worker; N on worker ``gwN``."""
        return int(self.pytest_xdist_worker[2:]) if self.pytest_xdist_worker else 0

    @property
    def keep_test_cluster(self) -> bool:
        """KBOT_TEST_KEEP_CLUSTER: leave the test cluster running after the session."""
        return (self.kbot_test_keep_cluster or "") not in ("", "0", "false")


def _aliases(model: type[BaseSettings]) -> frozenset[str]:
    return frozenset(str(f.validation_alias) for f in model.model_fields.values() if f.validation_alias)


HARNESS_NAMES: frozenset[str] = _aliases(HarnessSettings)


def load_harness(env: Mapping[str, str] | None = None) -> HarnessSettings:
    """The harness's settings from ``env`` (default: the process environment); SettingsError names
    a wrong one."""
    env = os.environ if env is None else env
    given = {k: v for k, v in env.items() if k in HARNESS_NAMES and v.strip() != ""}
    try:
        return HarnessSettings.model_validate(given)
    except ValidationError as exc:
        raise SettingsError(
            [
                f"{err['loc'][0] if err.get('loc') else '?'}: {_plain(err['msg'])}, not {str(err.get('input'))[:60]!r}"
                for err in exc.errors()
            ]
        ) from None
