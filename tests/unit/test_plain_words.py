"""Follow-ups in plain words (framework/plain_words.py, issue 37): the shapes an on-call engineer
types in an incident thread are read as the commands the bot already has, filled from the thread's
memory; talk that fits no shape is never guessed at and gets "I can answer: ..." instead of
"Unknown command 'and'"."""

from __future__ import annotations

import pytest

from commands.registry import ROUTER
from framework import plain_words
from framework.dispatch import Answer
from framework.followup import IncidentMemory, parse_request
from framework.reply import Action, Diagnosis, Evidence, Reply, Table
from framework.spec import CommandRequest


def _memory() -> IncidentMemory:
    """What `why URP --since 30m` about a lost broker 103 leaves: topic orders, broker 103, group
    checkout-app named by a lag table, the cause broker-loss, the metric URP."""
    memory = IncidentMemory()
    reply = Reply(
        title="Why URP?",
        evidence=[Evidence("Broker 103", "not registered", "live: metadata", "bad")],
        diagnoses=[Diagnosis("broker-loss", "Broker loss", "a broker left", why_ranked="live: broker gone")],
        actions=[Action("Describe orders", "describe orders")],
        tables=[Table("Lag", ["group", "lag"], [["checkout-app", 10]])],
    )
    memory.remember(ROUTER.parse("why URP --since 30m"), reply, now=1000.0)
    return memory


def _routed(text: str, memory: IncidentMemory | None = None) -> CommandRequest:
    parsed = parse_request(text, memory or _memory(), user="U1", channel="C1", router=ROUTER)
    assert isinstance(parsed, CommandRequest), parsed.reply.verdict if isinstance(parsed, Answer) else parsed
    return parsed


ROUTES = [
    # another broker, topic or group
    ("and broker 102?", "at-min-isr", {}, {"broker": 102}),
    ("And broker 102", "at-min-isr", {}, {"broker": 102}),
    ("what about broker 101?", "at-min-isr", {}, {"broker": 101}),
    ("how about node 102?", "at-min-isr", {}, {"broker": 102}),
    ("broker 102?", "at-min-isr", {}, {"broker": 102}),
    ("what about 102?", "at-min-isr", {}, {"broker": 102}),
    ("what about payments?", "describe", {"topic": "payments"}, {}),
    ("how about topic Orders-EU?", "describe", {"topic": "Orders-EU"}, {}),
    ("and topic clicks", "describe", {"topic": "clicks"}, {}),
    ("what about group billing?", "lag", {"group": "billing"}, {"since": "30m"}),
    ("and the consumer group billing?", "lag", {"group": "billing"}, {"since": "30m"}),
    ("and checkout-app?", "lag", {"group": "checkout-app"}, {"since": "30m"}),  # a group the thread named
    ("what about checkout-app", "lag", {"group": "checkout-app"}, {"since": "30m"}),
    ("what about checkout?", "lag", {"group": "checkout-app"}, {"since": "30m"}),  # the one name the thread gave it
    # the next step
    ("what should I do first?", "runbook", {"query": "broker-loss"}, {}),
    ("what now?", "runbook", {"query": "broker-loss"}, {}),
    ("ok, what now", "runbook", {"query": "broker-loss"}, {}),
    ("now what?", "runbook", {"query": "broker-loss"}, {}),
    ("what do we do?", "runbook", {"query": "broker-loss"}, {}),
    ("next steps?", "runbook", {"query": "broker-loss"}, {}),
    ("how do I fix it?", "runbook", {"query": "broker-loss"}, {}),
    ("what's the fix?", "runbook", {"query": "broker-loss"}, {}),
    ("where do we start?", "runbook", {"query": "broker-loss"}, {}),
    # the trend
    ("is it getting better?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("Is it getting worse?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("since when?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("when did it start?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("is it still happening?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("better or worse?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("is it recovering", "history", {"metric": "URP"}, {"since": "30m"}),
    ("how long has this been going on?", "history", {"metric": "URP"}, {"since": "30m"}),
    # safety
    ("is it safe to restart 103?", "at-min-isr", {}, {"broker": 103}),
    ("is it safe to restart broker 102?", "at-min-isr", {}, {"broker": 102}),
    ("safe to bounce 101?", "at-min-isr", {}, {"broker": 101}),
    ("can I restart broker 101 now?", "at-min-isr", {}, {"broker": 101}),
    ("can we safely roll 102", "at-min-isr", {}, {"broker": 102}),
    ("what happens if I stop 101?", "at-min-isr", {}, {"broker": 101}),
    ("what if 102 goes down?", "at-min-isr", {}, {"broker": 102}),
    ("is it ok to restart it?", "at-min-isr", {}, {"broker": 103}),  # the broker the thread named
    ("ok to reboot b102?", "at-min-isr", {}, {"broker": 102}),
    # reach
    ("who is affected?", "at-min-isr", {}, {}),
    ("who's affected", "at-min-isr", {}, {}),
    ("which producers fail?", "at-min-isr", {}, {}),
    ("are producers failing?", "at-min-isr", {}, {}),
    ("what is impacted?", "at-min-isr", {}, {}),
    ("blast radius?", "at-min-isr", {}, {}),
    ("which topics are affected?", "at-min-isr", {}, {}),
    ("which consumers are behind?", "lag", {}, {"since": "30m"}),
    ("are consumers lagging?", "lag", {}, {"since": "30m"}),
    # a chart
    ("show me the graph", "history", {"metric": "URP"}, {"since": "30m"}),
    ("show me a chart", "history", {"metric": "URP"}, {"since": "30m"}),
    ("can you plot it?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("graph it", "history", {"metric": "URP"}, {"since": "30m"}),
    ("can I see the graph?", "history", {"metric": "URP"}, {"since": "30m"}),
    ("<@U0BOT> show me the graph", "history", {"metric": "URP"}, {"since": "30m"}),
]


@pytest.mark.parametrize(("text", "command", "args", "options"), ROUTES)
def test_plain_words_route_to_the_command_with_the_threads_memory(text, command, args, options):
    request = _routed(text)
    assert request.spec.name == command
    assert request.args == args
    assert {k: v for k, v in request.options.items() if k in ("broker", "since")} == options
    assert request.context_note and request.context_note.startswith("Read “")  # never silent


def test_there_are_at_least_forty_phrasings_over_every_shape():
    assert len(ROUTES) >= 40
    shapes = {plain_words.read(t, _memory()).shape for t, *_ in ROUTES}  # type: ignore[union-attr]
    assert shapes == set(plain_words.SHAPES)


def test_reach_asks_about_the_whole_cluster_not_the_topic_named_last():
    request = _routed("who is affected?")
    assert request.args == {}  # `at-min-isr` alone would take the thread's topic orders
    assert "topic orders" not in (request.context_note or "")


def test_the_note_says_how_the_words_were_read_and_what_the_thread_gave():
    request = _routed("what should I do first?")
    assert (
        request.context_note == "Read “what should I do first?” as `runbook that`. From this thread: cause broker-loss"
    )


@pytest.mark.parametrize(
    "text",
    ["and?", "what is the meaning of this?", "is the coffee ready?", "and thanks", "can you help me?", "why?"],
)
def test_what_no_shape_fits_gets_i_can_answer_with_questions_that_fit_the_thread(text):
    parsed = parse_request(text, _memory(), user="U1", channel="C1", router=ROUTER)
    assert isinstance(parsed, Answer) and parsed.outcome == "bad_input"
    verdict = parsed.reply.verdict
    assert "I can answer: “what should I do first?”, “is it safe to restart 103?”, “is it getting better?”" in verdict
    assert "Unknown command" not in verdict


def test_i_can_answer_fits_what_the_thread_knows():
    assert plain_words.offer(IncidentMemory()) == ["who is affected?"]
    assert "what should I do first?" not in plain_words.not_understood("and?", IncidentMemory())


def test_a_shape_needing_what_the_thread_never_named_is_not_guessed():
    empty = IncidentMemory()
    for text in ("is it getting better?", "show me the graph", "is it safe to restart it?"):
        assert plain_words.read(text, empty) is None, text
    parsed = parse_request("is it getting better?", empty, user=None, channel=None, router=ROUTER)
    assert isinstance(parsed, Answer) and "I can answer: “who is affected?”" in parsed.reply.verdict


def test_a_mistyped_command_still_gets_its_suggestions_and_commands_are_unchanged():
    parsed = parse_request("descibe orders", _memory(), user=None, channel=None, router=ROUTER)
    assert isinstance(parsed, Answer) and "Unknown command 'descibe'" in parsed.reply.verdict
    assert "describe" in parsed.reply.followups[0] or any("describe" in a.command for a in parsed.reply.actions)
    assert _routed("describe it").args == {"topic": "orders"}
    assert _routed("status").context_note is None


@pytest.mark.parametrize(
    "text",
    [
        "thanks, looking at broker 103 now",
        "I restarted 103 an hour ago",
        "payments team says they are fine",
        "ok",
        "lol",
    ],
)
def test_chatter_between_people_is_no_follow_up(text):
    assert plain_words.read(text, _memory()) is None


def test_a_why_in_words_remembers_the_metric_the_runbook_matched():
    memory = IncidentMemory()
    reply = Reply(title="Why?", diagnoses=[Diagnosis("x", "X", "c", why_ranked="symptom UnderReplicatedPartitions")])
    memory.remember(ROUTER.parse("why replicas are out of sync"), reply)
    assert memory.metric == "UnderReplicatedPartitions"
    assert IncidentMemory.from_dict(memory.to_dict()).metric == "UnderReplicatedPartitions"
