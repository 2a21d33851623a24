"""A terminal's logging (bot/logs.py): tracebacks go to the state folder's kbot.log, the screen
gets one short line that names it (issue 28: no traceback ever reaches the console)."""

from __future__ import annotations

import logging
import stat

import pytest

from bot.logs import log_to_file


@pytest.fixture
def terminal_logging(tmp_path):
    root = logging.getLogger()
    level = root.level
    path = log_to_file("INFO", tmp_path / "state", secrets=("s3cr3t-pass",))
    yield path
    for handler in [h for h in root.handlers if getattr(h, "_kbot_terminal", False)]:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(level)


def test_a_traceback_goes_to_the_file_and_one_line_to_the_screen(terminal_logging, capsys):
    log = logging.getLogger("bot.some_module")
    try:
        {}["missing"]
    except KeyError:
        log.error("request r1 failed: password s3cr3t-pass rejected", exc_info=True)
    log.info("collector started")
    err = capsys.readouterr().err
    assert err == f"kbot: error: request r1 failed: password *** rejected (details in {terminal_logging})\n"
    text = terminal_logging.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'missing'" in text
    assert "collector started" in text and "s3cr3t-pass" not in text
    assert stat.S_IMODE(terminal_logging.stat().st_mode) == 0o600


def test_calling_it_twice_keeps_one_pair_of_handlers(terminal_logging, tmp_path, capsys):
    log_to_file("INFO", tmp_path / "state")
    logging.getLogger("bot.x").warning("disk   almost\nfull")
    assert capsys.readouterr().err == "kbot: warning: disk almost full\n"
