"""Which evidence sources an answer read, and which did not answer (issue 35: evidence accounting).

Every read a question needs (the admin API, each broker's own metadata, each node's JMX exporter,
the metric lake, a listener probe) is recorded for the request being answered as read / slow /
failed / not configured, with how long it took. The dispatcher collects the records into
``Reply.sources`` (every renderer shows them in one compact line) and applies the rule that makes
an answer honest: a verdict of OK needs the sources that would show the problem to have been
read; when one of them did not answer, the answer is "can't tell", says what did not answer and
what to check (:func:`honest`).

A context variable, like framework/partial.py's missing parts: the reads sit deep in shared
helpers many commands call; tasks started by ``asyncio.gather`` share the request's list.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from framework.reply import Evidence, Reply, SourceRead, SourceState

_READS: ContextVar[list[SourceRead] | None] = ContextVar("kbot_source_reads", default=None)

# A read that answered but took longer than this is marked slow: its data is used, and its time says
# the source (or the bot's host) is struggling.
SLOW_READ_S = 2.0
# How the compact line names each state.
_WORD: dict[SourceState, str] = {
    "read": "read",
    "slow": "slow",
    "no answer": "no answer",
    "failed": "failed",
    "not configured": "not configured",
}


@contextmanager
def collecting() -> Iterator[list[SourceRead]]:
    """The list that receives this request's source reads while the block runs."""
    reads: list[SourceRead] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def record(
    source: str, state: SourceState, seconds: float | None = None, detail: str = "", *, node: int | None = None
) -> None:
    """Record one read of ``source`` for the request being answered (a no-op outside one). A read
    of the same source recorded again replaces the earlier record (a retry that answered)."""
    reads = _READS.get()
    if reads is None:
        return
    if state == "read" and seconds is not None and seconds > SLOW_READ_S:
        state = "slow"
    entry = SourceRead(source, state, None if seconds is None else round(seconds, 2), detail, node)
    for i, old in enumerate(reads):
        if old.source == entry.source:
            reads[i] = entry
            return
    reads.append(entry)


def current() -> list[SourceRead]:
    """The reads recorded so far for the request being answered."""
    return list(_READS.get() or [])


def unanswered(reads: Iterable[SourceRead]) -> list[SourceRead]:
    """The reads whose data the answer does not have (no answer in time, or an error)."""
    return [r for r in reads if r.state in ("no answer", "failed")]


def _seconds(r: SourceRead) -> str:
    return "" if r.seconds is None else f" {r.seconds:.1f} s"


def summary(reads: Iterable[SourceRead]) -> str:
    """One compact line: 'admin read; exporter 2 read; exporter 103 no answer 6.0 s (...)'. Reads that
    answered in time are folded into a count per kind, without their times (the JSON has them);
    a slow, silent or failed one is named with its time and why."""
    out: list[str] = []
    folded: dict[str, list[SourceRead]] = {}
    for r in reads:
        kind = r.source.split(" ")[0]
        if r.state == "read":
            folded.setdefault(kind, []).append(r)
        else:
            out.append(f"{r.source} {_WORD[r.state]}{_seconds(r)}" + (f" ({r.detail})" if r.detail else ""))
    ok = [f"{kind} {len(rs)} read" if len(rs) > 1 else f"{rs[0].source} read" for kind, rs in folded.items()]
    return "; ".join(ok + out)


def lone_silent_nodes(reads: Iterable[SourceRead]) -> dict[int, list[SourceRead]]:
    """Nodes that alone did not answer a kind of per-node read while every other node of that kind
    did: {node: its unanswered reads}. Several silent at once point at the bot's host or the
    network, not at one broker, and are not returned."""
    by_kind: dict[str, list[SourceRead]] = {}
    for r in reads:
        if r.node is not None:
            by_kind.setdefault(r.source.split(" ")[0], []).append(r)
    gone = {r.node for r in reads if r.node is not None and r.state == "failed"}  # refused: not running
    out: dict[int, list[SourceRead]] = {}
    for rs in by_kind.values():
        # "no answer", not "failed": a refused connection is a process that is not there (dead), a
        # read that hangs is one that is there and cannot serve (paused, starved)
        silent = [r for r in rs if r.state == "no answer"]
        answered = [r for r in rs if r.state in ("read", "slow")]
        if len(silent) == 1 and answered and silent[0].node not in gone:
            out.setdefault(silent[0].node or 0, []).append(silent[0])
    return out


def honest(reply: Reply, reads: list[SourceRead]) -> Reply:
    """``reply`` with its sources, and an OK verdict turned into "can't tell" when a source the
    answer read for did not answer: absence of evidence is not health."""
    reply.sources = reads
    missing = unanswered(reads)
    lone = lone_silent_nodes(reads)
    if lone and reply.outcome != "bad_input":
        return _lone_broker(reply, lone)
    if reply.severity != "ok" or not missing:
        return reply
    who = ", ".join(f"{r.source} ({r.detail or r.state})" for r in missing)
    reply.severity = "unknown"
    reply.outcome = "partial"
    reply.verdict = (
        f"Can't tell: {who} did not answer, so this is not a clean bill of health. What was read says: {reply.verdict}"
    )
    check = [f"{r.source}" for r in missing]
    reply.evidence.insert(
        0,
        Evidence(
            "Not read",
            f"{'; '.join(check)}: check that process and its host (is it running, paused, starved of CPU "
            "or disk?), then ask again",
            "sources",
            "bad",
        ),
    )
    return reply


def _lone_broker(reply: Reply, lone: dict[int, list[SourceRead]]) -> Reply:
    """One node alone did not answer while the others of its kind did: that is a finding about the
    node (a paused or starved process), whatever else the answer says."""
    nodes = sorted(lone)
    what = "; ".join(f"{r.source}: {r.detail or r.state}" for n in nodes for r in lone[n])
    who = ", ".join(str(n) for n in nodes)
    reply.evidence.insert(0, Evidence(f"Node {who}", f"alone did not answer: {what}", "sources", "bad"))
    if reply.severity in ("warning", "critical", "error"):
        return reply  # the answer found a fault already; the row says which node did not answer
    reply.severity = "warning"
    reply.outcome = "partial"
    reply.verdict = (
        f"Node {who} alone did not answer while the others did ({what}): a live but starved or paused process "
        f"(CPU, disk, a stop-the-world pause) shows this before anything else does. `why starved broker` reads it "
        f"per broker. What was read says: {reply.verdict}"
    )
    return reply
