"""Issue 37 item 7: the gate and the actions from a terminal, against the real local cluster.

Each through `kbot ask` in a process of its own (the exit code is what a script sees), on a
clusters file that names the shared test cluster twice ("main", the default, and "twin"), with no
RBAC policy and no Slack: an engineer alone at the console."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
DAY_MS = "86400000"  # this cluster's brokers set log.retention.hours=24: a new topic starts at a day


@pytest.fixture
def terminal(actions_cluster, tmp_path):
    """Run `kbot ask ARGS...` as the console user would: (exit code, the JSON reply or stdout, stderr)."""
    entry = {"bootstrap": actions_cluster.bootstrap_servers}
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"default": "main", "clusters": {"main": entry, "twin": entry}}))
    clusters.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(
        KBOT_CLUSTERS_FILE=str(clusters),
        KBOT_HOME=str(tmp_path / "home"),
        KBOT_STATE_DIR=str(tmp_path / "state"),
        KBOT_LAKE="0",
        KBOT_ADMIN_TIMEOUT_S="10",
    )

    def ask(*args: str, as_json: bool = True):
        cmd = [sys.executable, "-m", "cli.main", "ask", *(["--json"] if as_json else []), *args]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        return proc.returncode, (json.loads(proc.stdout) if as_json else proc.stdout), proc.stderr

    return ask


def _topic(actions_cluster) -> str:
    name = f"holes-{uuid.uuid4().hex[:6]}"
    actions_cluster.faults.create_topic(name, partitions=1, replication_factor=3)
    return name


def _retention(actions_cluster, topic: str) -> str:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": actions_cluster.bootstrap_servers, "allow.auto.create.topics": False})
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(30)["retention.ms"].value


def _token(reply: dict) -> str:
    return next(a["command"].split()[1] for a in reply["actions"] if a["command"].startswith("cancel "))


@pytest.mark.kafka
def test_retention_forever_warns_of_unbounded_disk_growth_and_needs_a_second_approver(actions_cluster, terminal):
    topic = _topic(actions_cluster)
    rc, preview, _ = terminal(f"retention {topic} -1")
    assert rc == 0 and preview["title"] == "Preview: retention", preview
    said = json.dumps(preview)
    assert "unbounded disk growth" in said and "retention.bytes is -1 too, so nothing bounds it" in said
    assert "a second approver (not the requester) must confirm" in said
    token = _token(preview)
    rc, refused, _ = terminal(f"confirm {token}")
    assert rc == 2 and "Self-approval is refused" in refused["verdict"], refused
    # alone at the console: break-glass says plainly that nobody can approve, and how to change that
    rc, alone, _ = terminal(f"break-glass {token} the only engineer awake, disk has room for a week")
    text = json.dumps(alone)
    assert rc == 2 and alone["title"] == "Not confirmed", alone
    assert "named below" not in text
    assert "No approver is configured" in text and "KBOT_RBAC_FILE" in text and "break_glass rule" in text
    assert _retention(actions_cluster, topic) == DAY_MS  # nothing changed


@pytest.mark.kafka
def test_confirm_naming_another_cluster_is_refused_and_names_the_tokens_cluster(actions_cluster, terminal):
    topic = _topic(actions_cluster)
    rc, preview, _ = terminal(f"retention {topic} 2d")  # raising it: the requester confirms alone
    assert rc == 0 and "the requester confirms" in json.dumps(preview), preview
    token = _token(preview)
    rc, refused, _ = terminal("--cluster", "twin", f"confirm {token}")
    assert rc == 2, refused
    assert refused["verdict"].startswith("This token is for cluster main, not twin"), refused["verdict"]
    assert _retention(actions_cluster, topic) == DAY_MS
    rc, done, _ = terminal(f"confirm {token}")  # the token still works where it was previewed
    assert rc == 0 and done["title"] == "Done: retention", done
    assert _retention(actions_cluster, topic) == str(2 * int(DAY_MS))


@pytest.mark.kafka
def test_an_action_that_cannot_go_ahead_exits_1(actions_cluster, terminal):
    from confluent_kafka.admin import AdminClient

    topic = _topic(actions_cluster)
    rc, same, _ = terminal(f"retention {topic} 1d")  # the value it has: a precondition fails
    assert same["title"] == "Preview: retention" and same["severity"] == "error", same
    assert rc == 1 and same["outcome"] == "failed"
    rc, preview, _ = terminal(f"retention {topic} 2d")
    assert rc == 0
    # someone else changes it meanwhile, with a client of their own: what was approved is not what would run
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": actions_cluster.bootstrap_servers, "allow.auto.create.topics": False})
    change = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    wait_until(lambda: _retention(actions_cluster, topic) == "3600000", 30, "the outside change", interval=0.3)
    rc, aborted, _ = terminal(f"confirm {_token(preview)}")
    assert aborted["title"] == "Not executed: retention" and rc == 1, aborted
    assert "unchanged since the preview" in json.dumps(aborted)
    assert _retention(actions_cluster, topic) == "3600000"


def test_full_before_the_question_is_the_same_as_after_it(terminal_env):
    before = subprocess.run(
        [sys.executable, "-m", "cli.main", "ask", "--full", "runbook PRODUCER_FENCED"], **terminal_env
    )
    after = subprocess.run([sys.executable, "-m", "cli.main", "ask", "runbook PRODUCER_FENCED --full"], **terminal_env)
    assert before.returncode == 0, before.stderr[-2000:]
    assert before.stdout == after.stdout and len(before.stdout) > 500


@pytest.fixture
def terminal_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(KBOT_HOME=str(tmp_path / "home"), KBOT_STATE_DIR=str(tmp_path / "state"), KBOT_LAKE="0")
    return {"cwd": ROOT, "env": env, "capture_output": True, "text": True, "timeout": 180}


async def test_a_failed_action_is_a_failure_exit_1(tmp_path):
    """The other side of the gate is a test double here (an action whose change fails); the gate,
    the dispatch and the exit code are the real ones."""
    sys.path.insert(0, str(ROOT / "tests" / "slack"))
    from slack_fakes import FakeAction, router_with

    from commands.registry import answer
    from framework.context import Context
    from gate.audit import AuditLog
    from gate.confirmation import ConfirmationGate, PendingStore

    failing = FakeAction("fake-abort", execute_ok=False)
    router = router_with(failing.command())
    gate = ConfirmationGate(PendingStore(tmp_path / "p.sqlite3"), AuditLog(tmp_path / "a.jsonl"), router=router)
    ctx = Context(gate=gate)
    preview = await answer("fake-abort orders", ctx, user="alice", router=router)
    token = next(a.command.split()[1] for a in preview.reply.actions if a.command.startswith("cancel "))
    result = await answer(f"confirm {token}", ctx, user="alice", router=router)
    assert result.reply.title == "Failed: fake-abort" and result.exit_code == 1
    assert result.reply.to_dict()["outcome"] == "failed"
