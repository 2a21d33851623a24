"""Lake-backed answers through framework.dispatch.answer, on the synthetic lake (see conftest):
why URP with lake evidence, hot-partitions, history, lag window verdicts; empty lake; lake
unavailable; injection attempts."""

from __future__ import annotations

import datetime as dt

import pytest
from lakekit import clock_at, hhmm

from commands.registry import answer
from framework.context import Context
from framework.errors import Unavailable
from live.model import GroupLag, PartitionLag

pytestmark = pytest.mark.spark


def ev(reply, source_prefix):
    return [e for e in reply.evidence if e.source.startswith(source_prefix)]


# --------------------------------------------------------------------------- why URP


async def test_why_urp_broker_loss_from_the_lake(ctx_at):
    result = await answer("why URP --since 30m", ctx_at(hhmm(10, 30)))
    reply = result.reply
    assert result.outcome == "answered"
    assert reply.window == "last 30 min: 2024-05-01 10:00 to 10:30 UTC"
    trend = ev(reply, "lake: urp_trend")
    assert [e.label for e in trend] == ["URP trend, broker 1", "URP trend, broker 3", "URP trend, broker 4"]
    assert all(e.value.startswith("flat: level at 5") and e.status == "bad" for e in trend)
    churn = {e.label: e.value for e in ev(reply, "lake: isr_churn")}
    assert churn["ISR churn, broker 1"] == (
        "5 ISR shrinks, 0 expands (shrinks without expands) (lake data to 10:29:30 UTC, 30 s old)"
    )
    assert ev(reply, "lake: urp_concentration")[0].label == "URP reported evenly by"
    # when it began, read from the samples (broker 2 was lost at 10:10)
    assert all(", since 10:10:00 UTC" in e.value for e in trend), trend
    # no live cluster: the lake's flat trend points at broker loss
    assert reply.diagnoses[0].entry_id == "broker-loss"
    assert reply.diagnoses[0].why_ranked.startswith("lake: URP flat on broker(s) 1, 3, 4")
    assert "flat" in reply.verdict and "Broker loss" in reply.verdict


async def test_why_urp_slow_follower_is_fluctuating_and_concentrated(ctx_at):
    reply = (await answer("why URP", ctx_at(hhmm(11, 30)))).reply
    assert reply.window.startswith("last 15 min: 2024-05-01 11:15 to 11:30")
    shapes = {e.label: e.value.split(":")[0] for e in ev(reply, "lake: urp_trend")}
    assert set(shapes.values()) == {"fluctuating"}
    conc = ev(reply, "lake: urp_concentration")
    assert conc and conc[0].label == "URP reported mostly by"
    assert "the missing replicas may be on another broker" in conc[0].value
    churn = {e.label: e for e in ev(reply, "lake: isr_churn")}
    assert "shrinks without expands" in churn["ISR churn, broker 3"].value
    assert reply.diagnoses[0].entry_id == "slow-follower"


@pytest.fixture(scope="module")
def lake_behind(spark, tmp_path_factory):
    """A lake whose data ends at 10:59:30 while broker 2, lost at 10:10, is still gone (its
    collector stopped): tools.synthetic, 3 brokers, 30 s samples."""
    from lake.service import LakeService
    from tools import synthetic as S

    path = str(tmp_path_factory.mktemp("behind") / "lake")
    S.generate(
        path,
        cluster="syn",
        start=hhmm(10, 0),
        hours=1,
        brokers=3,
        topics=2,
        partitions_per_topic=3,
        resolution_s=30,
        seed=11,
        spark=spark,
        metrics=["UnderReplicatedPartitions", "IsrShrinksPerSec", "IsrExpandsPerSec"],
        incidents=[S.broker_loss(2, hhmm(10, 10), dt.timedelta(hours=2))],
    )
    svc = LakeService(path, cluster=None, spark=spark, query_timeout_s=60)
    assert svc.start().wait_ready_sync(120), svc.status()
    yield svc
    svc.stop()


async def test_why_urp_on_a_lake_behind_says_how_old_its_data_is_and_when_what_it_shows_began(lake_behind):
    """The lake's data ends 5 minutes before the answer, and it shows the loss from 10:10: it said
    "lake data ends 10:59:30 UTC, before this began", when nothing told when this began and its
    own samples showed it beginning at 10:10."""
    ctx = Context(lake=lake_behind, clock=clock_at(hhmm(11, 5)))
    reply = (await answer("why URP --since 1h", ctx)).reply
    assert not any("before this began" in n for n in reply.notes), reply.notes
    assert (
        "Metric lake: lake data ends 10:59:30 UTC, 5 min before this answer; it shows this from 10:10:00 UTC up to "
        "then, not what happened since." in reply.notes
    ), reply.notes
    trend = ev(reply, "lake: urp_trend")
    assert trend and all(e.status == "bad" and ", since 10:10:00 UTC" in e.value for e in trend), trend
    assert all(e.value.endswith("(lake data to 10:59:30 UTC, 5 min old)") for e in trend), trend
    assert reply.diagnoses[0].entry_id == "broker-loss"


async def test_why_urp_on_a_sample_or_two_of_urp_tells_no_shape(lake_behind):
    """A minute into the loss the lake holds two samples of it: "fluctuating: between 11 and 11,
    0 changes in 1 samples" read a shape into them."""
    ctx = Context(lake=lake_behind, clock=clock_at(hhmm(10, 11)))
    reply = (await answer("why URP --since 1m", ctx)).reply
    trend = ev(reply, "lake: urp_trend")
    assert trend and all(e.status == "bad" for e in trend), trend
    assert not any(e.value.startswith(("fluctuating", "flat")) for e in trend), trend
    assert all("too few to tell flat from fluctuating" in e.value for e in trend), trend
    assert "in too few samples to tell a lost broker (flat) from a slow follower (fluctuating)" in reply.verdict
    # no shape, no cause pointed at from it: the runbook's order stands
    assert not reply.diagnoses[0].why_ranked.startswith("lake:"), reply.diagnoses[0].why_ranked


async def test_why_on_an_empty_window_says_no_data(ctx_at):
    reply = (await answer("why URP", ctx_at(hhmm(15, 0)))).reply
    lake = ev(reply, "lake:")
    assert [e.value.split(" (")[0] for e in lake] == ["no data for this window"]
    assert reply.window == "last 15 min: 2024-05-01 14:45 to 15:00 UTC"
    assert reply.diagnoses[0].entry_id == "broker-loss"  # runbook order


async def test_why_on_a_lake_with_nothing_ingested_says_not_enough_data(spark, tmp_path):
    from lake.service import LakeService

    lake = LakeService(str(tmp_path / "never-written"), spark=spark, warm=False).start()
    reply = (await answer("why URP", Context(lake=lake, clock=lambda: hhmm(10, 30).timestamp()))).reply
    assert [e.value for e in ev(reply, "lake:")] == ["not enough data yet (0 min collected)"]
    assert reply.diagnoses and not [n for n in reply.notes if n.startswith("Metric lake")]


class DownLake:
    """A lake that cannot answer: its Spark did not start (``history``), and its table cannot be
    read (the window's questions, ``lag``'s among them)."""

    cluster = None

    async def query(self, fn, *args, **kwargs):
        raise Unavailable("The metric lake is unavailable: Spark did not start (Java is missing).")

    async def ask_window(self, question, start, end, *args, **kwargs):
        from lake.errors import LakeUnavailable

        raise LakeUnavailable("The metric lake is unavailable: its table could not be read (the disk is gone).")


async def test_why_with_an_unreadable_lake_still_answers_with_a_note(spark, tmp_path):
    """The table's log damaged on disk (as a full disk or a bad copy leaves it): the live part
    stands, the lake's part is a note saying what could not be read."""
    from lake.service import LakeService

    log_dir = tmp_path / "samples" / "_delta_log"
    log_dir.mkdir(parents=True)
    (log_dir / "00000000000000000000.json").write_text('{"protocol": {"minReaderVersion": 1\n')
    lake = LakeService(str(tmp_path / "samples"), spark=spark, warm=False).start()
    result = await answer("why URP", Context(lake=lake, clock=lambda: hhmm(10, 30).timestamp()))
    assert result.outcome == "answered"
    assert not ev(result.reply, "lake:")
    [note] = [n for n in result.reply.notes if n.startswith("Metric lake:")]
    assert "could not be read" in note and "no lake evidence" in note
    assert result.reply.window is None


async def test_bad_since_is_bad_input(ctx_at):
    for text in (
        "why URP --since forever",
        "why URP --since 0m",
        "hot-partitions --since 90d",
        "history URP --since 1y",
    ):
        result = await answer(text, ctx_at(hhmm(10, 30)))
        assert result.outcome == "bad_input", text
        assert "--since" in result.reply.verdict


async def test_other_symptoms_get_lake_evidence(ctx_at):
    reply = (await answer("why hot key --since 20m", ctx_at(hhmm(10, 30)))).reply
    assert ev(reply, "lake: hot_partitions")[0].label == "Write rate topic-001-2"
    reply = (await answer("why under min isr", ctx_at(hhmm(10, 30)))).reply
    assert ev(reply, "lake: under_min_isr_timeline")


# --------------------------------------------------------------------------- hot-partitions


async def test_hot_partitions_names_the_hot_key_partition(ctx_at, lake_service):
    ctx = ctx_at(hhmm(10, 30))
    result = await answer("hot-partitions", ctx)
    reply = result.reply
    assert result.outcome == "answered", reply.verdict
    assert reply.verdict.startswith("topic-001-2 is hot:")
    assert "led by broker 4" in reply.verdict  # the lake's estimate (no live cluster here)
    assert reply.window == "last 15 min: 2024-05-01 10:15 to 10:30 UTC"
    rows = reply.tables[0].records()
    assert rows[0]["#"] == 1 and rows[0]["partition"] == "topic-001-2" and len(rows) == 10
    assert rows[0]["peak rec/s"] >= rows[0]["mean rec/s"] and rows[0]["x topic median"] >= 3
    assert reply.evidence[0].source == "lake: hot_partitions" and reply.evidence[0].status == "bad"
    assert reply.diagnoses[0].entry_id == "hot-partition"
    # the runbook's own warning about adding partitions, word for word from the KB
    first = ctx.kb.failure_modes["hot-partition"].do_not[0]
    assert reply.notes[0] == f"Do not: {first.action}. {first.why}"
    # the chart: the first partitions of the ranking, per minute, the hot one on top at its peak
    assert [s.label for s in reply.series] == [r["partition"] for r in rows[: len(reply.series)]] and len(
        reply.series
    ) == 5
    hottest = reply.series[0]
    assert hottest.unit == "records/s" and len(hottest.points) >= 14
    assert max(v for _t, v in hottest.points) == rows[0]["peak rec/s"]


async def test_hot_partitions_of_one_topic_over_a_short_window(ctx_at):
    reply = (await answer("hot-partitions topic-002 --since 5m --top 3", ctx_at(hhmm(10, 30)))).reply
    assert reply.severity == "ok" and reply.verdict.startswith("No hot partition in the last 5 min")
    rows = reply.tables[0].records()
    assert len(rows) == 3 and all(r["partition"].startswith("topic-002-") for r in rows)


async def test_hot_partitions_uses_live_leaders_when_there_is_a_cluster(ctx_at):
    from live.model import PartitionInfo, TopicInfo

    class GW:
        name = "syn"

        async def describe_topics(self, names, include_internal=False):
            return [TopicInfo(t, [PartitionInfo(t, p, 99, [99], [99]) for p in range(5)]) for t in names]

    class Pool:
        async def get(self, name=None):
            return GW()

    reply = (await answer("hot-partitions topic-001", ctx_at(hhmm(10, 30), live=Pool()))).reply
    assert "led by broker 99" in reply.verdict
    assert reply.tables[0].records()[0]["leader"] == "99 (live)"


@pytest.fixture(scope="module")
def metadata_log_lake(spark, tmp_path_factory):
    """10:00-10:15: KRaft's __cluster_metadata-0 on controller 1 is the fastest log; orders-0/1
    write 2 and 1 records/s; topic "gone" (deleted since) 0.5 records/s."""
    from lake.schema import partition_values
    from lake.service import LakeService
    from spark_queries.schema import SAMPLE_SCHEMA

    def series(topic, partition, broker, per_sec):
        out = []
        for i in range(31):
            ts = hhmm(10, 0) + dt.timedelta(seconds=30 * i)
            date, hour = partition_values(ts)
            out.append((ts, broker, "LogEndOffset", topic, partition, None, float(per_sec * 30 * i), "syn", date, hour))
        return out

    rows = (
        series("__cluster_metadata", 0, 1, 50)
        + series("orders", 0, 101, 2)
        + series("orders", 1, 102, 1)
        + series("gone", 0, 103, 0.5)
    )
    path = str(tmp_path_factory.mktemp("metadata-log") / "lake")
    spark.createDataFrame(rows, SAMPLE_SCHEMA).write.format("delta").partitionBy("cluster", "date", "hour").save(path)
    svc = LakeService(path, cluster=None, spark=spark, query_timeout_s=60)
    assert svc.start().wait_ready_sync(120), svc.status()
    yield svc
    svc.stop()


async def test_hot_partitions_leaves_out_the_kraft_metadata_log_unless_asked(metadata_log_lake):
    ctx = Context(lake=metadata_log_lake, clock=clock_at(hhmm(10, 15)))
    rows = (await answer("hot-partitions", ctx)).reply.tables[0].records()
    assert [(r["#"], r["partition"]) for r in rows] == [(1, "orders-0"), (2, "orders-1"), (3, "gone-0")]
    asked = (await answer("hot-partitions __cluster_metadata", ctx)).reply.tables[0].records()
    assert len(asked) == 1 and asked[0]["partition"] == "__cluster_metadata-0" and asked[0]["peak rec/s"] == 50.0


async def test_hot_partitions_live_leaders_survive_a_deleted_topic(metadata_log_lake):
    from live.gateway import UnknownTopic
    from live.model import PartitionInfo, TopicInfo

    class GW:
        name = "syn"

        async def describe_topics(self, names, include_internal=False):
            if "gone" in names:
                raise UnknownTopic(["gone"], "syn")
            return [TopicInfo(t, [PartitionInfo(t, p, 7, [7], [7]) for p in range(2)]) for t in names]

    class Pool:
        async def get(self, name=None):
            return GW()

    ctx = Context(lake=metadata_log_lake, live=Pool(), clock=clock_at(hhmm(10, 15)))
    reply = (await answer("hot-partitions", ctx)).reply
    leaders = [r["leader"] for r in reply.tables[0].records()]
    assert leaders[:2] == ["7 (live)", "7 (live)"] and leaders[2] == "103 (estimated from the lake)"
    assert any(n.startswith("Not in the cluster's metadata now (deleted?): gone") for n in reply.notes)


async def test_hot_partitions_after_a_broker_returns_does_not_call_its_catch_up_hot(ctx_at):
    """Broker 2 is back at 10:50 and its replicas copy the 40 minutes they missed within two
    minutes: a burst no client wrote.  The hot key ended at 10:35, so nothing is hot at 10:53.
    (With the peak taken over all replicas, the answer was "topic-001-2 is hot: peak 5,256
    rec/s", its follower catching up.)"""
    reply = (await answer("hot-partitions", ctx_at(hhmm(10, 53)))).reply
    assert reply.severity == "ok" and reply.verdict.startswith("No hot partition in the last 15 min"), reply.verdict
    rows = reply.tables[0].records()
    assert max(r["peak rec/s"] for r in rows) < 100  # the topics write up to ~70 records/s


async def test_an_hour_of_hot_partitions_is_ranked_from_the_minute_rollup(ctx_at):
    reply = (await answer("hot-partitions --since 1h", ctx_at(hhmm(10, 40)))).reply
    assert reply.verdict.startswith("topic-001-2 is hot:"), reply.verdict
    assert "from the 1-minute rollups; raw samples from 10:35 UTC on" in reply.notes[1]
    short = (await answer("hot-partitions", ctx_at(hhmm(10, 40)))).reply
    assert "rollups" not in short.notes[1]  # 15 minutes: raw samples are quicker (lake.queries)


def hot_of(spark, path, start, end, top, rank_by="peak", chart=0):
    """The ranking `hot-partitions` asks for (``window_queries.hot.ask_hot`` through
    ``LakeService.ask_window``), of the lake at ``path``."""
    import asyncio

    from lake.service import LakeService
    from window_queries.hot import ask_hot

    svc = LakeService(path, cluster=None, spark=spark, warm=False)

    async def ask(question, s, e, *args):
        return await svc.ask_window(question, s, e, *args, timeout=120)

    return asyncio.run(ask_hot(ask, start, end, None, top, rank_by, chart))


def test_the_minute_rollup_and_the_raw_samples_rank_an_hour_alike(spark, synthetic_lake, tmp_path):
    """The same hour (broker 2 back at 10:50, the slow follower from 11:00) ranked from the
    minute rollup and, through a path without the rollup tables beside it, from raw samples:
    the same ranks, leaders, peaks and charts; the window means differ by the first minute's
    steps at most (the rollup's rate starts at that minute's last sample).  Broker 2's first
    minute back (10:50), which it leads for topic-001-4, was seen for 30 s: both paths rate it
    over those 30 s (the rollup row keeps the seconds its steps span)."""
    raw_only = tmp_path / "raw-only"
    raw_only.symlink_to(synthetic_lake)  # the same Delta table; no raw-only_1m beside it
    for start in (hhmm(10, 0), hhmm(11, 0)):
        end = start + dt.timedelta(hours=1)
        rolled = hot_of(spark, synthetic_lake, start, end, 20, "peak", 3)
        raw = hot_of(spark, str(raw_only), start, end, 20, "peak", 3)
        assert (rolled["resolution"], rolled["raw_from"], raw["resolution"]) == (
            "1m",
            end - dt.timedelta(minutes=5),
            "raw",
        )

        def same(r):
            return (
                r["rank"],
                r["topic"],
                r["partition"],
                r["leader_broker"],
                round(r["peak_records_per_sec"], 9),
                r["peak_at"],
            )

        assert [same(r) for r in rolled["rows"]] == [same(r) for r in raw["rows"]] and len(raw["rows"]) == 20
        for a, b in zip(rolled["rows"], raw["rows"]):
            assert a["records_per_sec"] == pytest.approx(b["records_per_sec"], rel=0.01)
        assert rolled["data_end"] == raw["data_end"] and len(rolled["series"]) == len(raw["series"])
        assert rolled["series"] == raw["series"]
        if start == hhmm(10, 0):  # the minute back reads at the steady rate after it
            part = [p for p in raw["series"] if (p["topic"], p["partition"]) == ("topic-001", 4)]
            [back] = [p["records_per_sec"] for p in part if p["minute"] == hhmm(10, 50)]
            steady = [p["records_per_sec"] for p in part if p["minute"] > hhmm(10, 50)]
            assert back == pytest.approx(sum(steady) / len(steady), rel=0.05)


def test_a_minute_rollup_behind_the_raw_samples_is_not_trusted(spark, tmp_path):
    """Rollups stopped at 10:30 (a collector that fell behind), and the hot key wrote at 10:40:
    an hour's ranking from the rollup would miss it, so it comes from the raw samples; once the
    rollups catch up, the rollup answers the same."""
    from lake.rollups import update_rollups
    from tools import synthetic as S

    path = str(tmp_path / "lake")
    S.generate(
        path,
        cluster="behind",
        start=hhmm(10, 0),
        hours=1,
        brokers=3,
        topics=2,
        partitions_per_topic=3,
        resolution_s=30,
        seed=11,
        metrics=["LogEndOffset", "Size"],
        incidents=[S.hot_key("topic-001", 1, hhmm(10, 40), "5m")],
        spark=spark,
        rollups=False,
    )
    minute = int(hhmm(10, 0).timestamp())
    update_rollups(spark, path, range(minute, minute + 30 * 60, 60))

    def top3():
        out = hot_of(spark, path, hhmm(10, 5), hhmm(10, 58), 3)
        return out["resolution"], [(r["topic"], r["partition"], r["peak_records_per_sec"]) for r in out["rows"]]

    resolution, behind = top3()
    assert resolution == "raw" and behind[0][:2] == ("topic-001", 1)
    update_rollups(spark, path, range(minute + 30 * 60, minute + 3600, 60))
    resolution, caught_up = top3()
    assert resolution == "1m" and caught_up == behind
    # a lake whose data begins inside the tail (a collector started 2 minutes ago) has no minute
    # at the tail's start, and nothing before it to miss: the rollup answers, as the raw samples do
    raw_only = tmp_path / "raw-only"
    raw_only.symlink_to(path)
    start, end = hhmm(9, 32), hhmm(10, 2)
    fresh = hot_of(spark, path, start, end, 3)
    raw = hot_of(spark, str(raw_only), start, end, 3)
    assert (fresh["resolution"], raw["resolution"]) == ("1m", "raw")
    assert [(r["topic"], r["partition"], r["peak_records_per_sec"]) for r in fresh["rows"]] == [
        (r["topic"], r["partition"], r["peak_records_per_sec"]) for r in raw["rows"]
    ]
    # the same minutes as a version before `seconds` wrote them, and none since (the next rollup
    # write would add the column): that table is not read as a rollup, the raw samples answer
    from lake.schema import ROLLUP_PARTITIONS, table_path

    path_1m = table_path(path, "1m")
    older = spark.read.format("delta").load(path_1m).drop("seconds").localCheckpoint()
    older.write.format("delta").mode("overwrite").option("overwriteSchema", "true").partitionBy(
        *ROLLUP_PARTITIONS["1m"]
    ).save(path_1m)
    resolution, from_older = top3()
    assert resolution == "raw" and from_older == caught_up


async def test_hot_partitions_empty_window(ctx_at):
    result = await answer("hot-partitions", ctx_at(hhmm(18, 0)))
    assert result.outcome == "answered"
    assert result.reply.verdict.startswith("No data for this window")


async def test_hot_partitions_without_a_lake_or_a_cluster_is_unavailable():
    result = await answer("hot-partitions", Context())
    assert result.outcome == "unavailable"
    assert "No metric lake is configured" in result.reply.verdict


# --------------------------------------------------------------------------- history


async def test_history_per_minute_per_broker(ctx_at):
    reply = (await answer("history URP --since 30m", ctx_at(hhmm(10, 30)))).reply
    assert reply.title == "History of UnderReplicatedPartitions"
    lines = reply.sections[0].lines
    assert len(lines) == 30  # newest first
    assert lines[-1] == "10:00  b1 0  b2 0  b3 0  b4 0"
    assert lines[19] == "10:10  b1 5  b2 -  b3 5  b4 5"  # broker 2 sent nothing: it was gone
    assert lines[0].startswith("10:29  ")
    assert reply.evidence[0].source == "lake: metric_history"


async def test_history_of_a_counter_counts_events(ctx_at):
    reply = (await answer("history isrshrinkspersec --since 30m --broker 1", ctx_at(hhmm(10, 30)))).reply
    lines = reply.sections[0].lines
    assert lines[19] == "10:10  b1 +5" and lines[18] == "10:11  b1 +0"
    assert "(broker 1)" in reply.title
    # the chart in the unit it is labelled with, the numbers the lines show
    [line] = reply.series
    assert line.unit == "events per minute"
    points = dict(line.points)
    assert points[hhmm(10, 10).isoformat()] == pytest.approx(5) and points[hhmm(10, 11).isoformat()] == 0


async def test_history_of_one_partition(ctx_at):
    reply = (
        await answer("history LogEndOffset --topic topic-001 --partition 2 --since 10m", ctx_at(hhmm(10, 30)))
    ).reply
    assert len(reply.sections[0].lines) == 10
    assert reply.sections[0].lines[-1].startswith("10:20  b")
    assert reply.sections[0].lines[0].startswith("10:29  b")


async def test_history_long_window_uses_wider_buckets(ctx_at):
    reply = (await answer("history URP --since 3h", ctx_at(hhmm(12, 0)))).reply
    assert reply.sections[0].heading == "Per 2 min (UTC), newest first"
    assert len(reply.sections[0].lines) == 60  # the lake holds 10:00-12:00 of the 09:00-12:00 window


@pytest.mark.parametrize(
    "evil",
    [
        "x'; DROP TABLE t; --",
        "UnderReplicatedPartitions' OR '1'='1",
        "`metric`) UNION SELECT * FROM samples --",
        "${jndi:ldap://x}",
    ],
)
async def test_injection_attempts_are_just_unknown_metrics(ctx_at, evil):
    ctx = ctx_at(hhmm(10, 30))
    result = await answer(f'history "{evil}"', ctx)
    assert result.outcome == "answered"
    assert result.reply.verdict.startswith("Unknown metric '")
    assert evil[:30] in result.reply.verdict
    assert result.reply.evidence[0].value.startswith("no data for this window")
    # and the lake is untouched
    again = await answer("history URP --since 30m", ctx)
    assert len(again.reply.sections[0].lines) == 30


async def test_topic_injection_is_refused_by_the_router(ctx_at):
    result = await answer('history URP --topic "t\' OR 1=1 --"', ctx_at(hhmm(10, 30)))
    assert result.outcome == "bad_input"


async def test_history_no_data_for_a_known_metric(ctx_at):
    reply = (await answer("history UncleanLeaderElectionsPerSec", ctx_at(hhmm(10, 30)))).reply
    assert reply.verdict.startswith("No data for this window: no UncleanLeaderElectionsPerSec samples")


# --------------------------------------------------------------------------- lag


class LagGateway:
    name = "syn"

    async def consumer_group_lag(self, group, read_committed=False):
        return GroupLag(group, "STABLE", [PartitionLag("topic-003", p, 1000, 1500, 500) for p in range(5)])


class LagPool:
    async def get(self, name=None):
        return LagGateway()


async def test_lag_adds_the_burrow_window_verdict(ctx_at):
    result = await answer("lag topic-003-consumers --since 10m", ctx_at(hhmm(11, 40), live=LagPool()))
    reply = result.reply
    assert result.outcome == "answered"
    verdict = ev(reply, "lake: group_lag_status")[0]
    assert verdict.value.startswith("ERR (worst partition: REWIND); 5 of 5 partition(s) not OK")
    assert reply.severity == "critical"
    assert reply.window == "last 10 min: 2024-05-01 11:30 to 11:40 UTC"
    per = next(s for s in reply.sections if s.heading.startswith("Window verdict per partition"))
    assert all(": REWIND (" in line for line in per.lines)
    assert not any("needs the metric lake" in n for n in reply.notes)
    # the chart: the group's total lag per minute over the window
    (trend,) = reply.series
    assert trend.title == "Lag of topic-003-consumers" and trend.unit == "records" and trend.label == "total lag"
    assert len(trend.points) >= 9 and all(v >= 0 for _t, v in trend.points)
    assert "2024-05-01T11:30" <= trend.points[0][0] < trend.points[-1][0] <= "2024-05-01T11:40"


async def test_lag_healthy_group_is_ok_in_the_window(ctx_at):
    reply = (await answer("lag topic-000-consumers", ctx_at(hhmm(11, 40), live=LagPool()))).reply
    assert ev(reply, "lake: group_lag_status")[0].value.startswith("OK")


async def test_lag_with_the_lake_down_keeps_the_live_part(ctx_at):
    reply = (await answer("lag topic-000-consumers", ctx_at(hhmm(11, 40), live=LagPool(), lake=DownLake()))).reply
    assert reply.evidence[0].source.startswith("live:")
    assert any(n.startswith("Metric lake: The metric lake is unavailable") for n in reply.notes)


async def test_lag_unknown_group_in_the_lake_says_no_data(ctx_at):
    reply = (await answer("lag nobody", ctx_at(hhmm(11, 40), live=LagPool()))).reply
    assert any("no data for this window" in e.value for e in ev(reply, "lake:"))


async def test_lag_on_a_lake_with_nothing_ingested_says_not_enough_data(spark, tmp_path):
    """The window verdict is read in process: a lake with no table yet is young, not broken."""
    from lake.service import LakeService

    lake = LakeService(str(tmp_path / "never-written"), spark=spark, warm=False).start()
    ctx = Context(live=LagPool(), lake=lake, clock=lambda: hhmm(11, 40).timestamp())
    reply = (await answer("lag topic-000-consumers", ctx)).reply
    assert [e.value for e in ev(reply, "lake:")] == ["not enough data yet (0 min collected)"]
    assert not [n for n in reply.notes if n.startswith("Metric lake:")]


def test_since_parsing():
    from diagnosis.lake_evidence import describe_since, parse_since

    assert parse_since("15m") == dt.timedelta(minutes=15)
    assert parse_since("1h30m") == dt.timedelta(minutes=90)
    assert parse_since("2d") == dt.timedelta(days=2)
    assert parse_since("90s") == dt.timedelta(seconds=90)
    assert describe_since(dt.timedelta(minutes=90)) == "1 h 30 min"


async def test_digest_trends_call_a_partition_hot_only_past_the_skew(ctx_at, metadata_log_lake):
    from commands.digest import _lake

    during_hot_key = await _lake(ctx_at(hhmm(10, 30)), "syn", 1)
    assert during_hot_key.section.lines[0].startswith("Hot: topic-001-2 ")
    # how fresh the trends are, read in process from the last hour's files (samples every 30 s)
    assert during_hot_key.section.heading == "Trends, last 1 h (metric lake; lake data to 10:29:30 UTC, 30 s old)"
    quiet = await _lake(Context(lake=metadata_log_lake, clock=clock_at(hhmm(10, 15))), "syn", 1)
    assert [line.split(" ")[:2] for line in quiet.section.lines] == [
        ["Busiest:", "orders-0"],
        ["Busiest:", "orders-1"],
        ["Busiest:", "gone-0"],
    ]
