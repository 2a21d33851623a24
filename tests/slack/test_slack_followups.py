"""Follow-ups keep the incident's context (issue 28), through the real Bolt app over signed HTTP
against the Slack stand-in: a thread started by `/kafka why URP --since 30m` remembers its topic,
window, group and cause, and the next questions in the thread (mentions and plain messages) use
them, each answer saying in one note line what it took. The cluster is the in-memory gateway the
golden answers use (broker 103 gone, topic orders under-replicated, group payments behind).

The thread's memory lives in the bot's state database: a restarted bot still knows the thread."""

from __future__ import annotations

import dataclasses
import json

import pytest_asyncio
from action_fakes import FakeGateway, FakePool
from slack_harness import OPS, Harness
from slack_stand_in import BOT_USER

from commands import hot_partitions


def degraded() -> FakeGateway:
    """Broker 103 is gone: its replicas left the ISRs of the three partitions of orders."""
    return FakeGateway(
        brokers=(101, 102),
        topics={
            "orders": [
                (101, [101, 102, 103], [101, 102]),
                (102, [102, 103, 101], [102, 101]),
                (101, [103, 101, 102], [101, 102]),
            ]
        },
    )


async def _on_cluster(h: Harness) -> None:
    await h.start_bot()
    h.bot.ctx = dataclasses.replace(h.bot.ctx, live=FakePool(degraded()))


@pytest_asyncio.fixture(loop_scope="function")
async def thread(stand, tmp_path, monkeypatch):
    # hot-partitions without a lake reads the live end offsets twice, LIVE_GAP_S apart: a test
    # setting (as the golden answers use), not a patch of the bot's behaviour
    monkeypatch.setattr(hot_partitions, "LIVE_GAP_S", 0.2)
    h = Harness(stand, tmp_path)
    h.router = None  # the real command registry
    await _on_cluster(h)
    yield h
    await h.close()


_ts = iter(range(1, 1_000_000))


def _new_ts() -> str:
    return f"1700009999.{next(_ts):06d}"


async def _answers(h: Harness, n: int) -> list[dict]:
    """The first ``n`` answer records of the audit, waiting for them."""
    await h.stand.wait_for(lambda: len(h.audit("answer")) >= n, timeout_s=60)
    return h.audit("answer")


async def _ask(h: Harness, text: str, root: str, *, mention: bool, user: str = "U0ALICE") -> str:
    """One follow-up in the thread; the text Slack shows of its answer."""
    before, calls = len(h.audit("answer")), len(h.stand.calls)
    event = {"user": user, "channel": OPS, "ts": _new_ts(), "thread_ts": root}
    if mention:
        event.update(type="app_mention", text=f"<@{BOT_USER}> {text}")
    else:
        event.update(type="message", text=text, channel_type="channel")
    status, _, _ = await h.event(event)
    assert status == 200
    answer = (await _answers(h, before + 1))[before]
    await h.bot.drain(60)
    assert answer["thread_ts"] and answer["delivered"] == "thread", answer
    return json.dumps([c.args for c in h.stand.calls[calls:] if c.method.startswith("chat.")])


def _note(text: str) -> str:
    """The note line an answer carries about what it took from the thread."""
    start = text.find("From this thread: ")
    assert start >= 0, text[:2000]
    return text[start:].split('"')[0].split("\\n")[0]


async def _start(h: Harness) -> str:
    status, _, _ = await h.slash("why URP --since 30m")
    assert status == 200
    first = (await _answers(h, 1))[0]
    await h.bot.drain(60)
    assert first["command"] == "why" and first["outcome"] == "answered"
    return first["thread_ts"]  # the working message: the thread's root


async def test_five_follow_ups_carry_the_incident_context(thread):
    h = thread
    root = await _start(h)
    assert "From this thread" not in json.dumps([c.args for c in h.stand.calls])  # nothing remembered yet

    described = await _ask(h, "describe it", root, mention=True)
    assert _note(described) == "From this thread: topic orders"
    assert "Topic orders" in described

    listed = await _ask(h, "lag", root, mention=False)  # a plain message in the bot's thread
    assert _note(listed) == "From this thread: window 30m"  # no group named yet: every group is listed
    assert "payments" in listed

    history = await _ask(h, "history URP", root, mention=False)
    assert _note(history) == "From this thread: window 30m"

    hot = await _ask(h, "hot-partitions", root, mention=True)
    assert _note(hot) == "From this thread: topic orders, window 30m"
    assert "Hot partitions (topic orders)" in hot

    lag = await _ask(h, "lag", root, mention=False)
    assert _note(lag) == "From this thread: group payments, window 30m"
    assert "Lag of payments" in lag

    runbook = await _ask(h, "runbook that", root, mention=True)  # the leading cause of the `why`
    assert _note(runbook) == "From this thread: cause broker-loss"

    explicit = await _ask(h, "history URP --since 2h", root, mention=False)  # what the user types wins
    assert "From this thread" not in explicit
    answers = h.audit("answer")
    assert answers[-1]["options"] == {"since": "2h"}
    assert [a["args"] for a in answers[1:3]] == [{"topic": "orders"}, {}]
    assert answers[5]["args"] == {"group": "payments"}


async def test_the_thread_is_remembered_across_a_restart(thread):
    h = thread
    root = await _start(h)
    await _on_cluster(h)  # a new process on the same state directory
    assert len(h.bot.memories) == 0
    described = await _ask(h, "describe the topic", root, mention=False)
    assert _note(described) == "From this thread: topic orders"


async def test_chatter_other_threads_bots_and_repeats_are_not_answered(thread):
    h = thread
    root = await _start(h)
    # talk in the bot's thread that is no command, a command in a thread the bot never answered
    # in, a bot's message and an edit in the bot's thread
    for event in (
        {"type": "message", "user": "U0BOB", "text": "thanks, looking at broker 103 now", "thread_ts": root},
        {"type": "message", "user": "U0BOB", "text": "describe orders", "thread_ts": "1699999999.000001"},
        {"type": "message", "bot_id": "B0OTHER", "user": "U0OTHER", "text": "status", "thread_ts": root},
        {"type": "message", "subtype": "message_changed", "thread_ts": root, "message": {"text": "status"}},
        {"type": "message", "user": BOT_USER, "text": "status", "thread_ts": root},
    ):
        status, _, _ = await h.event({"channel": OPS, "ts": _new_ts(), **event})
        assert status == 200
    # one follow-up delivered three ways: as a mention and as the plain message of the same text
    # (Slack sends both events), then the mention again as Slack's retry with the same event_id
    ts = _new_ts()
    text = f"<@{BOT_USER}> describe it"
    mention = {"type": "app_mention", "user": "U0ALICE", "channel": OPS, "ts": ts, "thread_ts": root, "text": text}
    await h.event(mention, event_id="EvMention1")
    await h.event({**mention, "type": "message"}, event_id="EvMessage1")
    await h.event(mention, event_id="EvMention1", headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "x"})
    await _answers(h, 2)
    # every event above was acked and its listener ran before this answer was built (they came
    # first on the same loop); drain waits for anything they spawned
    await h.bot.drain(60)
    answers = h.audit("answer")
    assert [a["command"] for a in answers] == ["why", "describe"], answers
    assert h.audit("refusal") == []  # chatter is not refused either: it is not addressed to the bot
    assert [r["source"] for r in h.audit("request")] == ["slash", "mention"]


async def test_it_with_nothing_named_says_so_instead_of_guessing(thread):
    h = thread
    status, _, _ = await h.slash("status")
    root = (await _answers(h, 1))[0]["thread_ts"]
    await h.bot.drain(60)
    before = len(h.stand.calls)
    await h.event(
        {
            "type": "app_mention",
            "user": "U0ALICE",
            "channel": OPS,
            "ts": _new_ts(),
            "thread_ts": root,
            "text": f"<@{BOT_USER}> lag it",
        }
    )
    await h.stand.wait_for(lambda: h.audit("refusal"))
    await h.bot.drain(60)
    refusal = h.audit("refusal")[0]
    assert refusal["step"] == "bad_input" and "has not named a group yet" in refusal["reason"]
    said = json.dumps([c.args for c in h.stand.calls[before:]])
    assert "has not named a group yet" in said


async def test_a_thread_about_one_of_several_clusters_stays_on_it(stand, tmp_path, monkeypatch):
    """Two clusters and an unmapped channel: `/kafka @alpha ...` starts the thread; a follow-up
    there is about alpha, not a "which cluster?" question."""
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n  alpha:\n    bootstrap: 127.0.0.1:1\n  beta:\n    bootstrap: 127.0.0.1:2\n")
    for var in ("KBOT_BOOTSTRAP", "KBOT_CLUSTER", "KBOT_CHANNEL_CLUSTERS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("KBOT_CLUSTERS_FILE", str(clusters))
    h = Harness(stand, tmp_path)
    h.router = None
    await _on_cluster(h)  # the in-memory cluster answers for either name
    try:
        status, _, _ = await h.slash("@alpha why URP")
        assert status == 200
        root = (await _answers(h, 1))[0]["thread_ts"]
        await h.bot.drain(60)
        described = await _ask(h, "describe it", root, mention=True)
        assert _note(described) == "From this thread: topic orders, cluster alpha"
        assert [a["cluster"] for a in h.audit("answer")] == ["alpha", "alpha"]
        assert h.audit("refusal") == []
    finally:
        await h.close()
