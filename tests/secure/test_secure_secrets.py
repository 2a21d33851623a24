"""Secrets never leave the configuration: not in log lines (every logger at DEBUG, librdkafka's
and kafka-python's included), not in answers, not in the audit log, not in the cluster config's
printed forms, not in `kbot cluster status` - across reads, an action, and a failed login."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.render import render_json, render_text
from commands.registry import answer
from kbot_settings import load as load_settings
from live.config import get_cluster
from localkafka.secure import CONFIG, OBSERVER, OPERATOR, SUPER_USER, config_entry
from tests.secure.securekit import write_clusters_file

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]


async def test_no_password_in_logs_answers_audit_or_config(secure, topic, ctx, kbot_env, tmp_path, caplog):
    passwords = [secure.state.passwords[u] for u in (SUPER_USER, OBSERVER, CONFIG, OPERATOR)] + [
        secure.state.keystore_password
    ]
    caplog.set_level(logging.DEBUG)
    texts = []
    for text in ("status", f"describe {topic}", "hanging-txns", "lag"):
        result = await answer(text, ctx, user="U0ALICE")
        texts += [render_text(result.reply), render_json(result.reply)]
    preview = await answer(f"retention {topic} 9d", ctx, user="U0ALICE")
    token = next(a.command.split()[1] for a in preview.reply.actions if a.label == "Confirm")
    done = await answer(f"confirm {token}", ctx, user="U0ALICE")
    texts += [render_text(preview.reply), render_text(done.reply)]
    # a failed login (wrong operator password) on the way
    bad = {**config_entry(secure), "sasl_password": "wrong-observer-pw"}
    env = {**kbot_env, "KBOT_CLUSTERS_FILE": str(write_clusters_file(tmp_path / "bad.yaml", {"secure": bad}))}
    from framework.context import Context
    from live.pool import GatewayPool

    pool = GatewayPool(load_settings(env))
    try:
        failed = await answer("status", Context(live=pool), user="U0ALICE")
    finally:
        await pool.close()
    texts.append(render_text(failed.reply))
    config = get_cluster("secure", load_settings(kbot_env))
    texts += [
        repr(config),
        str(config),
        json.dumps(config.safe_dict()),
        repr(config.as_operator()),
        json.dumps(config.as_operator().safe_dict()),
        repr(config.as_config()),
        json.dumps(config.as_config().safe_dict()),
    ]
    audit = Path(kbot_env["KBOT_STATE_DIR"]) / "audit.jsonl"
    texts.append(audit.read_text() if audit.exists() else "")
    texts.append(json.dumps(ctx.gate.audit.read()))
    texts.append(caplog.text)
    joined = "\n".join(texts)
    assert len(caplog.records) > 0 and "retention.ms" in joined
    for pw in passwords + ["wrong-observer-pw"]:
        assert pw not in joined


def test_cluster_status_names_the_secrets_file_not_the_secrets(secure):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "localkafka",
            "status",
            "--secure",
            "--name",
            secure.name,
            "--base-dir",
            str(secure.base_dir),
            "--port-base",
            str(secure.port_base),
            "--json",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["healthy"] and st["security"]["listener"] == "SASL_SSL"
    assert st["security"]["users"] == [SUPER_USER, OBSERVER, CONFIG, OPERATOR]
    for pw in secure.state.passwords.values():
        assert pw not in res.stdout + res.stderr
    assert (secure.base_dir / "secure" / "secrets.json").stat().st_mode & 0o077 == 0
    assert all(n.props_file.stat().st_mode & 0o077 == 0 for n in secure.nodes)
