"""Scheduled posts (KBOT_DIGEST_SCHEDULES, parsed by bot/scheduler.py): a read-only command's answer
posted to a channel when its schedule comes due, about the channel's cluster."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from bot.cluster_routing import route
from bot.render_slack import render_blocks
from bot.scheduler import Schedule, Scheduler, parse_schedules
from commands.registry import parse_request
from framework.dispatch import Answer, run_request
from framework.followup import parse_request as parse_followup
from framework.reply import Reply

if TYPE_CHECKING:
    from bot.slack_bot import KafkaBot

log = logging.getLogger(__name__)


class Digests:
    def __init__(self, bot: KafkaBot, spec: str):
        self.bot = bot
        self.schedules = parse_schedules(spec)
        self._check()

    def _check(self) -> None:
        """A schedule of a command that changes the cluster stops the start; one of an unknown
        command is a warning (its post says what is wrong)."""
        for s in self.schedules:
            req = parse_request(s.text, router=self.bot.router)
            if isinstance(req, Answer):
                log.warning(
                    "schedule %r: %s (it will post that error until the command exists)", s.source, req.reply.verdict
                )
                continue
            if req.spec.mutating:
                raise ValueError(
                    f"schedule {s.source!r}: '{req.spec.name}' changes the cluster; schedules run read-only commands only"
                )

    def scheduler(self) -> Scheduler:
        return Scheduler(self.schedules, self.post, clock=self.bot.clock)

    async def post(self, schedule: Schedule, due) -> None:
        """A schedule's command in its channel: about the channel's cluster; with several clusters
        and no mapping, one post per cluster (a digest of each)."""
        routing = self.bot.routing
        text = schedule.text
        clusters: list[str | None] = [None]
        if routing is not None:
            routed = route(schedule.text, schedule.channel, routing)
            if isinstance(routed, Reply):
                clusters = list(routing.clusters)
            else:
                text, clusters = routed.text, [routed.cluster]
        for cluster in clusters:
            await self._post(schedule, due, text, cluster)

    async def _post(self, schedule: Schedule, due, text: str, cluster: str | None) -> None:
        bot = self.bot
        started = time.monotonic()
        request = parse_followup(
            text, None, user="scheduler", channel=schedule.channel, router=bot.router, cluster=cluster
        )
        result = request if isinstance(request, Answer) else await run_request(request, bot.ctx)
        pages = render_blocks(result.reply, full=True)  # a digest is read at leisure: all of it
        first = await bot.delivery.post(schedule.channel, **pages[0])
        for page in pages[1:]:
            await bot.delivery.post(first.get("channel") or schedule.channel, thread_ts=first["ts"], **page)
        await bot.audit.write(
            "scheduled",
            transport="slack",
            schedule=schedule.source,
            channel=schedule.channel,
            text=text,
            cluster=cluster,
            due=due.isoformat(),
            outcome=result.outcome,
            latency_ms=round((time.monotonic() - started) * 1000, 1),
        )
