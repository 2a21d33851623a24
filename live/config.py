"""Connection settings for named Kafka clusters.

Two sources, merged by :func:`load_clusters`:

* the environment, for the default cluster::

    KBOT_BOOTSTRAP            host:port[,host:port...]   (defines the env cluster)
    KBOT_CLUSTER_NAME         its name (default "default")
    KBOT_SECURITY_PROTOCOL    PLAINTEXT | SSL | SASL_SSL | SASL_PLAINTEXT
    KBOT_SASL_MECHANISM       SCRAM-SHA-256 | SCRAM-SHA-512 | PLAIN
    KBOT_SASL_USERNAME / KBOT_SASL_PASSWORD
    KBOT_SSL_CA               CA bundle (PEM) to verify the brokers
    KBOT_SSL_CERT / KBOT_SSL_KEY / KBOT_SSL_KEY_PASSWORD   client certificate (mTLS)
    KBOT_EXPECTED_BROKERS     optional comma list of broker ids, e.g. 1,2,3
    KBOT_CONFIG_SASL_USERNAME / KBOT_CONFIG_SASL_PASSWORD       the config principal (retention, throttle)
    KBOT_CONFIG_SSL_CERT / KBOT_CONFIG_SSL_KEY / KBOT_CONFIG_SSL_KEY_PASSWORD         ... with mTLS
    KBOT_OPERATOR_SASL_USERNAME / KBOT_OPERATOR_SASL_PASSWORD   the operator principal (elect-leaders, abort-txn)
    KBOT_OPERATOR_SSL_CERT / KBOT_OPERATOR_SSL_KEY / KBOT_OPERATOR_SSL_KEY_PASSWORD   ... with mTLS

* a YAML file, ``$KBOT_CLUSTERS_FILE`` or ``$KBOT_HOME/clusters.yaml``
  (``KBOT_HOME`` defaults to ``~/.kbot``)::

    default: prod
    clusters:
      dev:
        bootstrap: 127.0.0.1:19091
      prod:
        bootstrap: kafka-1:9093,kafka-2:9093
        security_protocol: SASL_SSL
        sasl_mechanism: SCRAM-SHA-512
        sasl_username: kbot
        sasl_password: ${KBOT_PROD_PASSWORD}     # ${VAR} is read from the environment
        ssl_ca: /etc/kbot/ca.pem
        expected_brokers: [1, 2, 3]
        config:                                  # retention and throttle run as this principal
          sasl_username: kbot-config
          sasl_password: ${KBOT_PROD_CONFIG_PASSWORD}
        operator:                                # elect-leaders and abort-txn run as this one
          sasl_username: kbot-operator
          sasl_password: ${KBOT_PROD_OPERATOR_PASSWORD}

Three principals per cluster, one per privilege level (docs/security.md):

* ``observer`` - the configured credentials themselves: every read (Describe / DescribeConfigs);
* ``config`` - confirmed config changes (``retention``, ``throttle``): ALTER_CONFIGS on topics and
  on the cluster's broker configs, nothing else;
* ``operator`` - confirmed ``elect-leaders`` and ``abort-txn``: ALTER on the cluster, which Kafka
  also accepts for CreateAcls / DeleteAcls - the escalation path, so it is used for those two only.

:meth:`ClusterConfig.as_role` gives the credentials of one of them. On a cluster that authenticates
clients, an action whose principal is not configured is refused up front (ConfigError naming what to
set); it is never tried with another principal's credentials. A cluster that does not authenticate
has no principals to tell apart: every role gets the same settings.

Which cluster is the default (``get_cluster(None)``): ``$KBOT_CLUSTER`` if set,
else the env cluster if ``KBOT_BOOTSTRAP`` is set, else the file's ``default:``,
else the only configured cluster.

Secrets (SASL password, SSL key password) are held as :class:`Secret`, a
``str`` whose ``repr`` is ``'***'``, so neither ``repr(config)``,
``str(config)`` nor a logged client-settings dict reveals them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from pydantic import SecretStr

from kbot_settings import KbotSettings
from live.secret_files import readable_by_others, warn_once
from live.tls import unusable_files

# The principals the bot uses per cluster, one per privilege level, and what each is used for.
ROLES = ("observer", "config", "operator")
ACTING_ROLES = ("config", "operator")
ROLE_USES = {
    "observer": "reads (every answer, previews and re-checks)",
    "config": "config changes (retention, throttle)",
    "operator": "leader elections and transaction aborts (elect-leaders, abort-txn)",
}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL", "SASL_PLAINTEXT")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
MASK = "***"

T = TypeVar("T")


class ConfigError(ValueError):
    """Invalid or missing cluster configuration."""


class UnknownCluster(ConfigError, LookupError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, known
        listed = ", ".join(known) if known else "none"
        super().__init__(f"unknown Kafka cluster {name!r}; configured clusters: {listed}")


class Secret(str):
    """A str that never shows its value in repr() (and so not in a logged
    dict/list/dataclass either). ``str(secret)`` and string operations still
    give the real value, which is what the client libraries need."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(MASK)

    def __reduce__(
        self,
    ) -> tuple[type[Secret], tuple[str]]:  # don't let pickling turn it back into a plain str silently
        return (Secret, (str.__str__(self),))


def _secret(value: object) -> Secret | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, Secret) else Secret(str(value))


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    bootstrap: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = field(default=None, repr=False)
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_key_password: Secret | None = field(default=None, repr=False)
    expected_brokers: tuple[int, ...] = ()
    client_id: str = "kbot"
    # Prometheus endpoints of the cluster's nodes ("101=http://h:7071/metrics,..."): the JMX
    # exporters the live checks read for what the admin API does not show (handler idle time,
    # fetch-session evictions, per-partition write rates).
    metrics_targets: str | None = None
    # The config principal: the credentials retention and throttle use (docstring above).
    config_sasl_username: str | None = None
    config_sasl_password: Secret | None = field(default=None, repr=False)
    config_ssl_cert: str | None = None
    config_ssl_key: str | None = None
    config_ssl_key_password: Secret | None = field(default=None, repr=False)
    # The operator principal: the credentials elect-leaders and abort-txn use.
    operator_sasl_username: str | None = None
    operator_sasl_password: Secret | None = field(default=None, repr=False)
    operator_ssl_cert: str | None = None
    operator_ssl_key: str | None = None
    operator_ssl_key_password: Secret | None = field(default=None, repr=False)
    role: str = "observer"  # whose credentials these are: one of ROLES (for messages)
    source: str = "code"  # "env", "file:<path>" or "code" (for messages)

    def __post_init__(self) -> None:
        def set_(k: str, v: object) -> None:
            object.__setattr__(self, k, v)  # frozen

        set_("sasl_password", _secret(self.sasl_password))
        set_("ssl_key_password", _secret(self.ssl_key_password))
        for role in ACTING_ROLES:
            set_(f"{role}_sasl_password", _secret(getattr(self, f"{role}_sasl_password")))
            set_(f"{role}_ssl_key_password", _secret(getattr(self, f"{role}_ssl_key_password")))
        set_("expected_brokers", tuple(_broker_ids(self.expected_brokers, self.name)))
        proto = (self.security_protocol or "PLAINTEXT").upper()
        set_("security_protocol", proto)
        if self.sasl_mechanism:
            set_("sasl_mechanism", self.sasl_mechanism.upper())
        self.validate()

    # ---- validation ------------------------------------------------------
    def validate(self) -> None:
        where = f"cluster {self.name!r} ({self.source})"
        if not self.bootstrap or not str(self.bootstrap).strip():
            raise ConfigError(f"{where}: bootstrap servers are empty")
        for hp in self.bootstrap_list:
            host, sep, port = hp.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(f"{where}: bootstrap entry {hp!r} is not host:port")
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"{where}: security_protocol {self.security_protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    f"{where}: {self.security_protocol} needs sasl_mechanism, one of "
                    f"{', '.join(SASL_MECHANISMS)} (got {self.sasl_mechanism!r})"
                )
            if not self.sasl_username or not self.sasl_password:
                raise ConfigError(f"{where}: {self.security_protocol} needs sasl_username and sasl_password")
        elif self.sasl_mechanism or self.sasl_username or self.sasl_password:
            raise ConfigError(
                f"{where}: SASL settings given but security_protocol is {self.security_protocol}; use SASL_SSL"
            )
        for item in filter(None, (x.strip() for x in (self.metrics_targets or "").split(","))):
            node, sep, url = item.partition("=")
            if not sep or not node.strip().isdigit() or not url.strip().startswith(("http://", "https://")):
                raise ConfigError(f"{where}: metrics target {item!r} is not <node id>=<http(s) url>")
        if bool(self.ssl_cert) != bool(self.ssl_key):
            raise ConfigError(f"{where}: mTLS needs both ssl_cert and ssl_key")
        if self.role not in ROLES:
            raise ConfigError(f"{where}: role {self.role!r} is not one of {', '.join(ROLES)}")
        for role in ACTING_ROLES:
            user, password = getattr(self, f"{role}_sasl_username"), getattr(self, f"{role}_sasl_password")
            cert, key = getattr(self, f"{role}_ssl_cert"), getattr(self, f"{role}_ssl_key")
            if bool(user) != bool(password):
                raise ConfigError(f"{where}: the {role} principal needs both sasl_username and sasl_password")
            if user and not self.uses_sasl:
                raise ConfigError(
                    f"{where}: {role} SASL credentials given but security_protocol is "
                    f"{self.security_protocol}; use SASL_SSL"
                )
            if bool(cert) != bool(key):
                raise ConfigError(f"{where}: the {role} principal's mTLS needs both ssl_cert and ssl_key")
            if cert and not self.uses_ssl:
                raise ConfigError(f"{where}: a {role} client certificate needs security_protocol SSL or SASL_SSL")
        if not self.uses_ssl and (self.ssl_ca or self.ssl_cert or self.ssl_key):
            raise ConfigError(
                f"{where}: SSL files given but security_protocol is {self.security_protocol}; use SSL or SASL_SSL"
            )

    # ---- derived -----------------------------------------------------------
    @property
    def metrics_urls(self) -> dict[int, str]:
        """Node id -> Prometheus URL, from ``metrics_targets``."""
        out: dict[int, str] = {}
        for item in filter(None, (x.strip() for x in (self.metrics_targets or "").split(","))):
            node, _, url = item.partition("=")
            out[int(node)] = url.strip()
        return out

    @property
    def bootstrap_list(self) -> list[str]:
        return [s.strip() for s in str(self.bootstrap).split(",") if s.strip()]

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def mtls(self) -> bool:
        return bool(self.ssl_cert and self.ssl_key)

    @property
    def principal(self) -> str:
        """Who these credentials authenticate as, for messages (never a secret)."""
        if self.uses_sasl:
            return f"User:{self.sasl_username}"
        if self.mtls:
            return f"the client certificate {self.ssl_cert}"
        return "User:ANONYMOUS"

    @property
    def authenticates(self) -> bool:
        """Whether the brokers tell clients apart (SASL or a client certificate)."""
        return self.uses_sasl or self.mtls

    def has_role(self, role: str) -> bool:
        """Whether credentials of their own are configured for ``role`` (the observer's always are)."""
        if role == "observer":
            return True
        return bool(getattr(self, f"{role}_sasl_username") or getattr(self, f"{role}_ssl_cert"))

    @property
    def has_operator(self) -> bool:
        return self.has_role("operator")

    @property
    def has_config(self) -> bool:
        return self.has_role("config")

    def as_role(self, role: str) -> "ClusterConfig":
        """The same cluster with ``role``'s credentials (docstring of the module): what a confirmed
        action connects with. A cluster that does not authenticate clients has no principals to tell
        apart: the same settings, labelled ``role``. One that does and names no such principal raises
        ConfigError saying what to set: a change is never tried with another principal's rights."""
        from dataclasses import replace

        if role == "observer" or role == self.role:
            return self
        if role not in ACTING_ROLES:
            raise ConfigError(f"cluster {self.name!r}: no principal role {role!r}; roles: {', '.join(ROLES)}")
        if self.authenticates and not self.has_role(role):
            env = role.upper()
            raise ConfigError(
                f"cluster {self.name!r}: no {role} principal is configured, and {ROLE_USES[role]} never run as "
                f"another principal (the observer {self.principal} may not change the cluster). Set `{role}:` "
                "(sasl_username and sasl_password, or ssl_cert and ssl_key) under the cluster in the clusters "
                f"file, or KBOT_{env}_SASL_USERNAME and KBOT_{env}_SASL_PASSWORD."
            )

        changes: dict[str, Any] = {"role": role, "client_id": f"{self.client_id}-{role}"}
        for other in ACTING_ROLES:
            changes.update({f"{other}_{k}": None for k in _ROLE_KEYS})
        if getattr(self, f"{role}_sasl_username"):
            changes.update(
                sasl_username=getattr(self, f"{role}_sasl_username"),
                sasl_password=getattr(self, f"{role}_sasl_password"),
            )
        if getattr(self, f"{role}_ssl_cert"):
            changes.update(
                ssl_cert=getattr(self, f"{role}_ssl_cert"),
                ssl_key=getattr(self, f"{role}_ssl_key"),
                ssl_key_password=getattr(self, f"{role}_ssl_key_password"),
            )
        return replace(self, **changes)

    def as_operator(self) -> "ClusterConfig":
        """The operator's credentials (elect-leaders, abort-txn): :meth:`as_role`."""
        return self.as_role("operator")

    def as_config(self) -> "ClusterConfig":
        """The config principal's credentials (retention, throttle): :meth:`as_role`."""
        return self.as_role("config")

    def role_principals(self) -> dict[str, str | None]:
        """Each role -> the principal it authenticates as (None: not configured), for the audit."""
        out: dict[str, str | None] = {}
        for role in ROLES:
            try:
                out[role] = self.as_role(role).principal
            except ConfigError:
                out[role] = None
        return out

    def _tls_setting(self, key: str) -> str:
        """The setting an operator edits for ``key`` (ssl_ca / ssl_cert / ssl_key) of this config."""
        role = "" if self.role == "observer" or key == "ssl_ca" else self.role
        if self.source == "env":
            return f"KBOT_{role.upper() + '_' if role else ''}{key.upper()}"
        dotted = f"{role}.{key}" if role else key
        return f"{dotted} (in {self.source[5:]})" if self.source.startswith("file:") else dotted

    def missing_tls_files(self) -> list[str]:
        """The TLS files this configuration names that cannot be used, each as "setting path (why)":
        missing, unreadable, or not what OpenSSL can load (garbage, not PEM, a key that is not the
        certificate's). librdkafka reports these as OpenSSL errors ("BIO lib", "ssl.ca.location
        failed: ...") that name neither the setting nor the file."""
        named = (("ssl_ca", self.ssl_ca), ("ssl_cert", self.ssl_cert), ("ssl_key", self.ssl_key))
        out = []
        usable: dict[str, tuple[str, str | None]] = {}
        for key, path in named if self.uses_ssl else ():
            setting = self._tls_setting(key)
            usable[key] = (setting, None)
            if not path:
                continue
            if not os.path.exists(path):
                out.append(f"{setting} {path} (no such file)")
            elif not os.path.isfile(path) or not os.access(path, os.R_OK):
                out.append(f"{setting} {path} (not a readable file)")
            else:
                usable[key] = (setting, path)
        if usable and not out:
            password = str(self.ssl_key_password) if self.ssl_key_password else None
            out += unusable_files(usable["ssl_ca"], usable["ssl_cert"], usable["ssl_key"], password)
        return out

    def confluent_conf(self) -> dict[str, str]:
        """Settings for confluent-kafka / librdkafka (dotted names)."""
        conf: dict[str, str] = {
            "bootstrap.servers": ",".join(self.bootstrap_list),
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
        }
        if self.uses_sasl:
            assert self.sasl_mechanism and self.sasl_username and self.sasl_password  # validate() saw to it
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.sasl_password
        if self.uses_ssl:
            if self.ssl_ca:
                conf["ssl.ca.location"] = self.ssl_ca
            if self.ssl_cert:
                assert self.ssl_key  # validate(): mTLS needs both
                conf["ssl.certificate.location"] = self.ssl_cert
                conf["ssl.key.location"] = self.ssl_key
            if self.ssl_key_password:
                conf["ssl.key.password"] = self.ssl_key_password
        return conf

    def kafka_python_conf(self) -> dict[str, str | list[str]]:
        """Keyword arguments for kafka-python clients (underscore names)."""
        conf: dict[str, str | list[str]] = {
            "bootstrap_servers": self.bootstrap_list,
            "security_protocol": self.security_protocol,
            "client_id": self.client_id,
        }
        if self.uses_sasl:
            assert self.sasl_mechanism and self.sasl_username and self.sasl_password  # validate() saw to it
            conf["sasl_mechanism"] = self.sasl_mechanism
            conf["sasl_plain_username"] = self.sasl_username
            conf["sasl_plain_password"] = self.sasl_password
        if self.uses_ssl:
            if self.ssl_ca:
                conf["ssl_cafile"] = self.ssl_ca
            if self.ssl_cert:
                assert self.ssl_key  # validate(): mTLS needs both
                conf["ssl_certfile"] = self.ssl_cert
                conf["ssl_keyfile"] = self.ssl_key
            if self.ssl_key_password:
                conf["ssl_password"] = self.ssl_key_password
        return conf

    def safe_dict(self) -> dict[str, object]:
        """All settings with secrets masked, for display and logs."""
        out: dict[str, object] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Secret):
                v = MASK
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.safe_dict().items() if v not in (None, (), []))
        return f"ClusterConfig({inner})"

    __str__ = __repr__


# ---- loading -------------------------------------------------------------------

_FILE_KEYS = {
    "bootstrap",
    "bootstrap_servers",
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_key_password",
    "expected_brokers",
    "client_id",
    "metrics_targets",
    "config",
    "operator",
}
_ROLE_KEYS = ("sasl_username", "sasl_password", "ssl_cert", "ssl_key", "ssl_key_password")
_OPERATOR_KEYS = set(_ROLE_KEYS)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _broker_ids(value: str | Iterable[object] | None, cluster: str) -> list[int]:
    if value is None or value == "":
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    try:
        return [int(str(i).strip()) for i in items if str(i).strip() != ""]
    except ValueError:
        raise ConfigError(
            f"cluster {cluster!r}: expected_brokers must be broker ids (integers), got {value!r}"
        ) from None


def _expand(value: T, env: Mapping[str, str], where: str) -> T | str:
    """Replace ${VAR} in string values with the value in ``env``: the environment the settings
    were loaded from (KbotSettings.environ)."""
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in env:
            raise ConfigError(f"{where} refers to ${{{var}}}, which is not set in the environment")
        return env[var]

    return _VAR.sub(sub, value)


def clusters_file(settings: KbotSettings) -> Path:
    return settings.clusters_file


def _env_cluster(s: KbotSettings) -> ClusterConfig | None:
    bootstrap = (s.kbot_bootstrap or "").strip()
    if not bootstrap:
        return None

    def g(value: str | Path | None) -> str | None:
        return str(value).strip() or None if value is not None else None

    def secret(value: SecretStr | None) -> Secret | None:  # not stripped: passwords are opaque
        return _secret(value.get_secret_value()) if value is not None else None

    return ClusterConfig(
        name=g(s.kbot_cluster_name) or "default",
        bootstrap=bootstrap,
        security_protocol=s.kbot_security_protocol,
        sasl_mechanism=s.kbot_sasl_mechanism,
        sasl_username=g(s.kbot_sasl_username),
        sasl_password=secret(s.kbot_sasl_password),
        ssl_ca=g(s.kbot_ssl_ca),
        ssl_cert=g(s.kbot_ssl_cert),
        ssl_key=g(s.kbot_ssl_key),
        ssl_key_password=secret(s.kbot_ssl_key_password),
        expected_brokers=tuple(_broker_ids(g(s.kbot_expected_brokers), "env")),
        metrics_targets=g(s.kbot_metrics_targets),
        config_sasl_username=g(s.kbot_config_sasl_username),
        config_sasl_password=secret(s.kbot_config_sasl_password),
        config_ssl_cert=g(s.kbot_config_ssl_cert),
        config_ssl_key=g(s.kbot_config_ssl_key),
        config_ssl_key_password=secret(s.kbot_config_ssl_key_password),
        operator_sasl_username=g(s.kbot_operator_sasl_username),
        operator_sasl_password=secret(s.kbot_operator_sasl_password),
        operator_ssl_cert=g(s.kbot_operator_ssl_cert),
        operator_ssl_key=g(s.kbot_operator_ssl_key),
        operator_ssl_key_password=secret(s.kbot_operator_ssl_key_password),
        source="env",
    )


def _from_file(path: Path, env: Mapping[str, str]) -> tuple[dict[str, ClusterConfig], str | None]:
    import yaml

    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping with 'clusters:' and 'default:'")
    warn_once(path, doc)  # passwords in a file others can read: said at every load's first sight
    unknown_top = set(doc) - {"clusters", "default", "channels"}
    if unknown_top:
        raise ConfigError(
            f"{path}: unknown top-level key(s) {sorted(unknown_top)}; expected 'clusters', 'default' and 'channels'"
        )
    raw = doc.get("clusters") or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: 'clusters' must map cluster names to settings")
    out: dict[str, ClusterConfig] = {}
    for name, settings in raw.items():
        name = str(name)
        where = f"{path}: cluster {name!r}"
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: settings must be a mapping")
        bad = set(settings) - _FILE_KEYS
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {sorted(bad)}; allowed: {sorted(_FILE_KEYS)}")
        roles: dict[str, dict[str, Any]] = {}
        for role in ACTING_ROLES:
            given = settings.get(role) or {}
            if not isinstance(given, dict):
                raise ConfigError(
                    f"{where}: {role!r} must map to sasl_username / sasl_password (or ssl_cert / ssl_key)"
                )
            bad = set(given) - _OPERATOR_KEYS
            if bad:
                raise ConfigError(f"{where}: unknown {role} key(s) {sorted(bad)}; allowed: {sorted(_OPERATOR_KEYS)}")
            roles[role] = given
        # YAML values, any type: ClusterConfig normalises them and validate() says what is wrong
        s: dict[str, Any] = {
            k: _expand(v, env, f"{where} key {k!r}") for k, v in settings.items() if k not in ACTING_ROLES
        }
        for role, given in roles.items():
            s.update({f"{role}_{k}": _expand(v, env, f"{where} key '{role}.{k}'") for k, v in given.items()})
        bootstrap = s.pop("bootstrap", None) or s.pop("bootstrap_servers", None)
        s.pop("bootstrap_servers", None)
        if isinstance(bootstrap, list):
            bootstrap = ",".join(map(str, bootstrap))
        if not bootstrap:
            raise ConfigError(f"{where}: 'bootstrap' is missing")
        out[name] = ClusterConfig(name=name, bootstrap=str(bootstrap), source=f"file:{path}", **s)
    default = doc.get("default")
    if default is not None:
        default = str(default)
        if default not in out:
            raise ConfigError(
                f"{path}: default cluster {default!r} is not among the configured clusters: {', '.join(out) or 'none'}"
            )
    return out, default


def load_config(settings: KbotSettings, path: str | Path | None = None) -> tuple[dict[str, ClusterConfig], str | None]:
    """All configured clusters and the name of the default one (None if no rule picks one), from
    the settings (loaded once, at the process's edge); ``path`` defaults to :func:`clusters_file`.
    ``${VAR}`` in the file expands from the environment the settings were loaded from."""
    explicit = path is not None or settings.kbot_clusters_file is not None
    path = Path(path).expanduser() if path is not None else settings.clusters_file
    clusters: dict[str, ClusterConfig] = {}
    default = None
    if path.is_file():
        clusters, default = _from_file(path, settings.environ)
    elif explicit:
        raise ConfigError(f"clusters file {path} does not exist")
    env_cluster = _env_cluster(settings)
    if env_cluster is not None:
        clusters[env_cluster.name] = env_cluster  # env overrides a file cluster of the same name
        default = env_cluster.name
    chosen = (settings.kbot_cluster or "").strip()
    if chosen:
        if chosen not in clusters:
            raise UnknownCluster(chosen, sorted(clusters))
        default = chosen
    if default is None and len(clusters) == 1:
        default = next(iter(clusters))
    return clusters, default


def load_channels(settings: KbotSettings, path: str | Path | None = None) -> dict[str, str]:
    """Slack channel id -> cluster name: the clusters file's ``channels:`` mapping, then
    ``KBOT_CHANNEL_CLUSTERS`` ("C0PROD=prod,C0STAGE=staging") on top. Every name must be a
    configured cluster, so a typo fails at start-up rather than in the middle of an incident."""
    import yaml

    clusters, _default = load_config(settings, path)
    file = Path(path).expanduser() if path is not None else clusters_file(settings)
    out: dict[str, str] = {}
    if file.is_file():
        raw = (yaml.safe_load(file.read_text()) or {}).get("channels") or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{file}: 'channels' must map Slack channel ids to cluster names")
        out.update({str(k): str(v) for k, v in raw.items()})
    for item in filter(None, (x.strip() for x in (settings.kbot_channel_clusters or "").split(","))):
        channel, sep, name = item.partition("=")
        if not sep or not channel.strip() or not name.strip():
            raise ConfigError(f"KBOT_CHANNEL_CLUSTERS entry {item!r} is not <channel id>=<cluster>")
        out[channel.strip()] = name.strip()
    for channel, name in out.items():
        if name not in clusters:
            raise ConfigError(
                f"channel {channel} is mapped to cluster {name!r}, which is not configured; "
                f"configured clusters: {', '.join(sorted(clusters)) or 'none'}"
            )
    return out


def clusters_file_warnings(settings: KbotSettings) -> list[str]:
    """What `kbot config` warns about the clusters file: passwords in it that others can read."""
    import yaml

    path = settings.clusters_file
    try:
        doc = yaml.safe_load(path.read_text()) if path.is_file() else None
    except (OSError, yaml.YAMLError):
        return []  # loading it says what is wrong with it
    warning = readable_by_others(path, doc)
    return [warning] if warning else []


def load_clusters(settings: KbotSettings, path: str | Path | None = None) -> dict[str, ClusterConfig]:
    return load_config(settings, path)[0]


def get_cluster(name: str | None, settings: KbotSettings, path: str | Path | None = None) -> ClusterConfig:
    """The named cluster, or the default one for ``name=None``."""
    clusters, default = load_config(settings, path)
    if name is None:
        if default is None:
            if not clusters:
                raise ConfigError(
                    "no Kafka cluster is configured: set KBOT_BOOTSTRAP=host:port or create "
                    f"{clusters_file(settings)} with a 'clusters:' section"
                )
            raise ConfigError(
                "several Kafka clusters are configured but none is the default; "
                f"set 'default:' in the clusters file or KBOT_CLUSTER to one of: "
                f"{', '.join(sorted(clusters))}"
            )
        name = default
    try:
        return clusters[name]
    except KeyError:
        raise UnknownCluster(name, sorted(clusters)) from None
