"""The router's parsing table: what Slack and terminals send, and what the router makes of it."""

import pytest

from commands.registry import ROUTER
from commands.router import MAX_INPUT_CHARS, BadInput, normalize

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
    ("why 'unbalanced", "Check the quotes"),
    ("why -rf URP", "may not start with '-'"),
    ("why --frob URP", "Unknown option '--frob'"),
    ("why URP --cluster", "--cluster needs a value"),
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
