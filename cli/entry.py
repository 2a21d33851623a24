"""`kbot`'s entry point. A one-shot `kbot ask` is handed to the running bot (`kbot run` / `kbot
serve`, bot/ask_socket.py) before any of the bot's own modules are imported: importing them costs
a one-shot process more CPU than the warm bot needs to answer. Everything else, and an ask no bot
takes, runs cli.main as before."""

from __future__ import annotations

import sys

from bot.ask_socket import NotServed, ask, socket_path
from kbot_settings import SettingsError, load


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["ask"]:
        code = ask_running_bot(args[1:])
        if code is not None:
            return code
    from cli.main import main as full_main

    return full_main(args)


def _plain_question(words: list[str]) -> tuple[str, bool] | None:
    """(the question, --json) of `kbot ask [--json] QUESTION...`; None for anything the running bot
    does not take (--png writes a file here, --cluster and --help are this process's)."""
    as_json = False
    while words and words[0] == "--json":
        as_json, words = True, words[1:]
    if not words or words[0].startswith("-") or any(w == "--png" or w.startswith("--png=") for w in words):
        return None
    return " ".join(words), as_json


def ask_running_bot(words: list[str]) -> int | None:
    """The running bot's answer to `kbot ask WORDS` and its exit code; None when no bot runs here
    (or it did not answer, said on stderr): the caller then answers in its own process."""
    question = _plain_question(words)
    if question is None:
        return None
    text, as_json = question
    try:
        settings = load()
    except SettingsError:
        return None  # cli.main reports the wrong variable in its words
    try:
        return ask(
            socket_path(settings.state_dir),
            text,
            as_json=as_json,
            tty=sys.stdout.isatty(),
            bootstrap=settings.kbot_bootstrap,
        )
    except NotServed as exc:
        print(f"kbot: {exc}; answering in this process", file=sys.stderr)
        return None


if __name__ == "__main__":
    raise SystemExit(main())
