"""Run one mode end to end: inject, wait for the symptom, ask, judge, and (optionally) heal.

The fault's facts are written next to the cluster dir (``<dir>.state.json``) before anything
else happens, so `kbot lab heal` in another process, or the next run, can undo it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from confluent_kafka import KafkaException

from lab import memcap, netcut
from lab.ask import Asker
from lab.judge import answer_budget, judge
from lab.mode import Facts, Mode
from lab.modes import by_name
from lab.topology import LabCluster, can_mount, cluster_for
from localkafka.cluster import metric_value, scrape
from runbook_kb import default_kb

OFFLINE_LOG_DIRS = "kafka_log_logmanager_offlinelogdirectorycount"


def _state_file(cluster: LabCluster) -> Path:
    return cluster.base_dir.parent / f"{cluster.base_dir.name}.state.json"


def public(facts: Facts) -> Facts:
    """Facts without the in-memory handles a mode keeps for its own heal (keys starting with _)."""
    return {k: v for k, v in facts.items() if not k.startswith("_")}


def _save_state(cluster: LabCluster, mode: Mode, facts: Facts) -> None:
    _state_file(cluster).write_text(json.dumps({"mode": mode.name, "facts": public(facts)}, default=str))


def pending(cluster: LabCluster) -> dict | None:
    try:
        return json.loads(_state_file(cluster).read_text())
    except (OSError, ValueError):
        return None


def unavailable(mode: Mode, cluster: LabCluster | None = None) -> str | None:
    """Why ``mode`` cannot run on this machine, or None. With a started ``cluster``, also whether
    the small filesystem it needs really got mounted (lab/topology.py)."""
    if not mode.feasible:
        return mode.note
    if "tc" in mode.needs:
        why = netcut.unavailable()
        if why:
            return why
    if "memcg" in mode.needs:
        why = memcap.unavailable()
        if why:
            return why
    wants_disk = {"disk2", "ext4"} & set(mode.needs)
    if wants_disk and not can_mount():
        return "needs to mount a small filesystem for broker 103's second log dir (root); not allowed here"
    if wants_disk and cluster is not None:
        fs = cluster.disk2_fstype()
        if fs is None:
            return "the small filesystem for broker 103's second log dir could not be mounted (see lab list)"
        if "ext4" in mode.needs and fs != "ext4":
            return f"needs a loop-device ext4 to freeze (fsfreeze); only {fs} could be mounted here"
    return None


async def _ask_all(cluster: LabCluster, questions: list[str]):
    asker = Asker(cluster)
    try:
        return [await asker.ask_until_read(q) for q in questions]
    finally:
        await asker.close()


def run_mode(mode: Mode, cluster: LabCluster | None = None, *, heal: bool = True, kb=None) -> dict:
    """Inject, wait, ask, judge; the result as a plain dict (what `lab run --json` prints and the
    tests write for scripts/lab_report.py)."""
    kb = kb or default_kb()
    result: dict = {
        "mode": mode.name,
        "expect": {"entry": mode.expect_entry, "severity": mode.expect_severity},
        "reproduced": False,
        "facts": {},
        "answers": [],
        "judgement": None,
        "error": None,
        "healed": False,
    }
    why_not = unavailable(mode)
    if why_not:
        result["error"] = f"not run: {why_not}"
        return result
    cluster = cluster or cluster_for(mode.topology)
    cluster.up()
    why_not = unavailable(mode, cluster)
    if why_not:
        result["error"] = f"not run: {why_not}"
        return result
    if pending(cluster):
        heal_pending(cluster)
    facts: Facts = {}
    t0 = time.monotonic()
    try:
        _save_state(cluster, mode, {})
        facts = mode.inject(cluster) or {}
        _save_state(cluster, mode, facts)
        result["facts"] = public(facts)
        result["inject_seconds"] = round(time.monotonic() - t0, 1)
        t1 = time.monotonic()
        if mode.wait_for_symptom is not None:
            seen = mode.wait_for_symptom(cluster, facts)
            if isinstance(seen, dict):
                facts.update(seen)
                result["facts"] = public(facts)
                _save_state(cluster, mode, facts)
        result["symptom_seconds"] = round(time.monotonic() - t1, 1)
        result["reproduced"] = True
        asked = asyncio.run(_ask_all(cluster, mode.questions_for(facts)))
        result["answers"] = [
            {"question": a.question, "outcome": a.outcome, "seconds": a.seconds, "tries": a.tries, "reply": a.reply}
            for a in asked
        ]
        first = asked[0]
        j = judge(
            first.reply,
            first.seconds,
            expect_entry=mode.expect_entry,
            expect_severity=mode.expect_severity,
            named=[str(n) for n in mode.named(facts)],
            kb=kb,
            expect_verdict=mode.expect_verdict,
            not_top=mode.not_top,
            budget_s=answer_budget(idle_s=mode.answer_budget_s) if mode.answer_budget_s else None,
        )
        result["judgement"] = j.to_dict()
    except (KafkaException, RuntimeError, OSError, TimeoutError) as exc:
        result["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
    finally:
        if heal:
            heal_mode(cluster, mode, facts)
            result["healed"] = True
    return result


def heal_mode(cluster: LabCluster, mode: Mode, facts: Facts) -> dict:
    """The mode's own undo (thaw, remove the filler, stop its child processes), its topics deleted
    (before waiting for ISRs: a half-broken topic must not hold the heal up), any broker that took
    a log dir offline restarted (Kafka re-onlines a failed dir only at start-up), then the cluster
    back to healthy (localkafka's heal: resume/restart nodes, wait for full ISRs)."""
    if mode.heal is not None:
        mode.heal(cluster, facts)
    topics = sorted(set(facts.get("topics") or []) | set(mode.topics))
    deleted = delete_topics(cluster, topics) if topics else []
    prune_deleted_lab_topics(cluster)
    restarted = restart_offline_dirs(cluster)
    out = cluster.faults.heal(timeout=180)
    out.update(deleted_topics=deleted, restarted_for_offline_dirs=restarted)
    _state_file(cluster).unlink(missing_ok=True)
    return out


def prune_deleted_lab_topics(cluster: LabCluster) -> list[str]:
    """Remove, from broker 103's small second disk, the replica folders of lab topics the cluster
    no longer has. Kafka removes them itself once the broker runs, but a broker whose disk filled
    up cannot start to do it (its index mmaps fail), so a full disk would stay full for good."""
    import shutil

    if cluster.disk2 is None or not cluster.disk2.exists():
        return []
    live = set(cluster.admin().list_topics(timeout=10).topics)  # raises rather than prune blind
    removed = []
    for d in cluster.disk2.iterdir():
        topic, _, num = d.name.rpartition("-")
        if d.is_dir() and topic.startswith("lab-") and num.isdigit() and topic not in live:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


def restart_offline_dirs(cluster: LabCluster) -> list[int]:
    """Restart every running broker whose exporter reports an offline log dir."""

    done = []
    for bid, node in cluster.brokers.items():
        text = scrape(node.metrics_url) if node.pid() else None
        if text is not None and (metric_value(text, OFFLINE_LOG_DIRS) or 0) > 0:
            cluster.stop_node(node)
            cluster.start_node(node)
            cluster.wait_ready(180, brokers=[bid])
            done.append(bid)
    return done


def delete_topics(cluster: LabCluster, topics: list[str], timeout: float = 60) -> list[str]:
    """Delete the mode's topics and wait until the metadata no longer lists them, so the next mode's
    answers are not about this one's leftovers (localkafka's Faults.delete_topics)."""
    cluster.faults.delete_topics(topics, timeout)
    return topics


def heal_pending(cluster: LabCluster) -> dict | None:
    """Undo whatever fault the last `kbot lab run` left in place on ``cluster``."""

    state = pending(cluster)
    if state is None:
        return None
    mode = by_name().get(state.get("mode"))
    if mode is None:
        _state_file(cluster).unlink(missing_ok=True)
        return cluster.faults.heal(timeout=180)
    return {"mode": mode.name, **heal_mode(cluster, mode, state.get("facts") or {})}
