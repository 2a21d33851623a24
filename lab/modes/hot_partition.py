"""Hot partition: a producer (its own client) sends 90% of its records with one key, so the one
partition that key hashes to takes most of the topic's traffic. Seen from outside: that partition's
log end offset runs far ahead of the others'.

The lab asks without the metric lake (it does not start Spark, to stay within the CI budget), so
the answer has to come from what the live cluster shows."""

from lab import probes
from lab.mode import Mode

TOPIC = "lab-hot"
PARTITIONS = 6


def inject(cluster):
    bp = cluster.faults.hot_key_producer(TOPIC, key="hot-key", rate=300, hot_ratio=0.9, partitions=PARTITIONS)
    return {"topic": TOPIC, "topics": [TOPIC], "_producer": bp}


def wait_for_symptom(cluster, facts):
    def skewed():
        ends = probes.end_offsets(cluster, TOPIC, list(range(PARTITIONS)))
        hot = max(ends, key=ends.get)
        others = sorted(v for p, v in ends.items() if p != hot)
        median = others[len(others) // 2]
        if ends[hot] >= 500 and ends[hot] > 10 * max(1, median):
            return {"hot_partition": f"{TOPIC}-{hot}", "end_offsets": ends}
        return None

    return cluster.faults.wait_for(skewed, 90, f"one partition of {TOPIC} to run ahead of the rest")


MODE = Mode(
    name="hot-partition",
    summary="a producer sends 90% of its records with one key: one partition of the topic takes most of the load",
    expect_entry="hot-partition",
    expect_severity="warning",
    questions=("why hot partition", f"hot-partitions {TOPIC}"),
    inject=inject,
    wait_for_symptom=wait_for_symptom,
    topics=(TOPIC,),
    named=lambda f: [f["hot_partition"]],
)
