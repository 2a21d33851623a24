"""live.config: env and file sources, several clusters, secret masking and the
mapping to confluent-kafka / kafka-python settings. No cluster needed."""

from __future__ import annotations

import logging
import pickle
import shutil
import subprocess

import pytest

from kbot_settings import load as load_settings
from live.config import (
    ClusterConfig,
    ConfigError,
    Secret,
    UnknownCluster,
    clusters_file,
    get_cluster,
    load_clusters,
    load_config,
)

PASSWORD = "s3cr3t-Pa55word!"
KEY_PASSWORD = "key-pa55-xyz"

CLUSTERS_YAML = (
    """
default: dev
clusters:
  dev:
    bootstrap: 127.0.0.1:19091,127.0.0.1:19092
  prod:
    bootstrap_servers: [kafka-1.prod:9093, kafka-2.prod:9093]
    security_protocol: SASL_SSL
    sasl_mechanism: SCRAM-SHA-512
    sasl_username: kbot
    sasl_password: ${PROD_KAFKA_PASSWORD}
    ssl_ca: /etc/kbot/prod-ca.pem
    expected_brokers: [1, 2, 3]
  secure:
    bootstrap: kafka.secure:9094
    security_protocol: SSL
    ssl_ca: /etc/kbot/ca.pem
    ssl_cert: /etc/kbot/client.pem
    ssl_key: /etc/kbot/client.key
    ssl_key_password: "%s"
    expected_brokers: "10,11"
"""
    % KEY_PASSWORD
)


@pytest.fixture
def clusters_path(tmp_path):
    p = tmp_path / "clusters.yaml"
    p.write_text(CLUSTERS_YAML)
    return p


def env_for(path=None, **extra):
    env = {"HOME": "/nonexistent-home", "PROD_KAFKA_PASSWORD": PASSWORD}
    if path is not None:
        env["KBOT_CLUSTERS_FILE"] = str(path)
    env.update(extra)
    return env


# ---- sources --------------------------------------------------------------------


def test_env_defines_the_default_cluster():
    env = env_for(
        KBOT_BOOTSTRAP="b1:9092, b2:9092",
        KBOT_SECURITY_PROTOCOL="sasl_ssl",
        KBOT_SASL_MECHANISM="SCRAM-SHA-256",
        KBOT_SASL_USERNAME="bot",
        KBOT_SASL_PASSWORD=PASSWORD,
        KBOT_SSL_CA="/ca.pem",
        KBOT_EXPECTED_BROKERS="1, 2,3",
        KBOT_HOME="/nonexistent-kbot-home",
    )
    cfg = get_cluster(None, load_settings(env))
    assert cfg.name == "default" and cfg.source == "env"
    assert cfg.bootstrap_list == ["b1:9092", "b2:9092"]
    assert cfg.security_protocol == "SASL_SSL" and cfg.sasl_mechanism == "SCRAM-SHA-256"
    assert cfg.sasl_password == PASSWORD and isinstance(cfg.sasl_password, Secret)
    assert cfg.expected_brokers == (1, 2, 3)
    assert load_clusters(load_settings(env)) == {"default": cfg}


def test_env_cluster_name_can_be_set():
    env = env_for(KBOT_BOOTSTRAP="b1:9092", KBOT_CLUSTER_NAME="staging", KBOT_HOME="/nonexistent")
    assert get_cluster(None, load_settings(env)).name == "staging"
    assert get_cluster("staging", load_settings(env)).bootstrap == "b1:9092"


def test_file_with_several_clusters_and_a_default(clusters_path):
    env = env_for(clusters_path)
    clusters, default = load_config(load_settings(env))
    assert sorted(clusters) == ["dev", "prod", "secure"] and default == "dev"
    assert get_cluster(None, load_settings(env)).name == "dev"
    prod = get_cluster("prod", load_settings(env))
    assert prod.bootstrap_list == ["kafka-1.prod:9093", "kafka-2.prod:9093"]
    assert prod.sasl_password == PASSWORD  # ${PROD_KAFKA_PASSWORD} expanded
    assert prod.expected_brokers == (1, 2, 3)
    assert prod.source == f"file:{clusters_path}"
    assert get_cluster("secure", load_settings(env)).expected_brokers == (10, 11)


def test_default_file_location_is_kbot_home(tmp_path):
    (tmp_path / "clusters.yaml").write_text(CLUSTERS_YAML)
    env = env_for(KBOT_HOME=str(tmp_path))
    assert clusters_file(load_settings(env)) == tmp_path / "clusters.yaml"
    assert sorted(load_clusters(load_settings(env))) == ["dev", "prod", "secure"]
    # and without KBOT_HOME: ~/.kbot/clusters.yaml
    assert str(clusters_file(load_settings({}))).endswith(".kbot/clusters.yaml")


def test_env_cluster_joins_the_file_clusters_and_becomes_default(clusters_path):
    env = env_for(clusters_path, KBOT_BOOTSTRAP="127.0.0.1:9092")
    clusters, default = load_config(load_settings(env))
    assert sorted(clusters) == ["default", "dev", "prod", "secure"] and default == "default"


def test_kbot_cluster_selects_the_default(clusters_path):
    env = env_for(clusters_path, KBOT_CLUSTER="prod")
    assert get_cluster(None, load_settings(env)).name == "prod"
    with pytest.raises(UnknownCluster):
        get_cluster(None, load_settings(env_for(clusters_path, KBOT_CLUSTER="nope")))


def test_unknown_cluster_lists_the_configured_names(clusters_path):
    with pytest.raises(UnknownCluster) as ei:
        get_cluster("staging", load_settings(env_for(clusters_path)))
    msg = str(ei.value)
    assert "'staging'" in msg and "dev, prod, secure" in msg
    assert ei.value.known == ["dev", "prod", "secure"]
    assert isinstance(ei.value, ConfigError) and isinstance(ei.value, LookupError)


def test_nothing_configured_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="KBOT_BOOTSTRAP"):
        get_cluster(None, load_settings({"KBOT_HOME": str(tmp_path)}))


def test_several_clusters_without_default(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("clusters:\n  a: {bootstrap: 'h:1'}\n  b: {bootstrap: 'h:2'}\n")
    with pytest.raises(ConfigError, match="none is the default.*a, b"):
        get_cluster(None, load_settings(env_for(p)))
    # a single cluster is the default without saying so
    p.write_text("clusters:\n  only: {bootstrap: 'h:1'}\n")
    assert get_cluster(None, load_settings(env_for(p))).name == "only"


@pytest.mark.parametrize(
    "text, match",
    [
        ("clusters:\n  a: {bootstrap: 'h:1', sasl_pasword: x}\n", "unknown key.*sasl_pasword"),
        ("clusters:\n  a: {security_protocol: SSL}\n", "'bootstrap' is missing"),
        ("default: b\nclusters:\n  a: {bootstrap: 'h:1'}\n", "default cluster 'b' is not among"),
        ("clusters:\n  a: {bootstrap: 'h:1', sasl_password: '${NOT_SET_ANYWHERE}'}\n", r"\$\{NOT_SET_ANYWHERE\}"),
        ("clusters: [1, 2]\n", "must map cluster names"),
        ("clusterz: {}\n", "unknown top-level key"),
        ("clusters:\n  a: {bootstrap: 'h:1', expected_brokers: [one]}\n", "expected_brokers"),
        ("clusters: {a: [\n", "not valid YAML"),
    ],
)
def test_bad_files_are_clear_errors(tmp_path, text, match):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_clusters(load_settings(env_for(p)))


def test_explicit_missing_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_clusters(load_settings(env_for(tmp_path / "missing.yaml")))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bootstrap=""), "empty"),
        (dict(bootstrap="no-port"), "not host:port"),
        (dict(bootstrap="h:1", security_protocol="TLS"), "security_protocol"),
        (dict(bootstrap="h:1", security_protocol="SASL_SSL", sasl_username="u", sasl_password="p"), "sasl_mechanism"),
        (
            dict(bootstrap="h:1", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="u"),
            "sasl_username and sasl_password",
        ),
        (dict(bootstrap="h:1", sasl_mechanism="SCRAM-SHA-256"), "SASL settings given"),
        (dict(bootstrap="h:1", security_protocol="SSL", ssl_cert="/c.pem"), "both ssl_cert and ssl_key"),
        (dict(bootstrap="h:1", ssl_ca="/ca.pem"), "SSL files given"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ClusterConfig(name="x", **kwargs)


# ---- client settings ----------------------------------------------------------------


def sasl_ssl() -> ClusterConfig:
    return ClusterConfig(
        name="prod",
        bootstrap="k1:9093,k2:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="kbot",
        sasl_password=PASSWORD,
        ssl_ca="/etc/kbot/ca.pem",
    )


def mtls() -> ClusterConfig:
    return ClusterConfig(
        name="secure",
        bootstrap="k1:9094",
        security_protocol="SSL",
        ssl_ca="/etc/kbot/ca.pem",
        ssl_cert="/etc/kbot/client.pem",
        ssl_key="/etc/kbot/client.key",
        ssl_key_password=KEY_PASSWORD,
    )


def test_plaintext_conf():
    cfg = ClusterConfig(name="dev", bootstrap="127.0.0.1:19091")
    assert cfg.confluent_conf() == {
        "bootstrap.servers": "127.0.0.1:19091",
        "security.protocol": "PLAINTEXT",
        "client.id": "kbot",
    }
    assert cfg.kafka_python_conf() == {
        "bootstrap_servers": ["127.0.0.1:19091"],
        "security_protocol": "PLAINTEXT",
        "client_id": "kbot",
    }


def test_sasl_ssl_conf_mapping():
    cfg = sasl_ssl()
    assert cfg.confluent_conf() == {
        "bootstrap.servers": "k1:9093,k2:9093",
        "security.protocol": "SASL_SSL",
        "client.id": "kbot",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "kbot",
        "sasl.password": PASSWORD,
        "ssl.ca.location": "/etc/kbot/ca.pem",
    }
    assert cfg.kafka_python_conf() == {
        "bootstrap_servers": ["k1:9093", "k2:9093"],
        "security_protocol": "SASL_SSL",
        "client_id": "kbot",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "kbot",
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": "/etc/kbot/ca.pem",
    }


def test_mtls_conf_mapping():
    cfg = mtls()
    assert cfg.mtls and cfg.uses_ssl and not cfg.uses_sasl
    assert cfg.confluent_conf() == {
        "bootstrap.servers": "k1:9094",
        "security.protocol": "SSL",
        "client.id": "kbot",
        "ssl.ca.location": "/etc/kbot/ca.pem",
        "ssl.certificate.location": "/etc/kbot/client.pem",
        "ssl.key.location": "/etc/kbot/client.key",
        "ssl.key.password": KEY_PASSWORD,
    }
    assert cfg.kafka_python_conf() == {
        "bootstrap_servers": ["k1:9094"],
        "security_protocol": "SSL",
        "client_id": "kbot",
        "ssl_cafile": "/etc/kbot/ca.pem",
        "ssl_certfile": "/etc/kbot/client.pem",
        "ssl_keyfile": "/etc/kbot/client.key",
        "ssl_password": KEY_PASSWORD,
    }


def test_conf_keys_are_known_to_the_client_libraries():
    """Every key we produce is a real setting of each library (a typo would
    only show up against a real SASL/mTLS cluster otherwise)."""
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    for cfg in (sasl_ssl(), mtls()):
        assert set(cfg.kafka_python_conf()) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    # librdkafka validates names and values at construction; SASL_PLAINTEXT needs no files
    cfg = ClusterConfig(
        name="x",
        bootstrap="127.0.0.1:1",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="u",
        sasl_password=PASSWORD,
    )
    AdminClient(cfg.confluent_conf())


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")
def test_mtls_conf_loads_in_librdkafka(tmp_path):
    """librdkafka loads CA, client cert and the password-protected key when the
    client is created: proves the mTLS key names and the key password mapping."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=kbot-test-ca",
        cwd=tmp_path,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-keyout",
        "client.key",
        "-out",
        "client.csr",
        "-passout",
        f"pass:{KEY_PASSWORD}",
        "-subj",
        "/CN=kbot",
        cwd=tmp_path,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "client.pem",
        "-days",
        "1",
        cwd=tmp_path,
    )
    cfg = ClusterConfig(
        name="secure",
        bootstrap="127.0.0.1:1",
        security_protocol="SSL",
        ssl_ca=str(tmp_path / "ca.pem"),
        ssl_cert=str(tmp_path / "client.pem"),
        ssl_key=str(tmp_path / "client.key"),
        ssl_key_password=KEY_PASSWORD,
    )
    AdminClient(cfg.confluent_conf())
    wrong = ClusterConfig(**{**cfg.__dict__, "ssl_key_password": "wrong-password"})
    with pytest.raises(KafkaException):
        AdminClient(wrong.confluent_conf())


# ---- secrets never show ----------------------------------------------------------------


@pytest.mark.parametrize("make", [sasl_ssl, mtls])
def test_secrets_are_masked_in_repr_str_and_dicts(make):
    cfg = make()
    texts = [
        repr(cfg),
        str(cfg),
        f"{cfg}",
        repr(cfg.safe_dict()),
        str(cfg.safe_dict()),
        repr(cfg.confluent_conf()),
        str(cfg.confluent_conf()),
        repr(cfg.kafka_python_conf()),
        str(cfg.kafka_python_conf()),
        repr(load_config.__module__),
    ]
    for text in texts:
        assert PASSWORD not in text and KEY_PASSWORD not in text, text
    assert "***" in repr(cfg)
    assert "kbot" in repr(cfg) or "k1:9094" in repr(cfg)  # the rest is still shown


def test_secret_is_still_the_real_string():
    s = Secret(PASSWORD)
    assert s == PASSWORD and str(s) == PASSWORD and s.encode() == PASSWORD.encode()
    assert f"{s}" == PASSWORD  # formatting gives the value (clients need it) ...
    assert repr(s) == "'***'"  # ... repr (used by dict/list/dataclass reprs) never does
    assert pickle.loads(pickle.dumps(s)) == PASSWORD


def test_secrets_never_reach_the_logs(caplog):
    caplog.set_level(logging.DEBUG)
    cfg = sasl_ssl()
    log = logging.getLogger("kbot.test")
    log.info("connecting with %s", cfg)
    log.info("confluent conf %s", cfg.confluent_conf())
    log.debug("kafka-python conf %r", cfg.kafka_python_conf())
    log.info("config %s", cfg.safe_dict())
    assert PASSWORD not in caplog.text
    assert caplog.text.count("***") >= 4


def test_secret_from_file_is_masked(clusters_path):
    prod = get_cluster("prod", load_settings(env_for(clusters_path)))
    secure = get_cluster("secure", load_settings(env_for(clusters_path)))
    assert PASSWORD not in repr(load_clusters(load_settings(env_for(clusters_path))))
    assert KEY_PASSWORD not in repr(secure) and PASSWORD not in repr(prod)


# ---- the operator principal (issue 13) ------------------------------------------------------

OPERATOR_YAML = """
clusters:
  prod:
    bootstrap: kafka-1:9093
    security_protocol: SASL_SSL
    sasl_mechanism: SCRAM-SHA-512
    sasl_username: kbot-observer
    sasl_password: ${OBS_PW}
    ssl_ca: /etc/kbot/ca.pem
    operator:
      sasl_username: kbot-operator
      sasl_password: ${OP_PW}
"""


def test_operator_credentials_from_the_file(tmp_path):
    path = tmp_path / "clusters.yaml"
    path.write_text(OPERATOR_YAML)
    cfg = get_cluster(
        "prod", load_settings({"KBOT_CLUSTERS_FILE": str(path), "OBS_PW": "obs-pw-1", "OP_PW": "op-pw-2"})
    )
    assert (cfg.role, cfg.sasl_username, cfg.principal) == ("observer", "kbot-observer", "User:kbot-observer")
    op = cfg.as_operator()
    assert (op.role, op.sasl_username, str(op.sasl_password)) == ("operator", "kbot-operator", "op-pw-2")
    assert op.confluent_conf()["sasl.username"] == "kbot-operator"
    assert op.kafka_python_conf()["sasl_plain_username"] == "kbot-operator"
    assert op.ssl_ca == cfg.ssl_ca and op.bootstrap == cfg.bootstrap and not op.has_operator
    for text in (repr(cfg), str(cfg), repr(cfg.safe_dict()), repr(op), repr(op.safe_dict())):
        assert "obs-pw-1" not in text and "op-pw-2" not in text


def test_operator_credentials_from_the_environment():
    cfg = get_cluster(
        None,
        load_settings(
            {
                "KBOT_BOOTSTRAP": "k:9093",
                "KBOT_SECURITY_PROTOCOL": "SASL_SSL",
                "KBOT_SASL_MECHANISM": "SCRAM-SHA-512",
                "KBOT_SASL_USERNAME": "obs",
                "KBOT_SASL_PASSWORD": "a",
                "KBOT_OPERATOR_SASL_USERNAME": "op",
                "KBOT_OPERATOR_SASL_PASSWORD": "b",
            }
        ),
    )
    assert cfg.has_operator and cfg.as_operator().sasl_username == "op"


def test_without_operator_settings_actions_use_the_same_credentials():
    cfg = ClusterConfig(name="plain", bootstrap="k:9092")
    op = cfg.as_operator()
    assert op.role == "operator" and op.principal == "User:ANONYMOUS" and op.bootstrap == "k:9092"


def test_an_authenticated_cluster_without_an_operator_refuses_changes_up_front():
    cfg = ClusterConfig(
        name="prod",
        bootstrap="k:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="kbot-observer",
        sasl_password="pw",
    )
    with pytest.raises(ConfigError, match="no operator principal is configured") as caught:
        cfg.as_operator()
    assert "User:kbot-observer" in str(caught.value) and "KBOT_OPERATOR_SASL_USERNAME" in str(caught.value)


@pytest.mark.parametrize(
    "operator, message",
    [
        ({"sasl_username": "op"}, "the operator principal needs both sasl_username and sasl_password"),
        (
            {"sasl_password": "x", "sasl_username": "op", "ssl_cert": "/c.pem"},
            "the operator principal's mTLS needs both",
        ),
        ({"password": "x"}, "unknown operator key(s) ['password']"),
    ],
)
def test_bad_operator_settings_say_what_is_wrong(tmp_path, operator, message):
    import yaml

    path = tmp_path / "clusters.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "prod": {
                        "bootstrap": "k:9093",
                        "security_protocol": "SASL_SSL",
                        "sasl_mechanism": "SCRAM-SHA-512",
                        "sasl_username": "obs",
                        "sasl_password": "p",
                        "operator": operator,
                    }
                }
            }
        )
    )
    with pytest.raises(ConfigError) as err:
        load_clusters(load_settings({"KBOT_CLUSTERS_FILE": str(path)}))
    assert message in str(err.value)
