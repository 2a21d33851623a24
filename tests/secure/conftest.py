"""tests/secure: the secured cluster (SASL_SSL + SCRAM-SHA-512, StandardAuthorizer, no ACL = no
access), shared by every test here (secure_kafka_cluster below), and the bot set up
the way an operator would: a clusters.yaml whose cluster reads as the observer principal and acts
as the operator principal. A test that needs a principal with fewer rights makes its own SCRAM
user (as the super user) with exactly the ACLs it wants, so the shared principals never change."""

from __future__ import annotations

import uuid

import pytest
from waiting import wait_until

from commands.registry import ROUTER
from kbot_settings import load as load_settings
from localkafka.secure import Grant, acls_of, apply_acls, config_entry
from localkafka.testing import _start, second_test_cluster, secure_test_cluster, stop_test_cluster
from tests.secure.securekit import write_clusters_file

pytestmark = pytest.mark.kafka

ADMIN_TIMEOUT_S = "10"


# Package scope: the two clusters (6 JVMs) stop when this folder's tests are done, instead of
# idling through the rest of a full run on a 2-core machine.
@pytest.fixture(scope="package")
def secure_kafka_cluster():
    cluster = _start(secure_test_cluster())
    yield cluster
    stop_test_cluster(cluster)


@pytest.fixture(scope="package")
def second_kafka_cluster():
    cluster = _start(second_test_cluster())
    yield cluster
    stop_test_cluster(cluster)


@pytest.fixture(scope="package")
def secure(secure_kafka_cluster):
    return secure_kafka_cluster


@pytest.fixture(scope="package")
def topic(secure):
    """One topic for the read and action tests, created by the super user."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

    name = f"orders-{uuid.uuid4().hex[:6]}"
    admin = secure.admin()
    admin.create_topics([NewTopic(name, 3, 3)])[name].result(30)
    # CreateTopics returns once the controller committed it; a broker learns of the topic a moment
    # later, and one that has not yet answers "unknown topic" (CI saw it): wait until it is known.
    res = ConfigResource(ResourceType.TOPIC, name)
    wait_until(
        lambda: admin.describe_configs([res])[res].result(30) is not None,
        60,
        f"the brokers to know {name}",
        interval=0.2,
        ignore=(KafkaException,),
    )
    return name


@pytest.fixture
def kbot_env(secure, tmp_path):
    """The environment `kbot` would run with: clusters.yaml naming the secured cluster."""
    clusters = write_clusters_file(tmp_path / "clusters.yaml", {"secure": config_entry(secure)})
    return {
        "KBOT_CLUSTERS_FILE": str(clusters),
        "KBOT_ADMIN_TIMEOUT_S": ADMIN_TIMEOUT_S,
        "KBOT_HOME": str(tmp_path / "kbot-home"),
        "KBOT_STATE_DIR": str(tmp_path / "state"),
    }


@pytest.fixture
async def ctx(kbot_env, tmp_path):
    """The bot's context: a gateway pool on that file and a confirmation gate with its audit log."""
    from framework.context import Context
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(kbot_env))
    audit = AuditLog(tmp_path / "state" / "audit.jsonl")
    gate = ConfirmationGate(PendingStore(tmp_path / "state" / "pending.sqlite3"), audit, router=ROUTER)
    yield Context(live=pool, gate=gate)
    await pool.close()
    audit.close()


@pytest.fixture
def make_principal(secure):
    """make_principal(*grants) -> (user, password): a new SCRAM user with exactly those ACLs
    (``(operation, resource type, name)``), removed again after the test."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = secure.admin()
    made = []

    def make(*grants: tuple[str, str, str]) -> tuple[str, str]:
        user, password = f"kbot-test-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(user, info, password.encode())]
        ).values():
            fut.result(30)
        made.append(user)
        secure.wait_login(user, password)
        if grants:
            apply_acls(admin, tuple(Grant(user, op, res, name, "test") for op, res, name in grants))
        return user, password

    yield make
    for user in made:
        for fut in admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
        ).values():
            fut.result(30)
        flt = acls_of(f"User:{user}")
        admin.delete_acls([flt])[flt].result(30)
