"""One-way imports (issue 12): no import cycle among the project's modules, and no package imports
one above it. Every import counts, at module level or inside a function (a deferred import is
still a dependency); only `if TYPE_CHECKING:` blocks are left out, since they never run."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "kbot_settings",
    "runbook_kb",
    "live",
    "localkafka",
    "spark_queries",
    "lake",
    "window_queries",
    "framework",
    "diagnosis",
    "commands",
    "gate",
    "bot",
    "lab",
    "tools",
)

# What each package may import besides itself. Lower layers know nothing of higher ones: the
# runbook and the gateways are the floor; the command framework (spec, router, reply, context,
# dispatch) sits on them, the diagnosis (evidence and rules) on the framework, the commands on
# both; the confirmation gate (a domain concept: tokens, approvals, the audit trail, the policy)
# sits on the framework beside the diagnosis - the commands reach it only through the Gate
# interface the context hands them - the transports (bot) on all of them, the failure lab on the
# transports. The lake's queries may read the lake's schema (a leaf); the local cluster may
# read the ACL table the bot needs (live/acls.py, a leaf of data) to grant it.
# kbot_settings (the one configuration) is a leaf every package may read; tools/ (test and
# benchmark tooling, not packaged) may use anything, and nothing that ships may import it.
ALLOWED = {
    "kbot_settings": set(),
    "runbook_kb": {"kbot_settings"},
    "live": {"kbot_settings"},
    "localkafka": {"live.acls", "kbot_settings"},
    "spark_queries": {"lake.schema", "kbot_settings"},
    "lake": {"spark_queries", "live", "localkafka", "kbot_settings"},
    # the incident window's questions, answered in process by the lake's embedded reader
    "window_queries": {"lake.embedded", "lake.schema", "kbot_settings"},
    "framework": {"runbook_kb", "live", "kbot_settings"},
    "diagnosis": {"framework", "runbook_kb", "live", "kbot_settings"},
    "commands": {"framework", "diagnosis", "runbook_kb", "live", "kbot_settings"},
    "gate": {"framework", "live", "kbot_settings"},
    "bot": {
        "commands",
        "framework",
        "diagnosis",
        "gate",
        "runbook_kb",
        "live",
        "lake",
        "localkafka",
        "spark_queries",
        "kbot_settings",
    },
    "lab": {
        "bot",
        "gate",
        "commands",
        "framework",
        "diagnosis",
        "runbook_kb",
        "live",
        "lake",
        "localkafka",
        "kbot_settings",
    },
    "tools": set(PACKAGES) - {"tools"},
}
# Named exceptions, each one module wide: the command line registers every tool's subcommands, and
# diagnosis/lake_evidence.py is the diagnosis's one way into the metric lake (LakeService.query with
# the lake's named queries, LakeService.ask_window with the window's questions); no other command
# module may import the lake's code.
ENTRY_POINTS = {"bot.cli": {"lab"}, "diagnosis.lake_evidence": {"lake", "spark_queries", "window_queries"}}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            mods[name] = f
    return mods


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                found.add(module)
                found.update(f"{module}.{a.name}" for a in node.names)
            for field in ("body", "orelse", "handlers", "finalbody"):
                visit(getattr(node, field, []) or [])

    visit(ast.parse(path.read_text()).body)
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in known and m not in parents and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def test_no_import_cycles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_package_imports_one_above_it():
    wrong = []
    for module, deps in _graph().items():
        pkg = module.split(".")[0]
        allowed = ALLOWED[pkg] | ENTRY_POINTS.get(module, set())
        for dep in deps:
            dep_pkg = dep.split(".")[0]
            if dep_pkg != pkg and dep_pkg not in allowed and dep not in allowed:
                wrong.append(f"{module} -> {dep}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_the_walker_sees_deferred_imports(tmp_path):
    """The check must be able to fail: an import inside a function is found."""
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from framework import dispatch\n")
    assert "framework.dispatch" in _imports("runbook_kb.mod", source, {"framework.dispatch", "framework"})


def test_commands_are_one_layer():
    """A command module never imports another command (what two commands share lives in the
    framework or the diagnosis); only the registry, which lists them, imports them all."""
    wrong = []
    for module, deps in _graph().items():
        if not module.startswith("commands.") or module == "commands.registry":
            continue
        own = module.split(".")[:2]  # a command that is a package (commands.triage) may import its own parts
        for dep in deps:
            if dep.startswith("commands.") and dep.split(".")[:2] != own:
                wrong.append(f"{module} -> {dep}")
    assert not wrong, "commands importing commands:\n" + "\n".join(sorted(wrong))
