"""The local cluster in secure mode: a SASL_SSL listener (SCRAM-SHA-512 over TLS), the standard
KRaft authorizer with ``allow.everyone.if.no.acl.found=false``, a super user for the cluster's
own use and the bot's three principals with least-privilege ACLs: the observer (reads), the config
principal (retention, throttle: ALTER_CONFIGS) and the operator (elect-leaders, abort-txn: ALTER on
the cluster, which Kafka also accepts for CreateAcls - so no other action uses it).

Listeners (why this shape):

* brokers listen on ONE listener, ``SASL_SSL://127.0.0.1:<port>``; it is the only address the
  bot (or anyone else) gets. Inter-broker replication uses the same listener, authenticated as the
  super user: no second, weaker broker port exists that a client could be pointed at by mistake,
  and replication in the local cluster is light enough that TLS costs nothing noticeable.
* the super user authenticates with SASL/PLAIN against a static user list in the brokers' own
  JAAS config; the bot's principals use SCRAM-SHA-512, created by the super user through the
  Admin API (AlterUserScramCredentials) whenever nodes were (re)started (``wait_ready``: see
  ``_provision`` for why not only once). Why not SCRAM for the super user too: replication must
  authenticate before a restarted broker has caught up with the metadata log that holds SCRAM
  credentials, and SCRAM credentials were seen missing from restarted brokers (every login
  "invalid credentials"), which would stop replication itself.
* the controller listener stays PLAINTEXT on loopback (brokers reach the controller there, and
  only there). Its peers authenticate as ``User:ANONYMOUS``, so ANONYMOUS is a super user *on the
  controller only*; SCRAM cannot serve the controller listener in KRaft (the credentials live in
  the metadata log the controller is serving), and the port is never handed to a client.

State under the cluster's folder (``secure/``, 0700; files 0600): ``ca.pem`` / ``ca.key`` (the
local CA), ``broker.p12`` (key + certificate for 127.0.0.1 and localhost, signed by the CA),
``secrets.json`` (the keystore, super-user and SCRAM passwords, generated once). SCRAM users and
ACLs are created by the super user through the Admin API right after start-up
(:func:`ensure_scram_users`, :func:`apply_acls`; both idempotent).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from live.acls import NEEDED
from localkafka.cluster import ClusterError, LocalCluster, admin_client, quiet_logger

SUPER_USER = "kbot-admin"
OBSERVER = "kbot-observer"
CONFIG = "kbot-config"
OPERATOR = "kbot-operator"
BOT_USERS = (OBSERVER, CONFIG, OPERATOR)
ROLE_USERS = {"observer": OBSERVER, "config": CONFIG, "operator": OPERATOR}
MECHANISM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CERT_DAYS = 825
SAN = "IP:127.0.0.1,DNS:localhost"


# ---- the least-privilege ACLs (also the table in docs/security.md) ---------------------------
@dataclass(frozen=True)
class Grant:
    principal: str  # user name, without "User:"
    operation: str  # confluent_kafka.admin.AclOperation name
    resource: str  # confluent_kafka.admin.ResourceType name
    name: str  # resource name ("*" = every resource of the type)
    why: str


# One table, live/acls.py NEEDED: the rights each of the bot's roles needs, granted here to the
# role's user.
GRANTS: tuple[Grant, ...] = tuple(Grant(ROLE_USERS[r.role], r.operation, r.resource, r.name, r.why) for r in NEEDED)


def _run(cmd: list[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise ClusterError(f"{what} failed: {(res.stdout + res.stderr).strip()[-800:]}")


def _private(path: Path) -> Path:
    os.chmod(path, 0o600)
    return path


def make_ca(folder: Path, cn: str = "kbot-local-ca") -> tuple[Path, Path]:
    """A self-signed CA (openssl): (ca.pem, ca.key) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pem, key = folder / "ca.pem", folder / "ca.key"
    _run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(pem),
            "-days",
            "3650",
            "-subj",
            f"/CN={cn}",
        ],
        "making the local CA",
    )
    _private(key)
    return pem, key


def sign_cert(
    folder: Path,
    stem: str,
    ca_pem: Path,
    ca_key: Path,
    *,
    days: int = CERT_DAYS,
    start: str | None = None,
    end: str | None = None,
) -> tuple[Path, Path]:
    """A key and a certificate for 127.0.0.1/localhost signed by the CA: (<stem>.pem, <stem>.key).
    ``start``/``end`` (YYYYMMDDHHMMSSZ) set the validity window explicitly - how the tests make an
    expired certificate (``openssl ca`` is the openssl 3.0 command that takes both dates)."""
    key, csr, pem = folder / f"{stem}.key", folder / f"{stem}.csr", folder / f"{stem}.pem"
    _run(
        [
            "openssl",
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(csr),
            "-subj",
            "/CN=localhost",
        ],
        f"making the {stem} key",
    )
    _private(key)
    ext = folder / f"{stem}.ext"
    ext.write_text(
        f"subjectAltName={SAN}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    if start is None and end is None:
        _run(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(csr),
                "-CA",
                str(ca_pem),
                "-CAkey",
                str(ca_key),
                "-CAcreateserial",
                "-out",
                str(pem),
                "-days",
                str(days),
                "-extfile",
                str(ext),
            ],
            f"signing {stem}",
        )
        return pem, key
    db = folder / f"{stem}.ca"
    db.mkdir(exist_ok=True)
    (db / "index.txt").write_text("")
    (db / "serial").write_text(secrets.token_hex(8) + "\n")
    conf = folder / f"{stem}.ca.cnf"
    conf.write_text(
        "[ca]\ndefault_ca=local\n[local]\n"
        f"database={db / 'index.txt'}\nserial={db / 'serial'}\nnew_certs_dir={db}\n"
        "default_md=sha256\npolicy=any\ncopy_extensions=none\nunique_subject=no\n"
        "[any]\ncommonName=supplied\n"
        f"[ext]\nsubjectAltName={SAN}\nbasicConstraints=CA:FALSE\n"
    )
    _run(
        [
            "openssl",
            "ca",
            "-batch",
            "-notext",
            "-config",
            str(conf),
            "-cert",
            str(ca_pem),
            "-keyfile",
            str(ca_key),
            "-in",
            str(csr),
            "-out",
            str(pem),
            "-startdate",
            start or "20200101000000Z",
            "-enddate",
            end or "20200102000000Z",
            "-extensions",
            "ext",
        ],
        f"signing {stem} (fixed dates)",
    )
    return pem, key


@dataclass(frozen=True)
class SecureState:
    folder: Path
    ca: Path
    keystore: Path
    keystore_password: str
    passwords: dict[str, str]  # SCRAM user -> password

    def client_conf(self, user: str, bootstrap: str, password: str | None = None) -> dict:
        """confluent-kafka settings for one of the cluster's users (the super user: PLAIN)."""
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN" if user == SUPER_USER else MECHANISM,
            "sasl.username": user,
            "sasl.password": password or self.passwords[user],
            "ssl.ca.location": str(self.ca),
        }


def ensure_state(base_dir: Path) -> SecureState:
    """Certificates and passwords, made once per cluster folder (kept across restarts); a user
    added since (kbot-config) gets its password on the next start."""
    folder = base_dir / "secure"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    meta = folder / "secrets.json"
    if not meta.exists():
        ca_pem, ca_key = make_ca(folder)
        pem, key = sign_cert(folder, "broker", ca_pem, ca_key)
        ks_pw = secrets.token_hex(16)
        p12 = folder / "broker.p12"
        _run(
            [
                "openssl",
                "pkcs12",
                "-export",
                "-in",
                str(pem),
                "-inkey",
                str(key),
                "-certfile",
                str(ca_pem),
                "-name",
                "broker",
                "-out",
                str(p12),
                "-passout",
                f"pass:{ks_pw}",
            ],
            "making the broker keystore",
        )
        _private(p12)
        doc = {
            "keystore_password": ks_pw,
            "passwords": {u: secrets.token_hex(16) for u in (SUPER_USER, *BOT_USERS)},
        }
        tmp = folder / "secrets.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1))
        _private(tmp)
        tmp.replace(meta)
    doc = json.loads(meta.read_text())
    missing = [u for u in (SUPER_USER, *BOT_USERS) if u not in doc["passwords"]]
    if missing:
        doc["passwords"].update({u: secrets.token_hex(16) for u in missing})
        tmp = folder / "secrets.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1))
        _private(tmp)
        tmp.replace(meta)
    return SecureState(folder, folder / "ca.pem", folder / "broker.p12", doc["keystore_password"], doc["passwords"])


def broker_settings(state: SecureState, port: int) -> dict[str, str]:
    pw = state.passwords[SUPER_USER]
    plain = (
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{SUPER_USER}" '
        f'password="{pw}" user_{SUPER_USER}="{pw}";'
    )
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": f"{MECHANISM},PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(state.keystore),
        "ssl.keystore.password": state.keystore_password,
        "ssl.key.password": state.keystore_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(state.ca),
        "ssl.endpoint.identification.algorithm": "https",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER}",
    }


def controller_settings() -> dict[str, str]:
    # ANONYMOUS = the brokers on the loopback-only PLAINTEXT controller listener (see the module doc)
    return {
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{SUPER_USER};User:ANONYMOUS",
    }


def ensure_scram_users(admin, users: dict[str, str], timeout: float = 30) -> None:
    """Create (or reset to the same password) SCRAM-SHA-512 users, as the super user."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upserts = [UserScramCredentialUpsertion(u, info, p.encode()) for u, p in users.items()]
    for fut in admin.alter_user_scram_credentials(upserts, request_timeout=timeout).values():
        fut.result()


def apply_acls(admin, grants: tuple[Grant, ...] = GRANTS, timeout: float = 30) -> int:
    """Create the ACL bindings (as the super user); existing ones are left as they are."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    # confluent-kafka names Kafka's CLUSTER resource type (code 4) BROKER
    rtype = lambda name: ResourceType.BROKER if name == "CLUSTER" else getattr(ResourceType, name)  # noqa: E731
    bindings = [
        AclBinding(
            rtype(g.resource),
            g.name,
            ResourcePatternType.LITERAL,
            f"User:{g.principal}",
            "*",
            getattr(AclOperation, g.operation),
            AclPermissionType.ALLOW,
        )
        for g in grants
    ]
    for fut in admin.create_acls(bindings, request_timeout=timeout).values():
        fut.result()
    return len(bindings)


def acls_of(principal: str):
    """A filter that matches every ACL binding of ``principal`` (``User:name``), any resource."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY
    )


def prune_acls(admin, grants: tuple[Grant, ...] = GRANTS, timeout: float = 30) -> int:
    """Delete the bot users' ALLOW bindings that the grant table does not hold (as the super user):
    a cluster created before a right moved to another principal (ALTER_CONFIGS from kbot-operator
    to kbot-config) must not keep the old, wider grants. Returns how many were deleted."""
    from confluent_kafka.admin import AclBindingFilter

    wanted = {(g.principal, g.operation, g.resource, g.name) for g in grants}
    stale = []
    for user in sorted({g.principal for g in grants}):
        for b in admin.describe_acls(acls_of(f"User:{user}"), request_timeout=timeout).result(timeout):
            rtype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
            key = (user, b.operation.name, rtype, b.name)
            if key not in wanted or b.resource_pattern_type.name != "LITERAL" or b.permission_type.name != "ALLOW":
                stale.append(
                    AclBindingFilter(
                        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
                    )
                )
    if stale:
        for fut in admin.delete_acls(stale, request_timeout=timeout).values():
            fut.result()
    return len(stale)


class SecureCluster(LocalCluster):
    """LocalCluster with the SASL_SSL listener and ACLs. ``up()`` also applies the ACLs, so a
    cluster started by `kbot cluster up --secure` is ready for the bot's three principals."""

    secure = True

    def __init__(self, *args, acl_grants: tuple[Grant, ...] = GRANTS, **kwargs):
        super().__init__(*args, **kwargs)
        self.acl_grants = acl_grants
        self._state: SecureState | None = None
        self._provisioned = False

    @property
    def state(self) -> SecureState:
        if self._state is None:
            self._state = ensure_state(self.base_dir)
        return self._state

    def client_conf(self, user: str = SUPER_USER) -> dict:
        return self.state.client_conf(user, self.bootstrap_servers)

    def kafka_python_conf(self, user: str = SUPER_USER) -> dict:
        return {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN" if user == SUPER_USER else MECHANISM,
            "sasl_plain_username": user,
            "sasl_plain_password": self.state.passwords[user],
            "ssl_cafile": str(self.state.ca),
        }

    def admin(self, **extra):
        conf = {k: v for k, v in self.client_conf().items() if k != "bootstrap.servers"}
        if extra:
            return admin_client(self.bootstrap_servers, **conf, **extra)
        if self._admin is None:
            self._admin = admin_client(self.bootstrap_servers, **conf)
        return self._admin

    def _render(self, node) -> None:
        super()._render(node)
        extra = broker_settings(self.state, node.port) if node.role == "broker" else controller_settings()
        # a later key wins in java.util.Properties, so these replace the plain listener lines
        with node.props_file.open("a") as f:
            f.write("\n# secure mode (localkafka/secure.py)\n" + "".join(f"{k}={v}\n" for k, v in extra.items()))
        os.chmod(node.props_file, 0o600)  # it holds the keystore and super-user passwords

    def up(
        self, timeout: float = 180.0, progress: Callable[[str], None] | None = None, *, metrics: bool = True
    ) -> "SecureCluster":
        _ = self.state  # certificates before the first render
        self._provisioned = False
        super().up(timeout, progress, metrics=metrics)  # wait_ready() provisions whenever a node was (re)started ...
        if not self._provisioned:  # ... and a cluster that was already running gets it here
            self._provision(timeout)
        return self

    def wait_ready(
        self,
        timeout: float = 120.0,
        brokers: list[int] | None = None,
        progress: Callable[[str], None] | None = None,
        progress_every_s: float = 10.0,
        *,
        metrics: bool = True,
    ) -> None:
        super().wait_ready(timeout, brokers, progress, progress_every_s, metrics=metrics)
        if progress is not None:
            progress("provisioning the bot's SCRAM users and ACLs")
        self._provision(timeout)

    def _provision(self, timeout: float) -> None:
        """The bot's SCRAM users and ACLs, (re)written by the super user, then a login check.
        Done after every (re)start, not only the first: with Kafka 4.3.1, brokers restarted after
        other principals and their ACLs had been deleted (tests/secure's make_principal) came
        back with NO SCRAM credentials (DescribeUserScramCredentials empty, every SCRAM login
        "invalid credentials") although the metadata log still held the records; re-upserting
        them restores the logins at once. Cheap (one request each) and idempotent."""
        ensure_scram_users(self.admin(), {u: p for u, p in self.state.passwords.items() if u != SUPER_USER})
        apply_acls(self.admin(), self.acl_grants)
        prune_acls(self.admin(), self.acl_grants)
        for user in BOT_USERS:
            self.wait_login(user, timeout=timeout)
        self._provisioned = True

    def wait_login(self, user: str, password: str | None = None, timeout: float = 60) -> None:
        """Wait until every broker accepts ``user``'s login: new SCRAM credentials reach the
        brokers through the metadata log. A Metadata request needs no ACL."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        for broker in self.brokers.values():
            conf = {**self.state.client_conf(user, f"127.0.0.1:{broker.port}", password), "logger": quiet_logger()}
            client = AdminClient(conf)
            while True:
                try:
                    client.list_topics(timeout=5)
                    break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        raise ClusterError(
                            f"broker {broker.node_id} does not accept the login of {user}: {exc}"
                        ) from None
                    time.sleep(0.5)

    def status(self) -> dict:
        st = super().status()
        st["security"] = {
            "listener": "SASL_SSL",
            "sasl_mechanism": MECHANISM,
            "ca": str(self.state.ca),
            "users": [SUPER_USER, *BOT_USERS],
            "secrets_file": str(self.state.folder / "secrets.json"),
        }
        return st


def config_entry(cluster: SecureCluster, role_passwords: bool = True) -> dict:
    """The cluster's entry for clusters.yaml (live/config.py): the observer reads, the config
    principal changes configs, the operator elects leaders and aborts transactions. The passwords
    are inlined; for anything but this local cluster use ${VAR} instead."""
    st = cluster.state
    return {
        "bootstrap": cluster.bootstrap_servers,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": MECHANISM,
        "sasl_username": OBSERVER,
        "sasl_password": st.passwords[OBSERVER],
        "ssl_ca": str(st.ca),
        "expected_brokers": sorted(cluster.brokers),
        "config": {"sasl_username": CONFIG, "sasl_password": st.passwords[CONFIG]},
        "operator": {"sasl_username": OPERATOR, "sasl_password": st.passwords[OPERATOR]},
    }
