"""Which Kafka cluster a Slack command is about: ``/kafka @prod why URP`` names it, else the
channel's mapping (``channels:`` in clusters.yaml or ``KBOT_CHANNEL_CLUSTERS``), else - when only
one cluster is configured - that one. With several clusters and neither, the bot asks instead of
guessing: on call, an answer about the wrong cluster is worse than a question.

Pure: :func:`route` takes the text, the channel and a :class:`Routing` (the configuration read
once), and returns either the text to parse and the cluster to bind on the parsed request, or
the "which cluster?" Reply. The cluster travels as a value, as the terminal's ``--cluster`` does
(framework.followup.parse_request's ``cluster``)::

    routed = route(text, channel_id, routing)
    if isinstance(routed, Reply): post it
    else: parse_request(routed.text, memory, cluster=routed.cluster, ...)
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.followup import NO_CLUSTER
from framework.gateways import NO_CLUSTER_CONFIGURED
from framework.reply import Action, Reply
from kbot_settings import KbotSettings
from live.config import load_channels, load_clusters

_AT = re.compile(r"^\s*@([A-Za-z0-9][A-Za-z0-9._-]*)(?:\s+|$)")
_CLUSTER_FLAG = re.compile(r"(^|\s)--cluster(=|\s|$)")


@dataclass(frozen=True)
class Routing:
    clusters: tuple[str, ...]  # configured cluster names, sorted
    channels: Mapping[str, str] = field(default_factory=dict)  # Slack channel id -> cluster

    @classmethod
    def from_settings(cls, settings: KbotSettings) -> "Routing":
        """From clusters.yaml / the settings (raises live.ConfigError with the reason)."""

        return cls(tuple(sorted(load_clusters(settings))), dict(load_channels(settings)))


@dataclass(frozen=True)
class Routed:
    text: str  # what to parse: the text without its leading @name
    # the cluster to bind on the request; None when the text names it (--cluster), the command
    # reads none, or the only one configured is the default anyway
    cluster: str | None
    how: str  # "explicit" | "flag" | "channel" | "only" | "none"


def _first_word(text: str) -> str:
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    return words[0].lower() if words else ""


def names_cluster(text: str) -> bool:
    """Whether the text picks its cluster itself (``@name`` first, or ``--cluster``)."""
    return bool(_AT.match(text or "") or _CLUSTER_FLAG.search(text or ""))


def route(text: str, channel: str | None, routing: Routing) -> Routed | Reply:
    text = text or ""
    m = _AT.match(text)
    if m:
        name, rest = m.group(1), text[m.end() :]
        if name not in routing.clusters:
            return unknown_cluster_reply(name, rest, routing)
        if not rest.strip():
            return which_cluster_reply(
                "", routing, channel, note=f"Say what to ask {name}, e.g. `/kafka @{name} status`."
            )
        if _CLUSTER_FLAG.search(rest):
            return Reply(
                title="Two clusters named",
                severity="error",
                outcome="bad_input",
                verdict=f"The command names a cluster twice (@{name} and --cluster); keep one.",
            )
        return Routed(rest, name, "explicit")
    if _CLUSTER_FLAG.search(text):
        return Routed(text, None, "flag")  # the router validates the name and says if it is unknown
    if _first_word(text) in NO_CLUSTER or not text.strip():  # by the first word: 'triage answer' is not
        return Routed(text, None, "none")
    mapped = routing.channels.get(channel or "")
    if mapped:
        return Routed(text, mapped, "channel")
    if len(routing.clusters) == 1:
        return Routed(text, None, "only")
    return which_cluster_reply(text, routing, channel)


def which_cluster_reply(text: str, routing: Routing, channel: str | None = None, note: str | None = None) -> Reply:
    """The question asked instead of guessing: every configured cluster, as a button that runs
    the same command on it."""
    names = list(routing.clusters)
    if not names:
        return Reply(
            title="No Kafka cluster configured",
            severity="error",
            outcome="source_down",
            verdict=f"{NO_CLUSTER_CONFIGURED}: set KBOT_BOOTSTRAP or create clusters.yaml.",
        )
    example = f"/kafka @{names[0]} {text.strip() or 'status'}"
    verdict = note or (
        f"This channel is not mapped to a Kafka cluster and {len(names)} are configured: "
        f"which one? Name it first, e.g. `{example}`."
    )
    return Reply(
        title="Which cluster?",
        severity="info",
        verdict=verdict,
        actions=[Action(name, f"@{name} {text.strip()}") for name in names] if text.strip() else [],
        notes=[
            f"Configured clusters: {', '.join(names)}.",
            "To answer in this channel without asking, map it to a cluster: `channels:` in clusters.yaml "
            f"({channel or '<channel id>'}: <cluster>) or KBOT_CHANNEL_CLUSTERS.",
        ],
    )


def unknown_cluster_reply(name: str, rest: str, routing: Routing) -> Reply:
    names = ", ".join(routing.clusters) or "none"
    return Reply(
        title="Unknown cluster",
        severity="error",
        outcome="bad_input",
        verdict=f"There is no Kafka cluster named '{name}'. Configured clusters: {names}.",
        actions=[Action(n, f"@{n} {rest.strip()}") for n in routing.clusters] if rest.strip() else [],
    )
