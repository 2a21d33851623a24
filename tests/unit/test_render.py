"""Renderers: golden files for Block Kit JSON and terminal text, and Slack's limits on big replies.

Regenerate the golden files after a deliberate template change with KBOT_UPDATE_GOLDEN=1.
"""

import json
import os
from pathlib import Path

from block_limits import violations

from bot.render import render_json, render_text, series_line
from bot.render_slack import MAX_BLOCKS_PER_MESSAGE, MAX_HEADER_TEXT, MAX_SECTION_TEXT, render_blocks
from framework.reply import Action, Diagnosis, Evidence, Reply, Section, Series, SourceLine, Step, Table

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
                    SourceLine(
                        "Partition.scala:232",
                        "isUnderReplicated",
                        "leader counts RF - |ISR| > 0",
                        "https://github.com/apache/kafka/blob/04bfe7d/core/src/main/scala/kafka/cluster/Partition.scala#L232",
                    )
                ],
                mitigation=[
                    Step("Bring the broker back."),
                    Step(
                        "Throttle the reassignment.",
                        command="kafka-reassign-partitions.sh --execute --throttle 50000000",
                        config={"leader.replication.throttled.rate": "50000000"},
                    ),
                ],
                do_not=["Lower min.insync.replicas: it turns the next failure into data loss."],
                first_steps=["Find the missing broker.", "Is URP flat?"],
                why_ranked="symptom UnderReplicatedPartitions",
            )
        ],
        sections=[Section("Related", ["slow-follower, offline-partitions"])],
        actions=[
            Action("Elect preferred leaders", "elect-leaders orders", mutating=True),
            Action("Describe", "describe orders"),
        ],
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
    _golden(
        "why_urp.full.blocks.json",
        json.dumps(render_blocks(sample_reply(), full=True), indent=2, ensure_ascii=False) + "\n",
    )


def test_text_golden():
    _golden("why_urp.txt", render_text(sample_reply()))
    _golden("why_urp.full.txt", render_text(sample_reply(), full=True))


def test_short_answer_leads_with_verdict_then_do_now_beside_the_warnings():
    lines = render_text(sample_reply()).splitlines()
    assert lines[0] == "[WARNING] Why URP?"
    assert lines[1].startswith("2 partitions under-replicated")
    do_now = lines.index("Do now: Broker loss")
    assert lines[do_now + 1] == "  1. Bring the broker back."
    assert lines[do_now + 2] == "  2. Throttle the reassignment."
    warning = next(i for i, line in enumerate(lines) if "Do not:" in line)
    evidence = lines.index("Evidence")
    assert do_now < warning < evidence, "the warnings sit beside the steps, before the evidence"
    assert any(line.startswith("Why: Partition.scala:232 isUnderReplicated") for line in lines)


def test_a_step_that_destroys_data_is_never_numbered():
    reply = sample_reply()
    reply.severity = "critical"
    reply.diagnoses[0].mitigation.insert(
        0,
        Step(
            "Enable unclean leader election on the topic.",
            config={"unclean.leader.election.enable": "true"},
            destroys_data=True,
        ),
    )
    text = render_text(reply)
    numbered = [line for line in text.splitlines() if line.lstrip()[:2] in ("1.", "2.", "3.")]
    assert all("unclean" not in line for line in numbered), numbered
    assert "  ! Last resort, destroys data: Enable unclean leader election on the topic." in text
    slack = json.dumps(render_blocks(reply))
    assert ":warning: *Last resort, destroys data:* Enable unclean leader election" in slack
    assert "1. Enable unclean" not in slack


def test_colour_only_when_asked():
    assert "\033[" not in render_text(sample_reply())
    coloured = render_text(sample_reply(), color=True)
    assert coloured.startswith("\033[1;33m[WARNING]\033[0m")


def test_absent_symptom_says_so_first_and_lists_causes_one_line_each():
    reply = sample_reply()
    reply.severity, reply.verdict = "ok", "No under-replicated partitions right now."
    text = render_text(reply)
    assert text.startswith("[OK] Why URP?\nNo under-replicated partitions right now.")
    assert "Do now" not in text and "Do not" not in text
    assert "Possible causes if it comes back\n  - Broker loss: A broker left the cluster." in text


def test_full_keeps_everything_and_short_offers_it():
    reply = sample_reply()
    reply.more_command = "why URP --full"
    full = render_text(reply, full=True)
    assert "Cause: A broker left the cluster." in full and "First steps:" in full and "Mitigation:" in full
    assert "/kafka why URP --full" in render_text(reply)
    buttons = [e for m in render_blocks(reply) for b in m["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ("Show full runbook", "why URP --full") in [(e["text"]["text"], e["value"]) for e in buttons]
    assert len({e["action_id"] for e in buttons}) == len(buttons)


def test_json_round_trips_every_field():
    reply = sample_reply()
    reply.tables = [Table("Partitions", ["partition", "leader", "lag"], [[0, 101, 1220], [1, None, 3.5]], more=4)]
    reply.series = [Series("URP", "partitions", [("2026-11-22T08:00:00Z", 0.0), ("2026-11-22T08:01:00Z", 2.0)])]
    data = json.loads(render_json(reply))
    assert data["schema_version"] == 2 and data["outcome"] == "answered"
    assert data["diagnoses"][0]["mechanism"][0]["label"] == "Partition.scala:232"
    assert data["evidence"][0]["status"] == "bad"
    assert data["actions"][0]["mutating"] is True
    assert data["window"] == "2026-11-22 08:00 to 08:15 UTC"
    assert data["tables"][0]["rows"] == [
        {"partition": 0, "leader": 101, "lag": 1220},
        {"partition": 1, "leader": None, "lag": 3.5},
    ]
    assert data["tables"][0]["more"] == 4
    assert data["series"][0]["points"][1] == {"time": "2026-11-22T08:01:00Z", "value": 2.0}


def test_tables_align_numbers_right_in_the_terminal_and_become_one_table_block_per_message():
    reply = Reply(
        title="Lag",
        verdict="v",
        tables=[
            Table("Per partition", ["partition", "lag"], [[0, 1220], [11, 7]]),
            Table("Second", ["a"], [["x"]]),
        ],
    )
    text = render_text(reply)
    assert "  partition    lag\n          0  1,220\n         11      7" in text
    messages = render_blocks(reply)
    assert [sum(b["type"] == "table" for b in m["blocks"]) for m in messages] == [1, 1]
    first = next(b for b in messages[0]["blocks"] if b["type"] == "table")
    assert first["rows"][1] == [{"type": "raw_text", "text": "0"}, {"type": "raw_text", "text": "1,220"}]
    assert first["column_settings"][1]["align"] == "right"
    for m in messages:
        assert violations(m) == []


def test_slack_escaping_of_user_visible_text():
    for full in (False, True):
        blocks = render_blocks(sample_reply(), full=full)[0]["blocks"]
        mrkdwn = json.dumps([b for b in blocks if b["type"] != "table"])
        assert "<orders>" not in mrkdwn  # never unescaped where Slack parses mrkdwn
        # Table cells are raw text: Slack shows them as typed, nothing in them is a link or a ping.
        cells = [c["text"] for b in blocks if b["type"] == "table" for r in b["rows"] for c in r]
        assert "Topic <orders> & co" in cells
    # links stay links
    assert "<https://github.com/apache/kafka/blob/04bfe7d/" in json.dumps(render_blocks(sample_reply())[0]["blocks"])


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
    messages = render_blocks(huge_reply(), full=True)
    assert len(messages) > 1
    for n, msg in enumerate(messages, 1):
        assert violations(msg) == [], n
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
    messages = render_blocks(reply, full=True)
    text = "\n".join(t for m in messages for b in m["blocks"] for t in _all_text(b))
    cells = {c["text"] for m in messages for b in m["blocks"] if b["type"] == "table" for r in b["rows"] for c in r}
    for i in range(120):
        assert f"item {i}" in cells
    for _ in range(10):
        for j in range(30):
            assert f"line {j} " + "y" * 200 in text
    assert text.count("word") == 30 * 900
    buttons = [e for m in messages for b in m["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [e["value"] for e in buttons] == [f"cmd {i}" for i in range(40)]
    assert all(f"f{i}" in text for i in range(25))


def test_short_form_of_a_huge_reply_fits_one_or_more_messages_slack_accepts():
    messages = render_blocks(huge_reply())
    for msg in messages:
        assert violations(msg) == []
    assert len(render_text(huge_reply()).splitlines()) < len(render_text(huge_reply(), full=True).splitlines()) / 3


def test_advice_is_rendered_per_transport():
    reply = Reply(
        title="Evidence source unavailable",
        severity="error",
        verdict="No Kafka cluster is configured.[[terminal: Start one with `kbot cluster up`.]]"
        "[[slack: Whoever runs the bot points it at a cluster.]]",
    )
    text = render_text(reply)
    assert "No Kafka cluster is configured. Start one with `kbot cluster up`." in text
    assert "Whoever runs" not in text and "[[" not in text
    slack = json.dumps(render_blocks(reply))
    assert "No Kafka cluster is configured. Whoever runs the bot points it at a cluster." in slack
    assert "kbot" not in slack and "[[terminal" not in slack and "[[slack" not in slack
    assert "kbot cluster up" in json.loads(render_json(reply))["verdict"]


def test_a_terminal_trend_line_names_its_broker():
    s = Series("URP trend", "partitions", [("2026-11-27T03:00:00+00:00", 0.0), ("2026-11-27T03:01:00+00:00", 4.0)])
    s.label = "broker 102"
    assert series_line(s).startswith("URP trend, broker 102: ")
    s.label = "URP"  # a label the title already holds is not repeated
    assert series_line(s).startswith("URP trend: ")


def test_a_chart_of_zeros_starts_at_zero():
    from bot.charts import y_limits

    assert y_limits([0.0, 0.0], (-0.04, 0.04)) == (0.0, 1.0)
    assert y_limits([1.0, 5.0], (0.8, 5.2)) == (0.0, 5.2)
    assert y_limits([-2.0, 1.0], (-2.2, 1.2)) == (-2.2, 1.2)
