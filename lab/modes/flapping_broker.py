"""Flapping broker: broker 103 stops whole for a few seconds, runs a few seconds, stops again - a
duty cycle of SIGSTOP / SIGCONT from a child process (lab/flap_child.py), the way repeated long GC
pauses or a VM that keeps being frozen look from outside. Each stop outlasts the lab's
broker.session.timeout.ms (4 s), so the controller fences it and takes it out of every ISR; each run
lets it heartbeat, be unfenced and catch up, and the leaders add it back. A producer keeps writing
to an RF=3 topic meanwhile.

The question is asked right after broker 103 came back into every ISR of the topic: the hard case,
where a snapshot of the ISRs shows nothing under-replicated and only the churn tells."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from lab.mode import Mode
from localkafka import procs
from localkafka.faults import _read_line

TOPIC = "lab-flapping"
BROKER = 103
PARTITIONS = 6
# > the lab's broker.session.timeout.ms (4 s): fenced on every stop, and out of the ISRs for ~3 s
# of it (with 5 s it was ~1 s: a metadata poll that landed on the stopped broker missed it)
STOP_S = 7.0
# time to heartbeat, be unfenced, catch up and be added back to the ISRs: with 5 s a busy machine's
# broker often had not rejoined every ISR before the next stop, and three whole returns were not
# seen in 120 s (CI, and once idle)
RUN_S = 8.0
WAIT_S = 180.0
# ISR departures of broker 103 seen from outside before the question is asked: three, so the leaders'
# one-minute IsrExpandsPerSec has ticked over more than one return (after two it was at ~0.05-0.08/s
# summed, the runbook's bound; after three 0.06-0.15/s, on the 6 partitions of the topic)
LEAVES = 3


class Cycler:
    """The duty-cycle child, as a background worker of the cluster's FaultInjector: its
    stop_background() (and so every heal) ends it and leaves the broker running."""

    name = "flapping-broker duty cycle"

    def __init__(self, cluster, child: subprocess.Popen):
        self.cluster, self.child = cluster, child

    def stop(self, timeout: float = 15) -> dict:
        if self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)  # the child SIGCONTs the broker on its way out
            try:
                self.child.wait(timeout)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait(10)
        if self.child.stdout is not None:
            self.child.stdout.close()
        _resume(self.cluster)
        return {"cycler": self.child.pid, "returncode": self.child.returncode}


def _resume(cluster) -> None:
    pid = cluster.brokers[BROKER].pid()
    if pid and procs.is_stopped(pid):
        cluster.faults.resume_broker(BROKER)


def inject(cluster):
    cluster.faults.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, timeout=90)
    producer = cluster.faults.hot_key_producer(TOPIC, rate=100, hot_ratio=0.0, partitions=PARTITIONS)
    pid = cluster.brokers[BROKER].pid()
    if not pid:
        raise RuntimeError(f"broker {BROKER} is not running")
    child = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parents[1] / "flap_child.py"),
            "--pid",
            str(pid),
            "--stop-s",
            str(STOP_S),
            "--run-s",
            str(RUN_S),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    cycler = Cycler(cluster, child)
    cluster.faults._background.append(cycler)  # stopped with the producer by every heal
    facts = {
        "broker_id": BROKER,
        "pid": pid,
        "topic": TOPIC,
        "topics": [TOPIC],
        "pids": [child.pid],
        "cycle": f"{STOP_S:g} s stopped, {RUN_S:g} s running",
        "producer": producer.name,
        "_cycler": cycler,
    }
    if _read_line(child, 30) != "READY":
        raise RuntimeError("the duty-cycle process did not start")
    return facts


def _in_all_isrs(cluster) -> bool | None:
    """Whether broker 103 is in the ISR of every partition it has a replica of, on every topic
    (None: the metadata did not answer; a read that lands on the stopped broker waits out its
    timeout)."""
    try:
        md = cluster.admin().list_topics(timeout=1.0)
    except Exception:
        return None
    tm = md.topics.get(TOPIC)
    if tm is None or tm.error is not None or not tm.partitions:
        return None
    return all(BROKER in p.isrs for t in md.topics.values() for p in t.partitions.values() if BROKER in p.replicas)


def wait_for_symptom(cluster, facts):
    """Broker 103 seen leaving the ISRs LEAVES times, and back in all of them now."""
    leaves, was_in, t0 = 0, True, time.monotonic()

    def seen():
        nonlocal leaves, was_in
        now_in = _in_all_isrs(cluster)
        if now_in is None:
            return None
        if was_in and not now_in:
            leaves += 1
        was_in = now_in
        return (
            {"isr_leaves_seen": leaves, "seconds_flapping": round(time.monotonic() - t0, 1)}
            if (now_in and leaves >= LEAVES)
            else None
        )

    return cluster.faults.wait_for(
        seen, WAIT_S, f"broker {BROKER} to leave the ISRs of {TOPIC} {LEAVES} times and come back", interval=0.25
    )


def heal(cluster, facts):
    cycler = facts.get("_cycler")
    if cycler is not None:
        cycler.stop()
    else:  # healed from another process (`kbot lab heal`): end the child by its pid
        for pid in facts.get("pids", []):
            if procs.signal_pid(pid, signal.SIGTERM):
                procs.wait_gone(pid, 15)
    cluster.faults.stop_background()  # the producer too, before the runner deletes its topic
    _resume(cluster)


MODE = Mode(
    name="flapping-broker",
    summary=f"SIGSTOP / SIGCONT broker {BROKER} in a duty cycle ({STOP_S:g} s / {RUN_S:g} s) while producing: "
    "fenced and back, over and over",
    expect_entry="gc-pauses",
    expect_severity="warning",
    questions=("why URP", "why IsrShrinksPerSec"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
)
