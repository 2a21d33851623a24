"""One command's help, generated from its spec (what `help <command>` and `<command> --help` show)."""

from __future__ import annotations

from framework.reply import Reply, Section
from framework.spec import CommandSpec


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
