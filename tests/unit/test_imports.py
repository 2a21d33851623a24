"""One-way imports (issue 12): no import cycle among the project's modules, and no package imports
one above it. Every import counts, at module level or inside a function (a deferred import is
still a dependency); only `if TYPE_CHECKING:` blocks are left out, since they never run.

Imports sit at the module top (issue 25): a function-local project import is allowed only when it
keeps a HEAVY third-party package (Spark, the in-process lake reader's engines, plotting) off an
importer that does not load it already - never to dodge a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[2]

# What each package may import besides itself. Lower layers know nothing of higher ones: the
# runbook and the gateways are the floor; the command framework (spec, router, reply, context,
# dispatch) sits on them, the diagnosis (evidence and rules) on the framework, the commands on
# both; the confirmation gate (a domain concept: tokens, approvals, the audit trail, the policy)
# sits on the framework beside the diagnosis - the commands reach it only through the Gate
# interface the context hands them - the transports (bot) on all of them, the failure lab on the
# transports, and the process edge (cli: the command line, `kbot run`, which cluster a process
# talks to) on everything that ships; nothing imports it. The lake's queries may read the lake's
# schema (a leaf); the local cluster may read the ACL table the bot needs (live/acls.py, a leaf of
# data) to grant it.
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
    "cli": set(PACKAGES) - {"cli", "tools"},
    "tools": set(PACKAGES) - {"tools"},
}
# Named exceptions, each one module (or package) wide: diagnosis/lake_evidence/ is the diagnosis's
# one way into the metric lake (LakeService.query with the lake's named queries, LakeService.ask_window
# with the window's questions); no other command module may import the lake's code.
ENTRY_POINTS = {"diagnosis.lake_evidence": {"lake", "spark_queries", "window_queries"}}
# Deferrals that keep a light path light although nothing HEAVY stands behind them: `kbot`'s entry
# point hands a one-shot ask to the running bot before it imports the whole command line (the
# bot's own modules cost the one-shot process more CPU than the warm bot's answer).
LIGHT_ENTRY = {("cli.entry", "cli.main")}


def _entry_point(module: str) -> set[str]:
    """The exception that covers ``module``: its own, or its package's."""
    return next((deps for name, deps in ENTRY_POINTS.items() if module == name or module.startswith(name + ".")), set())


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
        allowed = ALLOWED[pkg] | _entry_point(module)
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


# Third-party packages heavy enough that a light path (a command's answer, `kbot ask`, the embedded
# lake reader, the command line's --help) must not import them: Spark and its JVM bridge, the
# in-process lake reader's engines, the plotting library.
HEAVY = {"pyspark", "py4j", "duckdb", "deltalake", "pyarrow", "matplotlib"}


def _top_level(name: str, path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """What importing the module runs: (project modules, third-party top-level packages) of its
    module-level imports. Imports in functions, under `if TYPE_CHECKING:` and under
    `if __name__ == "__main__":` do not run on import."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    project: set[str] = set()
    third: set[str] = set()

    def add(module: str, names: list[str]) -> None:
        if module.split(".")[0] in PACKAGES:
            project.update(m for m in [module] + [f"{module}.{n}" for n in names] if m in known)
        elif module:
            third.add(module.split(".")[0])

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" in test or "__name__" in test:
                    visit(node.orelse)
                    continue
            if isinstance(node, ast.Import):
                for a in node.names:
                    add(a.name, [])
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                add(module, [a.name for a in node.names])
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                for field in ("body", "orelse", "handlers", "finalbody"):
                    visit(getattr(node, field, []) or [])
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(ast.parse(path.read_text()).body)
    return project - {name}, third


def _deferred(name: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """The project modules a module imports inside its functions: (line, module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known]
                targets = subs or [module]
            found.extend((node.lineno, t) for t in targets if t.split(".")[0] in PACKAGES)
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def _heavy() -> dict[str, set[str]]:
    """For each project module, the HEAVY packages importing it loads (through module-level
    imports, its own, its packages' and those of every project module they import)."""
    mods = _modules()
    known = set(mods)
    tops = {name: _top_level(name, path, known) for name, path in mods.items()}
    memo: dict[str, set[str]] = {}
    for start in mods:
        seen: set[str] = set()
        todo = [start]
        while todo:
            m = todo.pop()
            if m in seen or m not in tops:
                continue
            seen.add(m)
            parents = [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]
            todo.extend(parents)
            todo.extend(tops[m][0])
        memo[start] = {p for m in seen for p in tops[m][1] if p in HEAVY}
    return memo


def test_deferred_imports_only_save_a_heavy_import():
    """Every project import sits at the module top, where the layers and the cycle check see it,
    unless it is deferred to keep a HEAVY package off the importer's path: an import inside a
    function is allowed only when the module it imports loads a heavy package the importer does
    not load already. A deferral that only dodges a cycle fails here (fix the layering)."""
    mods = _modules()
    heavy = _heavy()
    wrong = []
    for name, path in mods.items():
        for line, target in _deferred(name, path, set(mods)):
            if not heavy.get(target, set()) - heavy[name] and (name, target) not in LIGHT_ENTRY:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not wrong, "function-local project imports that save no heavy import:\n" + "\n".join(sorted(wrong))


def test_the_light_paths_stay_light():
    """The heavy imports the deferrals keep away really stay away: answering a command (the
    registry) and the embedded lake reader never load Spark."""
    heavy = _heavy()
    for module in ("commands.registry", "lake.embedded", "lake.schema", "window_queries", "framework.dispatch"):
        assert not heavy[module] & {"pyspark", "py4j"}, f"{module} loads {sorted(heavy[module])}"


def test_a_deferral_that_saves_nothing_is_caught(tmp_path):
    """The check must be able to fail: a function-local import of a light module is found, and
    nothing heavy stands behind it; one of the lake's Spark queries is heavy."""
    source = tmp_path / "mod.py"
    source.write_text("def f():\n    from kbot_settings import load\n    from lake import queries\n")
    known = set(_modules())
    assert _deferred("runbook_kb.mod", source, known) == [(2, "kbot_settings"), (3, "lake.queries")]
    heavy = _heavy()
    assert not heavy["kbot_settings"] and "pyspark" in heavy["lake.queries"]
