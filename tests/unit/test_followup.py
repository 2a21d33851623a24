"""The memory rules of follow-ups (framework/followup.py, issue 28): explicit input wins, pronouns
refer by the parameter's kind, unknown kinds are left alone, nothing is invented, and the thread
store stays bounded (LRU, 24 h) and survives a new process when it has a database."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from commands.registry import ROUTER
from framework.followup import IncidentMemory, ThreadMemories, refers
from framework.reply import Action, Diagnosis, Evidence, Reply, Table
from framework.router import BadInput


def _memory() -> IncidentMemory:
    """What `why URP --since 30m --cluster prod` on the degraded cluster leaves: topic orders,
    broker 103, the cause broker-loss, window 30m, cluster prod."""
    memory = IncidentMemory()
    request = ROUTER.parse("why URP --since 30m --cluster prod")
    reply = Reply(
        title="Why URP?",
        evidence=[
            Evidence("Broker 103", "not registered", "live: metadata", "bad"),
            Evidence("Brokers registered", "2 of 3", "live", "bad"),
        ],
        diagnoses=[Diagnosis("broker-loss", "Broker loss", "a broker left")],
        actions=[Action("Describe orders", "describe orders"), Action("Cluster status", "status")],
    )
    memory.remember(request, reply, now=1000.0)
    return memory


def _ask(memory: IncidentMemory, text: str):
    request = memory.parse(text, ROUTER)
    return request, request.context_note


def test_an_answer_teaches_its_topic_broker_cause_window_and_cluster():
    m = _memory()
    assert (m.cluster, m.since, m.cause) == ("prod", "30m", ("broker-loss", "Broker loss"))
    assert m.current == {"topic": "orders", "broker": "103"}


@pytest.mark.parametrize("words", ["it", "that", "this", "the topic", "this topic", "the same topic", "IT"])
def test_pronouns_refer_to_the_topic(words):
    request, note = _ask(_memory(), f"describe {words}")
    assert request.args == {"topic": "orders"} and request.cluster == "prod"
    assert note == "From this thread: topic orders, cluster prod"


def test_explicit_input_wins_over_memory():
    request, note = _ask(_memory(), "hot-partitions payments --since 2h --cluster staging")
    assert request.args == {"topic": "payments"} and request.options["since"] == "2h"
    assert request.cluster == "staging" and note is None


def test_left_out_values_are_filled_where_the_command_has_room():
    request, note = _ask(_memory(), "hot-partitions")
    assert request.args == {"topic": "orders"} and request.options == {"since": "30m"}
    assert note == "From this thread: topic orders, cluster prod, window 30m"
    request, note = _ask(_memory(), "status")  # no topic, no window: only the cluster
    assert request.args == {} and request.options == {} and note == "From this thread: cluster prod"
    request, note = _ask(_memory(), "runbook URP")  # reads no cluster
    assert request.cluster is None and note is None


def test_unknown_kinds_are_left_alone():
    m = _memory()
    assert _ask(m, "confirm it")[0].args == {"token": "it"}  # a token is a word, never a memory
    request, _ = _ask(m, "hot-partitions --rank it")  # an option of kind word
    assert request.options["rank"] == "it"
    request, note = _ask(m, "history URP")  # broker / topic options are not filled unasked
    assert "broker" not in request.options and "topic" not in request.options
    assert note == "From this thread: cluster prod, window 30m"
    request, note = _ask(m, "history IsrShrinksPerSec --broker that")  # ... but follow a reference
    assert request.options["broker"] == 103 and "broker 103" in (note or "")


def test_an_action_resolves_references_but_is_never_filled_unasked():
    m = _memory()
    with pytest.raises(BadInput, match="needs topic"):
        m.parse("elect-leaders", ROUTER)
    request, note = _ask(m, "elect-leaders it")
    assert request.args["topic"] == "orders" and note == "From this thread: topic orders, cluster prod"


def test_it_with_nothing_or_several_named_asks_instead_of_guessing():
    m = IncidentMemory()
    with pytest.raises(BadInput, match="has not named a group yet"):
        m.parse("lag it", ROUTER)
    assert m.parse("lag", ROUTER).args == {}  # left out and unknown: the command's own default
    listing = Reply(
        title="Hot partitions",
        tables=[Table("ranking", ["#", "partition", "rec/s"], [[1, "orders-0", 5], [2, "payments-3", 1]])],
    )
    m.remember(ROUTER.parse("hot-partitions"), listing)
    assert "topic" not in m.current  # two topics named: neither is "the topic"
    with pytest.raises(BadInput, match=r"several topics \(orders, payments\)"):
        m.parse("describe it", ROUTER)
    m.remember(ROUTER.parse("describe payments"), Reply(title="Topic payments"))
    assert m.parse("describe it", ROUTER).args == {"topic": "payments"}  # the user's last word wins


def test_a_refused_answer_teaches_nothing():
    m = _memory()
    m.remember(ROUTER.parse("describe ordrs --cluster staging"), Reply(title="No", outcome="bad_input"))
    assert m.current["topic"] == "orders" and m.cluster == "prod"


def test_free_text_refers_only_when_all_of_it_refers():
    m = _memory()
    assert _ask(m, "runbook that")[0].args == {"query": "broker-loss"}
    assert _ask(m, "why is it slow")[0].args == {"symptom": "is it slow"}
    assert _ask(m, "help it")[0].args == {"command": "it"}


def test_refers_counts_the_words_of_a_reference():
    assert refers(["the", "same", "group", "x"], "group") == 3
    assert refers(["that", "group"], "group") == 2
    assert refers(["the", "topic"], "group") == 0
    assert refers(["orders"], "topic") == 0


def test_the_thread_store_is_an_lru_that_forgets_after_a_day():
    now = [0.0]
    store = ThreadMemories(max_threads=3, ttl_s=100.0, clock=lambda: now[0])
    request = ROUTER.parse("describe orders")
    for i in range(4):
        store.update(("C1", f"{i}.0"), request, Reply(title="t"))
    assert len(store) == 3 and store.get(("C1", "0.0")) is None  # the oldest went
    assert store.get(("C1", "1.0")) is not None  # used: now the newest
    store.update(("C1", "4.0"), request, Reply(title="t"))
    assert store.get(("C1", "1.0")) is not None and store.get(("C1", "2.0")) is None
    now[0] = 101.0
    assert store.get(("C1", "4.0")) is None  # a day without a question


def test_the_thread_store_survives_a_new_process_and_stays_bounded(tmp_path: Path):
    path = tmp_path / "state.sqlite3"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, isolation_level=None)

    first = ThreadMemories(connect, max_threads=2)
    for i in range(3):
        first.update(("C1", f"{i}.0"), ROUTER.parse(f"describe t{i} --cluster prod"), Reply(title="t"))
    again = ThreadMemories(connect, max_threads=2)
    memory = again.get(("C1", "2.0"))
    assert memory is not None and memory.current["topic"] == "t2" and memory.cluster == "prod"
    assert again.get(("C1", "0.0")) is None
    with closing(connect()) as conn:
        assert conn.execute("SELECT count(*) FROM incident_threads").fetchone()[0] == 2


def test_a_console_session_is_one_incident(tmp_path: Path):
    """`kbot console`: each question starts from what the session's earlier ones established."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_")) and k != "PORT"}
    env.update(
        HOME=str(tmp_path / "home"),
        KBOT_HOME=str(tmp_path / "kbot"),
        KBOT_CACHE_DIR=str(tmp_path / "cache"),
        NO_COLOR="1",
    )
    r = subprocess.run(
        [sys.executable, "-m", "cli.main", "console"],
        input="why URP --since 30m\nwhy offline\nrunbook that\n",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    first = r.stdout.split("Why URP?")[1].split("Why offline?")[0]
    offline, runbook = r.stdout.split("Why offline?")[1].split("Runbook:")
    assert "From this session" not in first
    assert "Note: From this session: window 30m" in offline
    assert "Note: From this session: cause " in runbook


def test_it_asks_which_topic_when_the_answer_named_several_even_if_it_suggested_one():
    """Issue 37: `why URP` named orders-* and payments-* partitions and suggested `describe orders`;
    `describe it` guessed orders. It must ask which (and forget an older "it")."""
    memory = IncidentMemory()
    memory.remember(ROUTER.parse("describe clicks"), Reply(title="Topic clicks"))
    reply = Reply(
        title="Why URP?",
        evidence=[
            Evidence(
                "Broker 102", "gone from 6 ISR(s) (orders-0, orders-1, orders-2, payments-0 (+2 more))", "live", "bad"
            ),
            Evidence("Under-replicated", "4: orders-0, payments-3 … (+2 more)", "live", "bad"),
        ],
        diagnoses=[Diagnosis("broker-loss", "Broker loss", "a broker left")],
        actions=[Action("Describe orders", "describe orders")],
    )
    memory.remember(ROUTER.parse("why URP"), reply)
    assert "topic" not in memory.current and memory.named["topic"][-2:] == ["orders", "payments"]
    with pytest.raises(BadInput) as err:
        memory.parse("describe it", ROUTER)
    assert "named several topics (clicks, orders, payments); say which" in err.value.message


def test_kafka_s_own_topics_are_nobody_s_it():
    """Seen in the suite: a lost broker's answer listed __transaction_state-3 among the
    under-replicated partitions, and `describe it` offered it as a candidate."""
    from framework.followup import _from_reply
    from framework.reply import Evidence, Reply

    reply = Reply(
        title="Why URP?",
        evidence=[Evidence("Under-replicated partitions", "2 of 2: orders-0, __transaction_state-3", "live", "bad")],
    )
    found = _from_reply(reply, None)
    assert found.get("topic") == ["orders"], found
