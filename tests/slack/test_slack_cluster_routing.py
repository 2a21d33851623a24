"""Several clusters in Slack (issue 13): `/kafka @name ...` chooses one, a channel mapped to a
cluster uses it, and an unmapped channel is asked which one instead of getting an answer about
the wrong cluster. Two configured clusters on loopback ports where nothing listens: the answers
come at once (refused connections) and name the cluster they are about."""

from __future__ import annotations

import dataclasses
import json
import socket

from slack_harness import INCIDENTS, OPS, Harness

from kbot_settings import load as load_settings
from live.pool import GatewayPool


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_at_name_channel_mapping_and_the_question(stand, tmp_path, monkeypatch):
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(
        f"clusters:\n  alpha:\n    bootstrap: 127.0.0.1:{_closed_port()}\n"
        f"  beta:\n    bootstrap: 127.0.0.1:{_closed_port()}\n"
    )
    for var in ("KBOT_BOOTSTRAP", "KBOT_CLUSTER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KBOT_CLUSTERS_FILE", str(clusters))
    monkeypatch.setenv("KBOT_CHANNEL_CLUSTERS", f"{INCIDENTS}=beta")
    h = Harness(stand, tmp_path)
    bot = await h.start_bot()
    pool = GatewayPool(load_settings())
    bot.ctx = dataclasses.replace(bot.ctx, live=pool)
    try:
        # Unmapped channel, two clusters: a private question with a button per cluster.
        await h.slash("status", channel=OPS)
        question = await stand.wait_for(
            lambda: [
                c for c in stand.called("chat.postEphemeral") if "Which cluster?" in json.dumps(c.args.get("blocks"))
            ]
        )
        blocks = question[0].args["blocks"]
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
        assert [(e["text"]["text"], e["value"]) for e in buttons][:2] == [
            ("alpha", "@alpha status"),
            ("beta", "@beta status"),
        ]
        assert not stand.thread_replies(), "nothing is answered in the channel before a cluster is chosen"

        # @name chooses explicitly; the mapped channel needs nothing.
        await h.slash("@alpha status", channel=OPS)
        await h.slash("status", channel=INCIDENTS)
        await stand.wait_for(lambda: len(stand.thread_replies()) >= 2)
        await bot.drain(60)
        answers = {c.args["channel"]: json.dumps(c.args.get("blocks")) for c in stand.thread_replies()}
        assert "Kafka cluster 'alpha'" in answers[OPS] and "refuses connections" in answers[OPS]
        assert "Kafka cluster 'beta'" in answers[INCIDENTS]
        asked = [r for r in h.audit("answer")]
        assert sorted(r["channel"] for r in asked) == sorted([OPS, INCIDENTS])
    finally:
        await pool.close()
        await h.close()
