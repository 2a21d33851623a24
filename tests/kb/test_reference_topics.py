"""Reference topics: loaded and checked with the KB, rendered as answers, reachable from `runbook`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from commands.registry import answer
from diagnosis.reference import reference_reply
from framework.context import Context
from runbook_kb import KBError, default_kb, load_kb
from runbook_kb.loader import DATA_DIR
from runbook_kb.text import kb_text


@pytest.fixture
def kb_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst)
    return dst


def _edit_topics(data_dir: Path, change) -> None:
    path = data_dir / "reference" / "topics.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["topics"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# ---- loader ------------------------------------------------------------------------------------------


def test_every_reference_fact_and_table_is_reachable_from_a_topic():
    kb = default_kb()
    assert len(kb.topics) >= 15
    shown = {(s.file, f) for t in kb.topics.values() for s in t.sources for f in s.facts}
    for name, model in kb.reference.items():
        for fact in getattr(model, "facts", []):
            assert (name, fact.topic) in shown


def test_a_topic_naming_a_missing_fact_is_rejected_with_file_and_field(kb_copy):
    _edit_topics(kb_copy, lambda ts: ts[0]["sources"][0]["facts"].append("no such facts"))
    with pytest.raises(KBError, match=r"topics\.yaml: field 'topics\.0\.sources\.0\.facts\.\d+'.*no such facts"):
        load_kb(kb_copy)


def test_a_topic_id_clashing_with_a_failure_mode_is_rejected(kb_copy):
    _edit_topics(kb_copy, lambda ts: ts[0].update(id="broker-loss"))
    with pytest.raises(KBError, match=r"topics\.0\.id'.*already used"):
        load_kb(kb_copy)


def test_dropping_a_topic_leaves_facts_unreachable_and_is_rejected(kb_copy):
    _edit_topics(kb_copy, lambda ts: ts.__setitem__(slice(None), [t for t in ts if t["id"] != "security"]))
    with pytest.raises(KBError, match=r"no topic shows the facts on 'security' of broker_internals\.yaml"):
        load_kb(kb_copy)


def test_a_topic_related_to_an_unknown_failure_mode_is_rejected(kb_copy):
    _edit_topics(kb_copy, lambda ts: ts[0]["related"].append("no-such-mode"))
    with pytest.raises(KBError, match=r"topics\.0\.related\.\d+'.*no-such-mode"):
        load_kb(kb_copy)


# ---- rendering ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("topic_id", sorted(default_kb().topics))
def test_every_topic_renders_an_answer_with_its_facts(topic_id):
    kb = default_kb()
    reply = reference_reply(kb, topic_id, "")
    assert reply.title.startswith("Reference: ") and reply.verdict == kb.topics[topic_id].summary
    assert reply.sections and all(s.lines for s in reply.sections)
    json.dumps(reply.to_dict())  # JSON-able for --json


def test_config_defaults_show_only_the_keys_the_question_names():
    reply = reference_reply(default_kb(), "config-defaults", "default of num.io.threads and queued.max.requests?")
    lines = [line for s in reply.sections for line in s.lines]
    assert len(lines) == 2
    assert lines[0].startswith(
        "num.io.threads = 8 (broker; defined at ServerConfigs.java:51 https://github.com/apache/kafka/blob/04bfe7d/"
    )
    assert lines[1].startswith("queued.max.requests = 500 (broker")


def test_alert_thresholds_for_a_named_metric():
    reply = reference_reply(default_kb(), "alert-thresholds", "alert threshold for RequestHandlerAvgIdlePercent")
    alerts = next(s for s in reply.sections if s.heading == "Alerts").lines
    assert alerts == [
        "[warning] RequestHandlerAvgIdlePercent < 0.2 (potential problem): Handler threads are getting busy; check "
        "RequestQueueTimeMs and the latency map. Open: handler-saturation.",
        "[critical] RequestHandlerAvgIdlePercent < 0.1 (active problem): Handlers are saturated and requests are "
        "queueing. Open: handler-saturation, gc-pauses, page-cache-cold-reads.",
    ]


def test_the_acks_matrix_answer_carries_the_rf2_rows():
    lines = [line for s in reference_reply(default_kb(), "durability-matrix").sections for line in s.lines]
    rf2 = [line for line in lines if line.startswith("acks=all, min.insync.replicas=2, RF=2")]
    assert len(rf2) == 1 and "read-only" in rf2[0]


# ---- the runbook command -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,title",
    [
        ("runbook KIP-427", "Reference: Partition categories and AtMinIsr (KIP-427)"),
        ("runbook acks matrix", "Reference: Durability matrix: acks x min.insync.replicas x replication factor"),
        ("runbook latency", "Reference: Request latency decomposition (TotalTimeMs and its five parts)"),
        ("runbook KIP-16", "Reference: ISR membership is time-based (replica.lag.time.max.ms, KIP-16)"),
        ("runbook hanging transaction", "Runbook: " + default_kb().failure_modes["hanging-transaction"].title),
        ("runbook PRODUCER_FENCED", None),
    ],
)
async def test_runbook_answers_topics_and_failure_modes(text, title):
    result = await answer(text, Context())
    assert result.outcome == "answered", result.reply.verdict
    if title is not None:
        assert result.reply.title == title
    else:
        assert result.reply.title.startswith("Runbook: ")


async def test_runbook_with_nonsense_is_a_short_refusal():
    result = await answer("runbook qwxz zzyzx", Context())
    assert result.outcome == "bad_input"
    assert result.reply.verdict == "Nothing in the runbook matches 'qwxz zzyzx'."


# ---- the consistency fixes of issue 8 ----------------------------------------------------------------


def test_full_disk_recovery_step_watches_what_exists():
    kb = default_kb()
    step = next(s for s in kb.failure_modes["full-disk"].mitigation if "Watch recovery" in s.action)
    assert "no LogsLoadedPerSec metric" in step.action
    signals = {m.name: m for m in kb.reference["signals"].metrics}
    assert "No metric of this name" in signals["LogsLoadedPerSec"].meaning


def test_at_min_isr_is_defined_against_the_effective_floor_everywhere():
    kb = default_kb()
    cat = next(c for c in kb.reference["partition_categories"].categories if c.id == "at-min-isr")
    assert "effective min ISR" in cat.definition
    assert "configured minInSyncReplicas" not in cat.definition


def test_partition_981_is_the_no_leader_branch_of_the_completion_check():
    ref = next(r for r in default_kb().failure_modes["offline-partitions"].mechanism if r.lines == [981])
    assert "completion check" in ref.symbol and "append path" not in ref.symbol


def test_user_visible_text_names_sources_and_versions_not_seeds_or_this_build():
    text = kb_text(default_kb())
    assert not re.search(r"\bseeds?\b", text, re.IGNORECASE)
    assert "this KRaft 4.4 build" not in text and "this 4.4 build" not in text
