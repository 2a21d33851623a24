"""Lookup by id, alias, metric, error, config key and free text, with did-you-mean."""

import pytest

from runbook_kb import default_kb
from runbook_kb.lookup import Lookup, norm
from runbook_kb.ranker import WordModel, shipped_examples


@pytest.fixture(scope="module")
def lookup() -> Lookup:
    return Lookup(default_kb())


@pytest.mark.parametrize(
    "query,first",
    [
        ("broker-loss", "broker-loss"),
        ("Hanging transaction", "hanging-transaction"),
        ("URP", "broker-loss"),
        ("UnderReplicatedPartitions", "broker-loss"),
        ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions", "broker-loss"),
        ("IsrShrinksPerSec", "slow-follower"),
        ("UnderMinIsrPartitionCount", "under-min-isr"),
        ("NotEnoughReplicasException", "under-min-isr"),
        ("NotEnoughReplicas", "under-min-isr"),
        ("NOT_ENOUGH_REPLICAS", "under-min-isr"),
        ("OfflinePartitionsCount", "offline-partitions"),
        ("UncleanLeaderElectionsPerSec", "unclean-election"),
        ("OfflineLogDirectoryCount", "log-dir-failure"),
        ("ActiveControllerCount", "controller-quorum-loss"),
        ("NOT_LEADER_OR_FOLLOWER", "metadata-lag"),
        ("RequestHandlerAvgIdlePercent", "handler-saturation"),
        ("max.incremental.fetch.session.cache.slots", "fetch-session-eviction"),
        ("PRODUCER_FENCED", "producer-fencing"),
        ("ProducerFencedException", "producer-fencing"),
        ("LastStableOffsetLag", "hanging-transaction"),
        ("PartitionsWithLateTransactionsCount", "hanging-transaction"),
        ("transaction.max.timeout.ms", "hanging-transaction"),
        ("hot key", "hot-partition"),
        ("consumer group keeps rebalancing", "rebalance-storm"),
        ("disk is full", "full-disk"),
        ("long garbage collection pause", "gc-pauses"),
    ],
)
def test_first_match(lookup, query, first):
    matches = lookup.search(query)
    assert matches, f"nothing for {query!r}"
    assert matches[0].entry.id == first, [m.entry.id for m in matches]


def test_urp_ranks_broker_loss_then_slow_follower(lookup):
    ids = [m.entry.id for m in lookup.search("URP")]
    assert ids[:2] == ["broker-loss", "slow-follower"]
    assert lookup.search("URP")[0].reason == "symptom UnderReplicatedPartitions"


def test_nonsense_finds_nothing_and_near_misses_get_suggestions(lookup):
    assert lookup.search("qwxz zzyzx") == []
    assert "UnderReplicatedPartitions" in lookup.did_you_mean("UnderReplicatedPartitons")
    assert "hanging-transaction" in lookup.did_you_mean("hangingtransaction")


def test_norm_folds_case_camel_and_separators():
    assert norm("NotEnoughReplicas") == norm("not-enough_replicas") == "not enough replicas"
    assert norm("min.insync.replicas") == "min.insync.replicas"


# ---- structure first: keys inside longer questions, numbers against conditions -------------------------


@pytest.mark.parametrize(
    "noisy",
    [
        "URP status",
        "why is URP 12",
        "under replicated partitions after deploy",
        "URP right now?",
        "UnderReplicatedPartitions",
        "we have URP",
    ],
)
def test_the_same_symptom_gives_the_same_ranking_inside_a_longer_question(lookup, noisy):
    """Issue 8, defect 7: 'why URP' and 'why URP status' must not rank different causes first."""
    bare = [m.entry.id for m in lookup.search("URP")]
    assert [m.entry.id for m in lookup.search(noisy)][:2] == bare[:2] == ["broker-loss", "slow-follower"]


def test_a_metric_that_moved_ranks_like_the_metric(lookup):
    bare = [m.entry.id for m in lookup.search("IsrShrinksPerSec")]
    assert [m.entry.id for m in lookup.search("IsrShrinksPerSec spiking")][:3] == bare[:3]
    assert bare[0] == "slow-follower"


def test_shape_words_still_decide_between_entries_of_one_metric(lookup):
    """Words that say *how* URP moves are evidence, unlike 'status' or 'spiking'."""
    assert lookup.search("URP flat since the broker crashed")[0].entry.id == "broker-loss"
    assert lookup.search("URP going up and down all day")[0].entry.id == "slow-follower"


def test_a_number_is_compared_with_the_condition(lookup):
    low = lookup.search("RequestHandlerAvgIdlePercent 0.05")[0]
    assert low.entry.id == "handler-saturation"
    assert "0.05 meets" in low.reason
    healthy = lookup.search("RequestHandlerAvgIdlePercent 0.6")[0]
    assert "does not meet" in healthy.reason
    assert healthy.score < low.score


def test_a_number_a_few_words_after_the_metric_counts(lookup):
    top = lookup.search("ActiveControllerCount 0")[0]
    assert top.entry.id == "controller-quorum-loss"
    offline = {m.entry.id: m for m in lookup.search("OfflinePartitionsCount 0")}["offline-partitions"]
    assert "does not meet" in offline.reason  # zero offline partitions is the healthy reading


def test_settings_inside_a_condition_are_not_comparisons(lookup):
    """'acks=-1' in a condition is a setting; the 04 of '04:00' must not be compared with it."""
    assert lookup.search("NotEnoughReplicasException on orders since 04:00")[0].entry.id == "under-min-isr"


def test_pasted_java_exception_lines_reach_the_error_class(lookup):
    line = (
        "org.apache.kafka.common.errors.NotEnoughReplicasException: Messages are rejected since there are "
        "fewer in-sync replicas than required."
    )
    assert lookup.search(line)[0].entry.id == "under-min-isr"


def test_a_key_after_no_or_without_is_a_requirement_not_evidence(lookup):
    top = lookup.answer("which acks setting guarantees no data loss?")[0]
    assert top.id == "durability-matrix"


# ---- reference topics are answerable -------------------------------------------------------------------


@pytest.mark.parametrize(
    "question,topic",
    [
        ("KIP-427", "partition-categories"),
        ("acks matrix", "durability-matrix"),
        ("latency", "latency-decomposition"),
        ("KIP-16", "isr-membership"),
        ("reassignment", "reassignment"),
        # the five questions of issue 8 that used to land on unrelated failure modes
        ("RF=2 with min.insync.replicas=2, what happens when one broker dies?", "durability-matrix"),
        ("is 12 AtMinIsr partitions worth a page?", "partition-categories"),
        ("is replica.lag.time.max.ms in messages or time?", "isr-membership"),
        ("produce TotalTimeMs is high, mostly RemoteTimeMs", "latency-decomposition"),
        ("URP rose while a reassignment runs", "reassignment"),
    ],
)
def test_reference_topics_answer(lookup, question, topic):
    hits = lookup.answer(question)
    assert hits and hits[0].id == topic, [(h.id, h.score, h.reason) for h in hits]
    assert hits[0].kind == "reference"


def test_every_topic_is_reachable_by_its_own_title(lookup):
    for tid, topic in lookup.kb.topics.items():
        assert lookup.answer(topic.title)[0].id == tid


def test_answer_mixes_kinds_and_search_keeps_failure_modes_only(lookup):
    kinds = {h.kind for h in lookup.answer("AtMinIsrPartitionCount 12", limit=6)}
    assert kinds == {"reference", "failure-mode"}
    assert all(m.entry.id in lookup.kb.failure_modes for m in lookup.search("KIP-427 AtMinIsr"))


def test_one_word_topic_ids_name_a_topic_only_as_the_whole_query(lookup):
    assert lookup.answer("coordinators")[0].id == "coordinators"
    assert lookup.answer("transaction open for hours, coordinator does not abort it")[0].id == "hanging-transaction"


def test_the_lookup_is_built_once_per_knowledge_base():
    kb = default_kb()
    assert Lookup.for_kb(kb) is Lookup.for_kb(kb)


# ---- the word model learnt from example questions (runbook_kb/ranker.py) ------------------------------


def test_the_word_model_prefers_the_entry_whose_examples_share_the_words():
    model = WordModel(
        [
            (["disk", "full", "disk full"], "full-disk", 1.0),
            (["heap", "size"], "memory", 1.0),
            (["disk", "slow"], "slow-follower", 1.0),
        ]
    )
    post = model.posteriors(["disk", "full", "zorblax"])
    assert max(post, key=post.get) == "full-disk"
    assert abs(sum(post.values()) - 1) < 1e-9
    assert model.posteriors(["zorblax", "quux"]) == {}, "words no example used say nothing"
    only = model.posteriors(["disk", "full"], labels=["memory", "slow-follower"])
    assert set(only) == {"memory", "slow-follower"} and only["slow-follower"] > only["memory"]


def test_examples_for_unknown_entries_are_ignored():
    kb = default_kb()
    plain = Lookup(kb, examples={})
    odd = Lookup(kb, examples={"no-such-entry": ["broker died and URP is flat"]})
    question = "broker died and URP is flat"
    assert [h.id for h in odd.answer(question)] == [h.id for h in plain.answer(question)]


def test_the_shipped_examples_are_what_a_default_lookup_learns_from():
    kb = default_kb()
    default, explicit = Lookup(kb), Lookup(kb, examples=shipped_examples())
    question = "the VM running broker 1 was deleted by mistake"
    assert [(h.id, h.score) for h in default.answer(question)] == [(h.id, h.score) for h in explicit.answer(question)]


def test_an_ordinary_word_that_names_a_metric_is_no_key(lookup):
    """The log 'Size' metric must not make every question about sizes an alert question."""
    assert all("metric Size" not in h.reason for h in lookup.answer("partition size on disk", limit=10))
