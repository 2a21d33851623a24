"""Which cluster a Slack command is about (bot/cluster_routing.py): pure, no cluster needed."""

from __future__ import annotations

import pytest

from bot.cluster_routing import Routed, Routing, route
from commands.registry import ROUTER
from framework.followup import parse_request
from framework.reply import Reply
from framework.spec import CommandRequest
from kbot_settings import load as load_settings
from live.config import ConfigError

TWO = Routing(("plain", "prod"), {"C0PROD": "prod"})


def _parsed(r: Routed) -> CommandRequest:
    """The request the Slack intake parses from a route: the cluster bound as a value."""
    request = parse_request(r.text, None, user="U0A", channel=None, router=ROUTER, cluster=r.cluster)
    assert isinstance(request, CommandRequest)
    return request


def test_at_prefix_names_the_cluster_explicitly():
    r = route("@prod why URP", "C0ANY", TWO)
    assert r == Routed("why URP", "prod", "explicit")
    assert _parsed(r).cluster == "prod"


def test_at_prefix_wins_over_the_channel_mapping():
    r = route("@plain status", "C0PROD", TWO)
    assert isinstance(r, Routed) and r.cluster == "plain" and _parsed(r).cluster == "plain"


def test_channel_mapping_picks_the_cluster():
    r = route("describe orders", "C0PROD", TWO)
    assert r == Routed("describe orders", "prod", "channel")
    assert _parsed(r).args["topic"] == "orders" and _parsed(r).cluster == "prod"


def test_unmapped_channel_with_several_clusters_asks_which_one_listing_them():
    r = route("why URP", "C0RANDOM", TWO)
    assert isinstance(r, Reply) and r.title == "Which cluster?"
    assert r.verdict == (
        "This channel is not mapped to a Kafka cluster and 2 are configured: which one? "
        "Name it first, e.g. `/kafka @plain why URP`."
    )
    assert [(a.label, a.command) for a in r.actions] == [("plain", "@plain why URP"), ("prod", "@prod why URP")]
    assert "Configured clusters: plain, prod." in r.notes


def test_one_cluster_needs_no_choice():
    r = route("status", None, Routing(("only",)))
    assert r == Routed("status", None, "only")  # the only cluster is the default one


def test_commands_without_a_cluster_are_not_asked_about():
    for text in ("help", "runbook hanging transaction", "confirm abc", "cancel abc"):
        assert route(text, "C0RANDOM", TWO) == Routed(text, None, "none")


def test_an_explicit_flag_is_left_to_the_router():
    assert route("status --cluster plain", "C0RANDOM", TWO) == Routed("status --cluster plain", None, "flag")
    assert _parsed(Routed("status --cluster plain", "prod", "channel")).cluster == "plain"  # the text wins


def test_unknown_at_name_lists_the_clusters():
    r = route("@staging why URP", "C0PROD", TWO)
    assert isinstance(r, Reply) and r.outcome == "bad_input"
    assert r.verdict == "There is no Kafka cluster named 'staging'. Configured clusters: plain, prod."


def test_at_name_and_flag_together_is_bad_input():
    r = route("@prod status --cluster plain", None, TWO)
    assert isinstance(r, Reply) and r.outcome == "bad_input"


def test_the_cluster_travels_as_a_value_not_as_text():
    r = route("status", "C0X", Routing(("a", "b"), {"C0X": "a"}))
    assert (r.text, r.cluster) == ("status", "a")
    # a channel mapped to a name the shell would split is still one name
    odd = route("status", "C0X", Routing(("x y", "b"), {"C0X": "x y"}))
    assert _parsed(odd).cluster == "x y"


def test_routing_from_clusters_yaml_and_env(tmp_path):
    path = tmp_path / "clusters.yaml"
    path.write_text(
        "default: plain\nclusters:\n  plain: {bootstrap: '127.0.0.1:1'}\n  prod: {bootstrap: '127.0.0.1:2'}\n"
        "channels:\n  C0PROD: prod\n"
    )
    routing = Routing.from_settings(
        load_settings({"KBOT_CLUSTERS_FILE": str(path), "KBOT_CHANNEL_CLUSTERS": "C0PLAIN=plain"})
    )
    assert routing == Routing(("plain", "prod"), {"C0PROD": "prod", "C0PLAIN": "plain"})
    with pytest.raises(ConfigError, match="channel C0BAD is mapped to cluster 'nope', which is not configured"):
        Routing.from_settings(load_settings({"KBOT_CLUSTERS_FILE": str(path), "KBOT_CHANNEL_CLUSTERS": "C0BAD=nope"}))
