"""Producer fencing: two instances of an application share one transactional.id. The first
(a separate process, lab/fence_child.py) has a transaction open; the second (localkafka's
txn_child.py) calls InitProducerId with the same id, which bumps the epoch and fences the first;
the first's commit then fails with the fencing error, read from its own output."""

import signal
import subprocess
import sys
import uuid
from pathlib import Path

from lab.mode import Mode
from localkafka import procs
from localkafka.faults import _read_line

TOPIC = "lab-fencing"


def _spawn(script: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def inject(cluster):
    cluster.faults.create_topic(TOPIC, partitions=3, replication_factor=3, timeout=90)
    tid = f"lab-app-{uuid.uuid4().hex[:6]}"
    cluster.faults.track_transaction(tid)  # heal() re-inits it, ending whatever the instances left open
    first = _spawn(
        Path(__file__).parents[1] / "fence_child.py",
        "--bootstrap",
        cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--transactional-id",
        tid,
    )
    facts = {"topic": TOPIC, "topics": [TOPIC], "transactional_id": tid, "pids": [first.pid]}
    if _read_line(first, 90) != "READY":
        first.kill()
        raise RuntimeError("the first transactional producer did not start")
    second = _spawn(
        Path(procs.__file__).with_name("txn_child.py"),
        "--bootstrap",
        cluster.bootstrap_servers,
        "--topic",
        TOPIC,
        "--partition",
        "1",
        "--transactional-id",
        tid,
        "--records",
        "2",
    )
    facts["pids"].append(second.pid)
    if not _read_line(second, 90).startswith("READY"):
        raise RuntimeError("the second transactional producer (same transactional.id) did not start")
    first.stdin.write("commit\n")
    first.stdin.flush()
    facts["_first"], facts["_second"] = first, second  # runner keeps facts in memory for heal
    return facts


def wait_for_symptom(cluster, facts):
    line = _read_line(facts["_first"], 60)
    if not line.startswith("RESULT ") or line == "RESULT OK":
        raise RuntimeError(f"the first producer was not fenced: {line or 'no answer'}")
    return {"first_producer_error": line[len("RESULT ") :]}


def heal(cluster, facts):
    for pid in facts.get("pids", []):
        procs.signal_pid(pid, signal.SIGKILL)
    for key in ("_first", "_second"):
        child = facts.get(key)
        if child is not None:
            child.wait(10)
            for s in (child.stdin, child.stdout):
                s.close()


MODE = Mode(
    name="producer-fencing",
    summary="two producer processes share a transactional.id: the newer one fences the first, whose commit fails",
    expect_entry="producer-fencing",
    expect_severity="warning",
    questions=("why ProducerFencedException", "hanging-txns"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    heal=heal,
    topics=(TOPIC,),
    named=lambda f: [f["transactional_id"]],
)
