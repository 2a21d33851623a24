"""Renderers: golden files for Block Kit JSON and terminal text, and Slack's limits on big replies.

Regenerate the golden files after a deliberate template change with KBOT_UPDATE_GOLDEN=1.
"""

import json
import os
from pathlib import Path

import pytest

from bot.render import (
    MAX_BLOCKS_PER_MESSAGE,
    MAX_HEADER_TEXT,
    MAX_SECTION_TEXT,
    render_blocks,
    render_json,
    render_text,
)
from commands.reply import Action, Diagnosis, Evidence, Reply, Section, SourceLine, Step

GOLDEN = Path(__file__).parent.parent / "golden"


def sample_reply() -> Reply:
    return Reply(
        title="Why URP?",
        severity="warning",
        verdict="2 partitions under-replicated; broker 102 is not registered.",
        window="2026-11-22 08:00 to 08:15 UTC",
        evidence=[
            Evidence("Brokers registered", "2 of 3 (102 missing)", "live: describe_cluster", "bad"),
            Evidence("URP trend", "flat at 2 for 14 min", "lake: urp_trend", "bad"),
            Evidence("Topic <orders> & co", "ISR [101, 103]", "live: describe_topics"),
        ],
        diagnoses=[
            Diagnosis(
                entry_id="broker-loss",
                title="Broker loss",
                cause="A broker left the cluster.",
                mechanism=[
                    SourceLine("Partition.scala:232", "isUnderReplicated", "leader counts RF - |ISR| > 0",
                               "https://github.com/apache/kafka/blob/04bfe7d/core/src/main/scala/kafka/cluster/Partition.scala#L232")
                ],
                mitigation=[
                    Step("Bring the broker back."),
                    Step("Throttle the reassignment.", command="kafka-reassign-partitions.sh --execute --throttle 50000000",
                         config={"leader.replication.throttled.rate": "50000000"}),
                ],
                do_not=["Lower min.insync.replicas: it turns the next failure into data loss."],
                first_steps=["Find the missing broker.", "Is URP flat?"],
                why_ranked="symptom UnderReplicatedPartitions",
            )
        ],
        sections=[Section("Related", ["slow-follower, offline-partitions"])],
        actions=[Action("Elect preferred leaders", "elect-leaders orders", mutating=True), Action("Describe", "describe orders")],
        followups=["/kafka runbook broker-loss"],
        notes=["Lake data ends 30 s ago."],
    )


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KBOT_UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"golden file {path} missing; run with KBOT_UPDATE_GOLDEN=1 once and review it"
    assert actual == path.read_text(encoding="utf-8")


def test_block_kit_golden():
    _golden("why_urp.blocks.json", json.dumps(render_blocks(sample_reply()), indent=2, ensure_ascii=False) + "\n")


def test_text_golden():
    _golden("why_urp.txt", render_text(sample_reply()))


def test_json_round_trips_every_field():
    data = json.loads(render_json(sample_reply()))
    assert data["diagnoses"][0]["mechanism"][0]["label"] == "Partition.scala:232"
    assert data["evidence"][0]["status"] == "bad"
    assert data["actions"][0]["mutating"] is True
    assert data["window"] == "2026-11-22 08:00 to 08:15 UTC"


def test_slack_escaping_of_user_visible_text():
    blocks = render_blocks(sample_reply())[0]["blocks"]
    text = json.dumps(blocks)
    assert "Topic &lt;orders&gt; &amp; co" in text
    # links stay links
    assert "<https://github.com/apache/kafka/blob/04bfe7d/" in text


def huge_reply() -> Reply:
    long_line = "word " * 900  # 4,500 characters in one line: must be split inside the line
    return Reply(
        title="T" * 400,
        severity="critical",
        verdict="v",
        evidence=[Evidence(f"item {i}", "x" * 120, "live") for i in range(120)],
        diagnoses=[
            Diagnosis(f"e{i}", f"Entry {i}", cause=long_line, first_steps=[f"step {j}" for j in range(40)])
            for i in range(30)
        ],
        sections=[Section(f"S{i}", [f"line {j} " + "y" * 200 for j in range(30)]) for i in range(10)],
        actions=[Action(f"do {i} " + "z" * 100, f"cmd {i}") for i in range(40)],
        followups=[f"f{i}" for i in range(25)],
    )


def _all_text(block: dict) -> list[str]:
    out = []
    if "text" in block and isinstance(block["text"], dict):
        out.append(block["text"]["text"])
    for el in block.get("elements", []):
        if el.get("type") == "mrkdwn":
            out.append(el["text"])
    return out


def test_oversized_reply_is_split_into_messages_slack_accepts():
    messages = render_blocks(huge_reply())
    assert len(messages) > 1
    for n, msg in enumerate(messages, 1):
        blocks = msg["blocks"]
        assert 0 < len(blocks) <= MAX_BLOCKS_PER_MESSAGE
        assert f"part {n} of {len(messages)}" in json.dumps(blocks)
        for b in blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= MAX_SECTION_TEXT
            if b["type"] == "header":
                assert len(b["text"]["text"]) <= MAX_HEADER_TEXT
            if b["type"] == "actions":
                assert len(b["elements"]) <= 25
                assert all(len(e["text"]["text"]) <= 75 for e in b["elements"])
            if b["type"] == "context":
                assert len(b["elements"]) <= 10


def test_split_loses_nothing():
    reply = huge_reply()
    text = "\n".join(t for m in render_blocks(reply) for b in m["blocks"] for t in _all_text(b))
    for i in range(120):
        assert f"*item {i}*" in text
    for i in range(10):
        for j in range(30):
            assert f"line {j} " + "y" * 200 in text
    assert text.count("word") == 30 * 900
    buttons = [e for m in render_blocks(reply) for b in m["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [e["value"] for e in buttons] == [f"cmd {i}" for i in range(40)]
    assert all(f"f{i}" in text for i in range(25))
