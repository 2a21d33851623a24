"""help [command]: what the bot can do, generated from the command registry."""

from __future__ import annotations

from .context import Context
from .reply import Reply, Section
from .spec import Command, CommandRequest, CommandSpec, Param

SPEC = CommandSpec(
    words=("help",),
    summary="List the commands, or show one command's usage, parameters and examples.",
    params=(Param("command", "a command name, e.g. 'why' or 'throttle set'", kind="text", required=False, rest=True),),
    examples=("help", "help why"),
)


def command_help(spec: CommandSpec) -> Reply:
    lines = [f"Usage: /kafka {spec.usage()}"]
    lines += [f"  <{p.name}>  {p.help}" for p in spec.params]
    lines += [f"  --{o.name}  {o.help}" for o in spec.options]
    lines += ["  --json  answer as JSON", "  --cluster <name>  ask a configured cluster other than the default"]
    if spec.mutating:
        lines.append("Changes the cluster: you get a preview and a Confirm button first.")
    sections = [Section(heading=spec.name, lines=lines)]
    if spec.details:
        sections.append(Section(heading="Details", lines=[spec.details]))
    if spec.examples:
        sections.append(Section(heading="Examples", lines=[f"/kafka {e}" for e in spec.examples]))
    return Reply(title=f"/kafka {spec.name}", severity="info", verdict=spec.summary, sections=sections)


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
    from .router import BadInput

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
