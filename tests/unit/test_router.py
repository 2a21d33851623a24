"""The router's parsing table: what Slack and terminals send, and what the router makes of it."""

import pytest

from commands.registry import ROUTER
from framework.router import MAX_INPUT_CHARS, BadInput, normalize

PARSES = [
    # text, command, args, json
    ("why URP", "why", {"symptom": "URP"}, False),
    ("WHY urp", "why", {"symptom": "urp"}, False),
    ("/kafka why URP", "why", {"symptom": "URP"}, False),
    ("  /kafka   why   under replicated  ", "why", {"symptom": "under replicated"}, False),
    ("why \u201cNotEnoughReplicas\u201d", "why", {"symptom": "NotEnoughReplicas"}, False),
    ("why \u2018PRODUCER_FENCED\u2019", "why", {"symptom": "PRODUCER_FENCED"}, False),
    ("runbook hanging transaction", "runbook", {"query": "hanging transaction"}, False),
    ("runbook \u2014json hanging", "runbook", {"query": "hanging"}, True),
    ("runbook \u2013json hanging", "runbook", {"query": "hanging"}, True),
    ("runbook --json 'under min isr'", "runbook", {"query": "under min isr"}, True),
    ("why x &amp; y", "why", {"symptom": "x & y"}, False),
    ("help", "help", {}, False),
    ("Help WHY", "help", {"command": "WHY"}, False),
]


@pytest.mark.parametrize("text,name,args,as_json", PARSES)
def test_parses(text, name, args, as_json):
    req = ROUTER.parse(text)
    assert req.spec.name == name
    assert req.args == args
    assert req.json is as_json


def test_help_flag_and_cluster_option():
    req = ROUTER.parse("why URP --cluster prod-eu")
    assert req.cluster == "prod-eu" and req.args == {"symptom": "URP"}
    assert ROUTER.parse("why --help").options["help"] is True
    assert ROUTER.parse("why -h").options["help"] is True


REFUSALS = [
    ("", "Empty command"),
    ("   ", "Empty command"),
    ("/kafka", "Empty command"),
    ("x" * (MAX_INPUT_CHARS + 1), "limit is 4,000"),
    ("why URP\x00", "control characters"),
    ("why \x1b[31mURP", "control characters"),
    ("why \u202eURP", "control characters"),
    ("frobnicate now", "Unknown command 'frobnicate'"),
    ("why", "needs symptom"),
    ("runbook", "needs query"),
    ("why -rf URP", "may not start with '-'"),
    ("why --frob URP", "Unknown option '--frob'"),
    ("why URP --cluster", "--cluster needs a value"),
    ("why URP --since", "--since needs a value"),
    ("why --since", "--since needs a value"),
    ("why --json", "needs symptom"),
    ("runbook --since 1h URP", "It belongs to why"),
    ("describe -rf", "may not start with '-'"),
    ("describe orders --frob", "Unknown option '--frob'"),
    ('describe "orders', "not a valid topic name"),
    ("describe orders's", "not a valid topic name"),
]


@pytest.mark.parametrize("text,message", REFUSALS)
def test_refuses(text, message):
    with pytest.raises(BadInput) as err:
        ROUTER.parse(text)
    assert message in err.value.message


def test_unknown_command_suggests_the_closest():
    with pytest.raises(BadInput) as err:
        ROUTER.parse("wyh URP")
    assert err.value.suggestions[0] == "why"
    with pytest.raises(BadInput) as err:
        ROUTER.parse("runbok hanging")
    assert err.value.suggestions[0] == "runbook"


def test_normalize_keeps_argument_case():
    assert normalize("/kafka why UnderReplicatedPartitions") == "why UnderReplicatedPartitions"


# ---- free text (issue 27): the words after why / runbook / triage are taken as written ----------

FREE_TEXT = [
    # text, command, args, options, json, full, cluster
    ("why the broker's disk is full", "why", {"symptom": "the broker's disk is full"}, {}, False, False, None),
    (
        "why kafka-topics --describe shows Leader: none",
        "why",
        {"symptom": "kafka-topics --describe shows Leader: none"},
        {},
        False,
        False,
        None,
    ),
    (
        "runbook should I raise replica.lag.time.max.ms to stop URP alerts?",
        "runbook",
        {"query": "should I raise replica.lag.time.max.ms to stop URP alerts?"},
        {},
        False,
        False,
        None,
    ),
    # the same, as Slack sends them: typographic apostrophe, em dash for a typed "--"
    (
        "/kafka why the broker\u2019s disk is full",
        "why",
        {"symptom": "the broker's disk is full"},
        {},
        False,
        False,
        None,
    ),
    (
        "why kafka-topics \u2014describe shows Leader: none",
        "why",
        {"symptom": "kafka-topics --describe shows Leader: none"},
        {},
        False,
        False,
        None,
    ),
    (
        "triage the leader's gone on orders-3",
        "triage",
        {"symptom": "the leader's gone on orders-3"},
        {},
        False,
        False,
        None,
    ),
    ("triage --json", "triage", {}, {}, True, False, None),
    # pasted terminal output and broker log lines
    (
        "why kafka-consumer-groups --describe --group billing shows LAG 40000 on partition 3",
        "why",
        {"symptom": "kafka-consumer-groups --describe --group billing shows LAG 40000 on partition 3"},
        {},
        False,
        False,
        None,
    ),
    (
        "why [Partition orders-0 broker=101] Shrinking ISR from 101,102,103 to 101",
        "why",
        {"symptom": "[Partition orders-0 broker=101] Shrinking ISR from 101,102,103 to 101"},
        {},
        False,
        False,
        None,
    ),
    ("why -1 leaders after the restart", "why", {"symptom": "-1 leaders after the restart"}, {}, False, False, None),
    ("why URP'; DROP TABLE x; --", "why", {"symptom": "URP'; DROP TABLE x; --"}, {}, False, False, None),
    # known options as the last words, in any order, with = or a separate value
    (
        "why the broker's disk is full --since 1h --json",
        "why",
        {"symptom": "the broker's disk is full"},
        {"since": "1h"},
        True,
        False,
        None,
    ),
    ("why URP --since=2h --cluster prod-eu --full", "why", {"symptom": "URP"}, {"since": "2h"}, False, True, "prod-eu"),
    (
        "runbook don't restart the broker? --full",
        "runbook",
        {"query": "don't restart the broker?"},
        {},
        False,
        True,
        None,
    ),
    # a quoted cluster name after free text
    ("why consumer's lag --cluster 'prod'", "why", {"symptom": "consumer's lag"}, {}, False, False, "prod"),
    # an option another command has is words here, not an option of this one
    ("runbook URP --since 30m", "runbook", {"query": "URP --since 30m"}, {}, False, False, None),
    # options right after the subcommand, where they always went
    ("why --since 1h URP flat", "why", {"symptom": "URP flat"}, {"since": "1h"}, False, False, None),
    ("why 'under min isr' --json", "why", {"symptom": "under min isr"}, {}, True, False, None),
    ("why   spaces   and\ttabs  ", "why", {"symptom": "spaces and tabs"}, {}, False, False, None),
]


@pytest.mark.parametrize("text,name,args,options,as_json,full,cluster", FREE_TEXT)
def test_free_text_is_taken_as_written(text, name, args, options, as_json, full, cluster):
    req = ROUTER.parse(text)
    assert req.spec.name == name
    assert req.args == args
    assert req.options == options
    assert (req.json, req.full, req.cluster) == (as_json, full, cluster)


def test_help_as_the_last_word_of_free_text():
    assert ROUTER.parse("why the broker's disk is full --help").options["help"] is True
    assert ROUTER.parse("runbook hanging -h").options["help"] is True


@pytest.mark.parametrize(
    "text,first",
    [
        ("why the broker's disk is full", "full-disk"),
        ("why kafka-topics --describe shows Leader: none", "offline-partitions"),
        ("why Broker 4 keeps getting fenced and unfenced", "metadata-lag"),
        ("why broker 4 keeps getting fenced", "metadata-lag"),
        ("runbook ProducerFencedException after a deploy", "producer-fencing"),
        ("runbook should I raise replica.lag.time.max.ms to stop URP alerts?", "isr-membership"),
    ],
)
async def test_the_issue_27_inputs_are_answered_end_to_end(text, first):
    """Parsed by the real router and answered by the real command, from the runbook (no cluster)."""
    from commands.registry import answer
    from framework.context import Context
    from runbook_kb import default_kb

    done = await answer(text, Context(live=None), user="U0ALICE")
    assert done.outcome == "answered", done.reply.verdict
    kb = default_kb()
    if first in kb.topics:
        assert done.reply.title == f"Reference: {kb.topics[first].title}"
    else:
        assert done.reply.diagnoses[0].entry_id == first, [d.entry_id for d in done.reply.diagnoses]
