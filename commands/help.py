"""help [command]: what the bot can do, generated from the command registry."""

from __future__ import annotations

from framework.context import Context
from framework.help_text import command_help
from framework.reply import Reply, Section
from framework.router import BadInput
from framework.spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("help",),
    summary="List the commands, or show one command's usage, parameters and examples.",
    params=(Param("command", "a command name, e.g. 'why' or 'throttle set'", kind="text", required=False, rest=True),),
    examples=("help", "help why"),
)


def overview(commands: list[Command]) -> Reply:
    read = [c.spec for c in commands if not c.spec.mutating]
    write = [c.spec for c in commands if c.spec.mutating]
    sections = [Section(heading="Ask", lines=[f"{s.usage()}  —  {s.summary}" for s in read])]
    if write:
        sections.append(
            Section(
                heading="Act (preview and confirmation first)", lines=[f"{s.usage()}  —  {s.summary}" for s in write]
            )
        )
    return Reply(
        title="Kafka incident bot",
        severity="info",
        verdict="Ask about a symptom and get the likely cause, the Kafka source line behind it and the mitigation.",
        sections=sections,
        followups=["/kafka help <command> for one command", "/kafka why URP", "/kafka runbook hanging transaction"],
    )


async def run(request: CommandRequest, ctx: Context) -> Reply:
    router = request.router  # the router that parsed this request: its commands are the ones to list
    if router is None:
        raise BadInput("help needs the command router that parsed it.", ["help"])
    name = str(request.args.get("command") or "").strip()
    if not name:
        return overview(router.commands)
    command = router.find(name)
    if command is None:
        raise BadInput(f"No command called '{name}'.", router.closest(name) or ["help"])
    return command_help(command.spec)


COMMAND = Command(SPEC, run)
