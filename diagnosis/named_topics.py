"""Topics a question names that the cluster does not have: "consumers on orders stuck" about a
topic that does not exist is answered by saying so first, not by the runbook's causes of stuck
consumers. Only the word after "topic", "on", "in", "for", "from" or "to" counts as a name, and
only when it could be a topic name and is not a word of the question's kind (broker, partition)."""

from __future__ import annotations

import re

from live.gateway import AdminGateway, GatewayError

_BEFORE_NAME = frozenset({"topic", "topics", "on", "in", "for"})
_NOT_NAMES = frozenset(
    """
    a an the my our their this that all every each any some one two three broker brokers partition partitions
    cluster clusters topic topics consumer consumers producer producers group groups leader leaders follower
    followers disk disks controller controllers replica replicas isr node nodes host hosts it them us me
    now startup restart shutdown kafka prod production staging dev test
    """.split()
)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{2,249}$")


def topic_candidates(text: str) -> list[str]:
    """Pure: the words of ``text`` that stand where a topic name would ("on orders", "topic urp3")."""
    words = re.findall(r"[A-Za-z0-9._`'\"-]+", text)
    out: list[str] = []
    for before, word in zip(words, words[1:]):
        name = word.strip("`'\".,")
        if before.lower() not in _BEFORE_NAME or not _TOPIC.match(name) or name.lower() in _NOT_NAMES:
            continue
        if name.isdigit() or name in out:
            continue
        out.append(name)
    return out


async def missing_topics(gw: AdminGateway, text: str) -> list[str] | None:
    """The names in ``text`` that are no topic of the cluster; None when the topics could not be
    listed (then nothing is claimed about them)."""
    names = topic_candidates(text)
    if not names:
        return []
    try:
        topics = set(await gw.topics(include_internal=True))
    except GatewayError:
        return None
    # a name only counts when it looks like one of the question's subjects: one missing word among
    # several candidates that are topics is more likely prose than a typo'd topic
    return [n for n in names if n not in topics]
