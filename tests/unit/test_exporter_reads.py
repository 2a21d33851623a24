"""One exporter read under one deadline (issue 35), against real HTTP servers on loopback: a node
that alone hangs is given up on soon after the others answered and recorded as no answer; every
node is recorded as an evidence source with its time."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from diagnosis import exporter_reads
from framework.sources import collecting

PAGE = "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent 0.75\n"
NAME = frozenset({"kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"})


async def _server(delay_s: float) -> tuple[web.AppRunner, str]:
    async def page(_request: web.Request) -> web.Response:
        await asyncio.sleep(delay_s)
        return web.Response(text=PAGE)

    app = web.Application()
    app.router.add_get("/metrics", page)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/metrics"


async def test_a_node_that_alone_hangs_does_not_hold_the_others():
    fast1, url1 = await _server(0.0)
    fast2, url2 = await _server(0.0)
    hung, url3 = await _server(60.0)
    try:
        with collecting() as reads:
            started = time.monotonic()
            got = await exporter_reads.read_nodes({101: url1, 102: url2, 103: url3}, NAME)
            took = time.monotonic() - started
    finally:
        for r in (fast1, fast2, hung):
            await r.cleanup()
    assert {s.node for s in got.reading.samples} == {101, 102}
    assert got.reading.silent == {103} and "while every other node answered" in got.reading.failed[103]
    # the lone node gets LONE_SILENT_S (or twice the slowest answer), not the whole deadline
    assert took < exporter_reads.deadline_s() + 1.0 and took < 10.0, took
    states = {r.source: r.state for r in reads}
    assert states["exporter 103"] == "no answer" and states["exporter 101"] in ("read", "slow"), states


async def test_the_deadline_grows_with_the_hosts_load_and_is_capped():
    assert exporter_reads.BASE_TIMEOUT_S <= exporter_reads.deadline_s() <= 10.0
