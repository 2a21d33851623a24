"""One-dir broker halted by its failed log dir (issue 27, finding 4): broker 102 has a single log
dir (``node-102/data``); the lab removes the directories of a topic's partitions in it from outside
(``rm -r``, as the issue's engineer did) while a producer writes. The broker's next segment roll
creates a file in a directory that is gone, the I/O error takes the log dir offline
(LogDirFailureChannel), and with no log dir left online LogManager.handleLogDirFailure logs
"Shutdown broker because all log dirs in ... have failed" and calls Exit.halt(1).

Why broker 102 and not 103: in the standard lab cluster 103 has a second log dir (disk2, for the
disk modes); failing its first dir halts it too, but because that dir holds the KRaft metadata log
("the metadata log dir ... has failed"), not because no dir is left. 102 is the one-dir broker the
issue describes, with no change to the cluster.

The topic rolls a segment every second (segment.ms): with Kafka's default (7 days) appends go on
into the open, unlinked segment files and nothing fails for minutes (seen: 120 s without an error),
until something else creates a file there (a roll, a leader-epoch checkpoint, deleting the topic).

From outside the bot sees what a SIGKILL leaves: 102 not registered, its port refusing, its
replicas out of the ISRs. The right answer says the cause cannot be told from there and names
what decides it (the broker's server.log, its log dirs after a restart), and moves nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from lab import probes
from lab.mode import Mode

TOPIC = "lab-one-dir-halt"
BROKER = 102
PARTITIONS = 3
HALT_LINE = "Shutdown broker because all log dirs"


def data_dir(cluster) -> Path:
    """The broker's only log dir (localkafka: ``<node>/data``; the lab gives 102 no other)."""
    dirs = cluster.log_dirs(cluster.brokers[BROKER])
    if len(dirs) != 1:
        raise RuntimeError(f"broker {BROKER} has {len(dirs)} log dirs ({', '.join(map(str, dirs))}), not one")
    return dirs[0]


def inject(cluster):
    node = cluster.brokers[BROKER]
    log = node.log_dir / "server.log"
    seen = log.stat().st_size if log.exists() else 0  # the halt line must be new, not an earlier run's
    cluster.faults.create_topic(
        TOPIC, partitions=PARTITIONS, replication_factor=3, config={"segment.ms": "1000"}, timeout=90
    )
    producer = cluster.faults.hot_key_producer(TOPIC, rate=100, hot_ratio=0.0, partitions=PARTITIONS)
    here = data_dir(cluster)
    parts = cluster.faults.wait_for(
        lambda: (lambda d: d if len(d) == PARTITIONS else None)(sorted(here.glob(f"{TOPIC}-*"))),
        60,
        f"broker {BROKER}'s replicas of {TOPIC} in {here}",
    )
    # every partition has records (a roll needs a non-empty segment) before its folder goes
    cluster.faults.wait_for(
        lambda: len(producer.stats()["per_partition"]) == PARTITIONS,
        60,
        f"records delivered to every partition of {TOPIC}",
    )
    for d in parts:
        shutil.rmtree(d, ignore_errors=True)
    return {
        "broker_id": BROKER,
        "pid": node.pid(),
        "topic": TOPIC,
        "topics": [TOPIC],
        "log_dir": str(here),
        "removed": [d.name for d in parts],
        "producer": producer.name,
        "_log_offset": seen,
    }


def halt_line(cluster, since: int = 0) -> str | None:
    """The broker's own word for why it stopped (read by the lab, never by the bot)."""
    log = cluster.brokers[BROKER].log_dir / "server.log"
    try:
        with open(log, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    return next((ln.strip() for ln in text.splitlines() if HALT_LINE in ln), None)


def wait_for_symptom(cluster, facts):
    """The process is gone, the halt line is in its log, and the controller dropped it from the
    ISRs; anything else (a crash for another reason) is not this mode."""
    node = cluster.brokers[BROKER]
    cluster.faults.wait_for(lambda: node.pid() is None, 90, f"broker {BROKER} to halt")
    line = halt_line(cluster, facts.get("_log_offset", 0))
    if line is None:
        raise RuntimeError(f"broker {BROKER} stopped without logging '{HALT_LINE} ... have failed'")
    cluster.faults.wait_for(
        lambda: probes.not_registered(cluster, BROKER) and len(probes.isr_lacks(cluster, TOPIC, BROKER)) == PARTITIONS,
        90,
        f"broker {BROKER} out of the cluster and the ISRs of {TOPIC}",
    )
    return {"halt_line": line[line.find("Shutdown") :]}


def heal(cluster, facts):
    """Stop the producer. The generic heal then deletes the topic (the controller drops it while 102
    is down) and starts 102: its log dir is whole again (only the topic's folders were removed), so
    it comes back online, and the heal waits for every ISR to be full."""
    cluster.faults.stop_background()


MODE = Mode(
    name="one-dir-halt",
    summary=f"remove a topic's partition dirs under one-dir broker {BROKER} while producing: its only log dir fails, "
    "Kafka halts it",
    expect_entry="broker-loss",
    expect_severity="warning",
    questions=("why URP", "why offline"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["broker_id"]],
    # from outside a halted broker is a stopped process: the answer must say the cause is open
    expect_verdict="cannot be told from here",
)
