"""The terminal transport: `kbot ask` (one question) and `kbot console` (interactive).

Answers print as text (short by default, colour on a TTY) or JSON; when the metric lake's part is
slower than the cluster, the live answer prints first and the lake's part after it. Progress is a
spinner on stderr when it is a TTY; Ctrl-C cancels the request in flight, not the console.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from bot.answer_parts import show_in_parts
from bot.app import close_context, make_context
from bot.charts import chart_png
from bot.console_session import ConsoleSession
from bot.render import render_addition, render_json, render_text
from bot.spinner import Spinner
from commands.registry import ROUTER
from framework.context import Context
from framework.dispatch import Answer, complete, run_request
from framework.followup import IncidentMemory, parse_request
from framework.reply import Reply
from gate.files import private_dir, private_file
from kbot_settings import KbotSettings


def _emit(result: Answer, as_json: bool, compact_json: bool = False, color: bool = False) -> None:
    if as_json or (result.request is not None and result.request.json):
        # The console prints one JSON document per line, so a script can read it line by line.
        print(render_json(result.reply, indent=None if compact_json else 2))
    else:
        full = result.request is not None and result.request.full
        print(render_text(result.reply, full=full, color=color and sys.stdout.isatty()), end="")


SPINNER = Spinner()


def _clip(text: str, n: int = 40) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


async def _progress(message: str) -> None:
    await SPINNER.progress(message)


def split_png(words: list[str], png: str | None) -> tuple[list[str], str | None]:
    """`--png FILE` written after the question belongs to kbot, not to the question."""
    words = list(words)
    for i, word in enumerate(words):
        if word == "--png" and i + 1 < len(words):
            return words[:i] + words[i + 2 :], words[i + 1]
        if word.startswith("--png="):
            return words[:i] + words[i + 1 :], word.split("=", 1)[1]
    return words, png


def _write_png(result: Answer, path: str) -> None:
    """`--png FILE`: the answer's trend as a chart; a short line on stderr when it has none."""
    if not result.reply.series:
        print(f"kbot: this answer has no time series to chart; {path} not written", file=sys.stderr)
        return

    try:
        Path(path).write_bytes(chart_png(result.reply.series, result.reply.title))
    except OSError as exc:
        print(f"kbot: cannot write {path}: {exc.strerror}", file=sys.stderr)
        return
    print(f"chart written to {path}", file=sys.stderr)


async def _answer(
    text: str,
    ctx: Context,
    memory: IncidentMemory | None,
    cluster: str | None,
    session: ConsoleSession | None = None,
) -> Answer:
    user = ctx.gate.acting_user if ctx.gate is not None else None  # the OS account, never $USER
    parsed = parse_request(text, memory, user=user, channel=None, router=ROUTER, cluster=cluster)
    if isinstance(parsed, Answer):
        return parsed
    if session is not None and memory is not None and parsed.spec.name == "timeline" and not parsed.args.get("thread"):
        if parsed.options.get("help"):
            return await run_request(parsed, ctx, early=True)
        reply = await session.timeline(parsed, ctx, memory)  # `timeline` alone: this session's incident
        return Answer(reply, "bad_input" if reply.severity == "error" else "answered", parsed)
    return await run_request(parsed, ctx, early=True)


def _shower(color: bool) -> Callable[[Answer], Awaitable[None]]:
    async def _show(result: Answer) -> None:
        _emit(result, as_json=False, color=color)
        sys.stdout.flush()

    return _show


async def _add(addition: Reply) -> None:
    print(render_addition(addition), end="")


async def _complete_with_spinner(result: Answer) -> Answer:
    await SPINNER.progress("adding the metric lake's evidence")
    try:
        return await complete(result)
    finally:
        SPINNER.stop()


async def _answer_and_emit(
    text: str,
    ctx: Context,
    as_json: bool,
    *,
    compact_json: bool = False,
    memory: IncidentMemory | None = None,
    cluster: str | None = None,
    session: ConsoleSession | None = None,
) -> Answer:
    """Print the answer; when the lake's evidence is still coming, print the live answer first and
    the lake's part when it is in (JSON waits: one document per answer). ``memory``: the console
    session's incident (commands/followup.py): a question starts from what earlier ones named.
    ``cluster``: the cluster `--cluster` chose (None: the default one), unless the text names one."""
    # every question shows what it waits on from its start; commands with several steps name each
    # one as they go (the terminal only: in Slack each message is an edit of the working message)
    await SPINNER.progress(f"answering '{_clip(text)}'")
    color = ctx is not None and ctx.settings.color  # NO_COLOR, a setting like any other
    asked_at = time.time()
    try:
        result = await _answer(text, ctx, memory, cluster, session)
    finally:
        SPINNER.stop()
    if as_json or (result.request is not None and result.request.json):
        final = await complete(result)  # JSON waits for the lake: one document per answer
        _emit(final, as_json, compact_json, color)
    else:
        final = await show_in_parts(result, _shower(color), _add, complete_with=_complete_with_spinner)
    if memory is not None and final.request is not None:
        memory.remember(final.request, final.reply)
    if session is not None:
        session.note(text, final, asked_at)
        if final.request is not None and final.request.spec.name == "timeline" and final.reply.series:
            _write_png(final, str(session.chart_path()))  # the console's "attachment": the chart as a file
    return final


async def ask(
    text: str,
    as_json: bool,
    png: str | None,
    settings: KbotSettings,
    *,
    cluster: str | None = None,
) -> int:
    ctx = make_context(settings, lake=False, progress=_progress)
    try:
        result = await _answer_and_emit(text, ctx, as_json, cluster=cluster)
    finally:
        await close_context(ctx)
    if png:
        _write_png(result, png)
    return result.exit_code


class StartupStatus(Protocol):
    """What `kbot run` is still bringing up behind the prompt (cli/startup.py)."""

    def line(self) -> str: ...
    def lines(self) -> list[str]: ...
    def starting(self) -> list[str]: ...
    def drain(self) -> list[str]: ...
    def queue_messages(self) -> None: ...
    def prepare(self, ctx: Context) -> None: ...


def _console_lines(prompt: str, home: Path, startup: StartupStatus | None = None):
    """Lines typed by the user: prompt_toolkit with history on a terminal (and `kbot run`'s start-up
    as its status line, its news printed between answers, not over the prompt), plain stdin otherwise."""
    if sys.stdin.isatty():
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory

        # the history holds every command typed, tokens of confirmations included: private
        history = private_file(private_dir(home) / "console_history")
        toolbar = None
        if startup is not None:
            startup.queue_messages()
            toolbar = startup.line
        session = PromptSession(history=FileHistory(str(history)), bottom_toolbar=toolbar, refresh_interval=1.0)
        while True:
            for news in startup.drain() if startup is not None else ():
                print(f"kbot: {news}", file=sys.stderr)
            try:
                yield session.prompt(prompt)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
    else:
        for line in sys.stdin:
            yield line.rstrip("\n")


def _run_cancellable(loop: asyncio.AbstractEventLoop, coro):
    """Ctrl-C cancels the request in flight, not the console (and prints no asyncio traceback).
    The coroutine's result; None when cancelled."""
    task = loop.create_task(coro)
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        try:
            loop.run_until_complete(task)
        except (asyncio.CancelledError, KeyboardInterrupt):
            pass
        print("\nCancelled.", file=sys.stderr)
        return None


def console(
    as_json: bool, settings: KbotSettings, *, cluster: str | None = None, startup: StartupStatus | None = None
) -> int:
    # Spark's JVM (the lake, started in the background) writes its start-up warnings to a log in
    # the state folder (KBOT_SPARK_LOG) instead of over the prompt.
    ctx = make_context(settings, progress=_progress, spark_log=settings.spark_log)
    if sys.stdin.isatty():
        print(
            "Kafka incident bot. Ask as in Slack, e.g. 'why URP' or 'runbook hanging transaction'. 'help' lists commands; 'exit' quits."
        )
    loop = asyncio.new_event_loop()
    memory = IncidentMemory(scope="this session")  # one incident per console session
    session = ConsoleSession(ctx.gate.acting_user if ctx.gate is not None else None, home=settings.home)
    try:
        for line in _console_lines("kafka> ", settings.home, startup):
            text = line.strip()
            if not text:
                continue
            if text.lower() in ("exit", "quit", r"\q"):
                break
            if startup is not None:
                startup.prepare(ctx)  # e.g. the lake, once its Spark server is up
            result = _run_cancellable(
                loop,
                _answer_and_emit(
                    text, ctx, as_json, compact_json=True, memory=memory, cluster=cluster, session=session
                ),
            )
            still = startup.starting() if startup is not None else []
            if result is not None and result.outcome == "unavailable" and still:
                # "cannot reach the cluster" while `kbot run` is still bringing it up is not an outage
                print(
                    f"start-up: still starting: {', '.join(still)}; ask again once it is up (`status` shows the start-up)",
                    file=sys.stderr if as_json else sys.stdout,
                )
            if startup is not None and text.lower().removeprefix("/kafka").split()[:1] == ["status"]:
                # what `kbot run` has up and what is still starting, after the cluster's own status
                print(
                    "\n".join(f"start-up: {ln}" for ln in startup.lines()), file=sys.stderr if as_json else sys.stdout
                )
            sys.stdout.flush()
    finally:
        loop.run_until_complete(close_context(ctx))
        loop.close()
    return 0
