"""A chart where a trend matters (issue 9): `history URP` on the real lake (PySpark over the
synthetic incident lake) through the real Bolt app over signed HTTP; the answer's thread gets a
real PNG through files_upload_v2 on the Slack stand-in, and the terminal's --png writes the same."""

from __future__ import annotations

import dataclasses
import io
import struct

import pytest_asyncio
from lakekit import clock_at, hhmm
from slack_harness import OPS, Harness  # tests/slack's stand-in and its harness, on pytest's pythonpath
from slack_stand_in import running_stand

from bot.charts import chart_png
from commands.registry import answer


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return width, height


@pytest_asyncio.fixture(loop_scope="function")
async def stand():
    async with running_stand() as s:
        yield s


async def test_history_chart_arrives_in_the_thread_as_a_png(stand, tmp_path, lake_service):
    h = Harness(stand, tmp_path)
    bot = await h.start_bot()
    bot.ctx = dataclasses.replace(bot.ctx, lake=lake_service, clock=clock_at(hhmm(10, 30)))
    try:
        await h.slash("history URP --since 30m", channel=OPS)
        uploads = await stand.wait_for(lambda: stand.uploads(), timeout_s=120)
        await bot.drain(30)
    finally:
        await h.close()
    done = uploads[0]
    assert done.result["ok"], done.result
    answer_thread = next(c for c in stand.called("chat.postMessage") if "Working on" in (c.args.get("text") or ""))
    assert done.args.get("thread_ts") == answer_thread.result["ts"], "the chart goes into the answer's thread"
    sent = [c for c in stand.calls if c.method == "file_upload"]
    assert len(sent) == 1 and sent[0].args["png"]
    width, height = png_size(sent[0].args["content"])
    assert (width, height) == (800, 320)  # one panel, readable at Slack's thumbnail size


async def test_the_history_reply_carries_one_series_per_broker(lake_service):
    from framework.context import Context

    reply = (await answer("history URP --since 30m", Context(lake=lake_service, clock=clock_at(hhmm(10, 30))))).reply
    assert [s.label for s in reply.series] == ["broker 1", "broker 3", "broker 4", "broker 2"][
        : len(reply.series)
    ] or sorted(s.label for s in reply.series) == ["broker 1", "broker 2", "broker 3", "broker 4"]
    first = reply.series[0]
    assert first.unit and first.points[0][0].startswith("2024-05-01T10:00")
    png = chart_png(reply.series, reply.title)
    assert png_size(png) == (800, 320)
    # The image itself: drawn pixels, not an empty canvas.
    from matplotlib import image

    pixels = image.imread(io.BytesIO(png), format="png")
    assert pixels.std() > 0.05


async def test_why_urp_carries_the_urp_trend_with_the_window_marked(lake_service):
    from framework.context import Context

    reply = (await answer("why URP --since 30m", Context(lake=lake_service, clock=clock_at(hhmm(10, 30))))).reply
    assert reply.series, "the URP trend for the chart"
    assert {s.title for s in reply.series} == {"UnderReplicatedPartitions"}
    assert all(s.unit == "partitions" and s.window is not None for s in reply.series)
    flat = next(s for s in reply.series if s.label == "broker 1")
    assert max(v for _t, v in flat.points) == 5.0  # broker 2 lost at 10:10: flat URP 5 on the others
    assert png_size(chart_png(reply.series, "Why URP?")) == (800, 320)
