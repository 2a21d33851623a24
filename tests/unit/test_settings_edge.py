"""Settings are loaded once per process, at its edge, and passed down typed (issue 25): no module
outside kbot_settings reads the process environment, and building the bot's context for a
request loads nothing again."""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import pytest

import kbot_settings
from tests.packages import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
#: every package that ships (pyproject.toml), kbot_settings itself apart
SHIPPED = tuple(p for p in PACKAGES if p not in ("kbot_settings", "tools"))

#: The only uses of os.environ allowed outside kbot_settings: pyspark's and gRPC's own process
#: variables, which those libraries read from the process environment and nowhere else. Each is
#: (file, what is done, the variable); none is one of ours (KBOT_*), none reads a setting.
ALLOWED = {
    # gRPC reads it at import, before any setting could be handed to it (lake/spark.py explains why)
    ("lake/spark.py", "setdefault", "GRPC_ENABLE_FORK_SUPPORT"),
    # pyspark's Python workers: this interpreter, not the first python3 on PATH
    ("lake/spark.py", "setdefault", "PYSPARK_PYTHON"),
    # pyspark's switch to Spark Connect mode, which it sets itself and never clears
    ("lake/spark.py", "in", "SPARK_CONNECT_MODE_ENABLED"),
    ("lake/spark.py", "pop", "SPARK_CONNECT_MODE_ENABLED"),
    ("lake/spark.py", "pop", "SPARK_LOCAL_REMOTE"),
}


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` (a bare ``environ`` needs ``from os import environ``, which is caught itself;
    ``settings.environ`` is the snapshot the settings were loaded from, not the process's)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr in ("environ", "environb")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _uses(tree: ast.AST) -> list[tuple[int, str, str]]:
    """Every use of the process environment: (line, what, variable or '?')."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"):
                    out.append((node.lineno, f"from os import {alias.name}", "?"))
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("getenv", "getenvb", "putenv", "unsetenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            out.append((node.lineno, node.attr, "?"))
        if not _is_environ(node) or isinstance(parents.get(node), ast.ImportFrom):
            continue
        parent = parents.get(node)
        what, var = "read", "?"
        if isinstance(parent, ast.Attribute) and isinstance(call := parents.get(parent), ast.Call):
            what = parent.attr
            if call.args and isinstance(call.args[0], ast.Constant):
                var = str(call.args[0].value)
        elif isinstance(parent, ast.Compare) and isinstance(parent.left, ast.Constant):
            what, var = "in", str(parent.left.value)
        elif isinstance(parent, ast.Subscript) and isinstance(parent.slice, ast.Constant):
            what, var = "[]", str(parent.slice.value)
        out.append((node.lineno, what, var))
    return out


def environment_uses(root: Path = ROOT) -> dict[str, list[tuple[int, str, str]]]:
    found: dict[str, list[tuple[int, str, str]]] = {}
    for pkg in SHIPPED:
        for f in sorted((root / pkg).rglob("*.py")):
            rel = str(f.relative_to(root))
            uses = [u for u in _uses(ast.parse(f.read_text(), rel)) if (rel, u[1], u[2]) not in ALLOWED]
            if uses:
                found[rel] = uses
    return found


def test_no_module_outside_kbot_settings_reads_the_environment():
    found = environment_uses()
    assert not found, (
        "the process environment is read outside kbot_settings; take the settings the process loaded "
        f"(kbot_settings.load at its edge) instead: {found}"
    )


def test_the_allowed_uses_are_still_there_and_none_is_ours():
    """The allow-list names what lake/spark.py does; an entry it no longer needs goes."""
    spark = ROOT / "lake" / "spark.py"
    done = {("lake/spark.py", what, var) for _line, what, var in _uses(ast.parse(spark.read_text()))}
    assert ALLOWED <= done, f"no longer done, drop from ALLOWED: {ALLOWED - done}"
    assert not any(var.startswith(("KBOT_", "SLACK_")) for _f, _w, var in ALLOWED)


@pytest.mark.parametrize(
    "line",
    [
        'import os\nx = os.environ.get("KBOT_PORT")\n',
        'import os\nx = os.getenv("KBOT_PORT")\n',
        'from os import environ\nx = environ["KBOT_PORT"]\n',
        'import os\nx = "KBOT_LAKE" in os.environ\n',
        "import os\nx = dict(os.environ)\n",
        'import os\nos.environ.setdefault("KBOT_SPARK_LOG", "x")\n',
    ],
)
def test_the_scan_sees_each_way_of_reading_it(line):
    assert _uses(ast.parse(line)), line


@pytest.fixture
def load_calls(monkeypatch):
    """Count kbot_settings.load - also where a module imported it by name - and every validation
    of a settings object (load, updated, cache_dir all go through kbot_settings._validated)."""
    calls = {"load": 0, "validated": 0}
    original_load, original_validated = kbot_settings.load, kbot_settings._validated

    def load(env=None):
        calls["load"] += 1
        return original_load(env)

    def validated(given):
        calls["validated"] += 1
        return original_validated(given)

    monkeypatch.setattr(kbot_settings, "_validated", validated)
    for module in list(sys.modules.values()):
        for name, value in list(vars(module).items()) if module is not None else []:
            if value is original_load:
                monkeypatch.setattr(module, name, load)
    return calls


def test_a_bot_context_loads_no_settings(tmp_path, load_calls):
    """bot/app.py make_context gets the settings and hands the one object to every component: the
    gateway pool, the gate and its audit log, the Slack view, the lake's choice, the commands."""
    from bot.app import make_context
    from runbook_kb import default_kb

    default_kb()  # the process-wide runbook cache: found once per process, before any request
    settings = kbot_settings.load({"KBOT_HOME": str(tmp_path), "KBOT_BOOTSTRAP": "127.0.0.1:1", "KBOT_LAKE": "0"})
    load_calls.update(load=0, validated=0)
    ctx = make_context(settings, lake=False)
    assert load_calls == {"load": 0, "validated": 0}
    assert ctx.live is not None and ctx.gate is not None and ctx.lake is None
    assert ctx.settings is settings and ctx.live.settings is settings


def test_kbot_ask_loads_the_settings_once(tmp_path, monkeypatch, capsys, load_calls):
    """A whole `kbot ask`, in process: one load, at the command line's edge."""
    import cli.main

    monkeypatch.setenv("KBOT_HOME", str(tmp_path / "kbot"))
    monkeypatch.setenv("KBOT_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.setenv("KBOT_ADMIN_TIMEOUT_S", "1")
    monkeypatch.setenv("KBOT_LAKE", "0")
    monkeypatch.setattr(cli.main, "log_to_file", lambda *a: None)  # no handlers left on the root logger
    monkeypatch.setattr(cli.main, "log_to_screen", lambda *a: None)
    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    try:
        cli.main.main(["ask", "--json", "runbook", "URP"])
    finally:
        kafka_log.setLevel(level)
    assert '"title"' in capsys.readouterr().out
    assert load_calls["load"] == 1, load_calls
