"""Test doubles for the *other* side of the gate contract: mutating commands whose ActionSpec
records every call. The gate, the Slack app and the audit log they drive are the real ones."""

from __future__ import annotations

from dataclasses import dataclass, field

from commands.registry import COMMANDS
from framework.actions import ActionPlan, ActionResult, ActionSpec, Precondition
from framework.reply import Reply, Section
from framework.router import Router
from framework.spec import Command, CommandSpec, Param


@dataclass
class FakeAction:
    kind: str = "fake-bump"
    high_risk: bool = False
    ready: bool = True  # the preview's preconditions
    recheck_ok: bool = True  # the re-check right before execution
    reconcile_answer: str = "done"
    execute_error: Exception | None = None
    execute_ok: bool = True  # False: the change was made and failed (an ActionResult that says so)
    calls: list[tuple[str, dict]] = field(default_factory=list)

    def count(self, name: str) -> int:
        return sum(1 for c, _ in self.calls if c == name)

    async def plan(self, request, ctx) -> ActionPlan:
        self.calls.append(("plan", dict(request.args)))
        topic = request.args["topic"]
        return ActionPlan(
            kind=self.kind,
            cluster="test-cluster",
            args={"topic": topic, "retention.ms": 3600000},
            summary=f"Set retention.ms on {topic} to 3600000.",
            changes=[f"{topic}: retention.ms 604800000 -> 3600000"],
            validation="validate_only: ok",
            preconditions=[Precondition("topic exists", self.ready, f"{topic}: 3 partitions")],
            high_risk=self.high_risk,
        )

    async def recheck(self, plan, ctx):
        self.calls.append(("recheck", plan.args))
        return [
            Precondition("topic exists", self.recheck_ok, "still there" if self.recheck_ok else "topic was deleted")
        ]

    async def execute(self, plan, ctx) -> ActionResult:
        self.calls.append(("execute", plan.args))
        if self.execute_error is not None:
            raise self.execute_error
        return ActionResult(
            self.execute_ok,
            f"retention.ms on {plan.args['topic']} is now 3600000"
            if self.execute_ok
            else f"The change failed: retention.ms on {plan.args['topic']} is still 604800000",
            before={"retention.ms": "604800000"},
            after={"retention.ms": "3600000"},
        )

    async def reconcile(self, plan, ctx):
        self.calls.append(("reconcile", plan.args))
        return self.reconcile_answer

    def command(self) -> Command:
        spec = CommandSpec(
            words=(self.kind,),
            summary=f"test action {self.kind}",
            params=(Param("topic", "a topic", kind="topic"),),
            mutating=True,
        )
        return Command(spec, action=ActionSpec(self.plan, self.recheck, self.execute, self.reconcile))


@dataclass
class FakeDigest:
    runs: int = 0

    async def run(self, request, ctx) -> Reply:
        self.runs += 1
        return Reply(
            title="Kafka daily digest",
            severity="ok",
            verdict="3 brokers, 0 URP in the last 24 h.",
            sections=[Section("Top lag", ["orders-consumer: 12"])],
        )

    def command(self) -> Command:
        return Command(CommandSpec(words=("digest",), summary="test digest"), self.run)


async def _progressing(request, ctx) -> Reply:
    for step in ("reading metadata for 5,000 partitions", "reading topic configs", "ranking causes"):
        await ctx.progress(step)
    return Reply(title="Slow check", severity="ok", verdict="done after three steps")


PROGRESSING = Command(CommandSpec(words=("slowcheck",), summary="test command that reports progress"), _progressing)


def router_with(*commands: Command) -> Router:
    """The real registry plus test commands (a test command replaces a real one of the same name)."""
    names = {c.spec.words for c in commands}
    return Router([c for c in COMMANDS if c.spec.words not in names] + list(commands))
