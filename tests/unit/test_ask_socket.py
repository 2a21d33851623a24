"""One-shot asks through the running bot's socket (bot/ask_socket.py, bot/ask_server.py): a real
server on a real Unix socket, clients as separate processes where the process boundary matters."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from bot.ask_server import AskServer
from bot.ask_socket import NotServed, ask, socket_path
from kbot_settings import load

QUESTION = "runbook PRODUCER_FENCED"  # answered from the runbook: no cluster needed


def _env(home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBOT_", "SLACK_"))}
    env.update(KBOT_HOME=str(home), KBOT_STATE_DIR=str(home), NO_COLOR="1", KBOT_LOG_LEVEL="INFO")
    return env


@pytest.fixture
def server(tmp_path):
    settings = load({"KBOT_HOME": str(tmp_path), "KBOT_STATE_DIR": str(tmp_path), "NO_COLOR": "1"})
    srv = AskServer(settings).start()
    assert srv.serving
    yield srv
    srv.stop()


def test_the_socket_is_owner_only_and_removed_on_stop(tmp_path):
    settings = load({"KBOT_HOME": str(tmp_path), "KBOT_STATE_DIR": str(tmp_path)})
    srv = AskServer(settings).start()
    try:
        st = os.stat(srv.path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o700
    finally:
        srv.stop()
    assert not srv.path.exists()


def test_a_one_shot_ask_gets_the_same_json_as_in_process(server, tmp_path):
    env = _env(tmp_path)
    cmd = [sys.executable, "-m", "cli.entry", "ask", "--json", *QUESTION.split()]
    through = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert through.returncode == 0 and not through.stderr, through.stderr
    server.stop()  # no bot: the same question in the client's own process
    alone = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert alone.returncode == 0, alone.stderr
    assert through.stdout == alone.stdout and json.loads(through.stdout)["title"]


def test_text_answers_come_through_too(server):
    pieces: list[str] = []
    code = ask(server.path, QUESTION, as_json=False, tty=False, write=pieces.append)
    assert code == 0 and "PRODUCER_FENCED" in "".join(pieces).upper()


def test_the_client_path_imports_only_what_it_needs():
    """`kbot ask`'s first step loads no command, no diagnosis, no Kafka client, no Spark."""
    probe = (
        "import sys, cli.entry\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('commands', 'diagnosis', 'framework', 'lake',"
        " 'live', 'confluent_kafka', 'pyspark', 'cli.main') or m in ('bot.app', 'bot.console', 'cli.main')]\n"
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_stale_socket_falls_back_to_in_process_with_a_note(tmp_path):
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(tmp_path)))  # a bot that died: the file stays, nobody listens
    stale.close()
    os.chmod(tmp_path, 0o700)
    with pytest.raises(NotServed, match="does not answer"):
        ask(socket_path(tmp_path), QUESTION, as_json=True, tty=False)
    cmd = [sys.executable, "-m", "cli.entry", "ask", "--json", *QUESTION.split()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert done.returncode == 0 and json.loads(done.stdout)["title"]
    assert "answering in this process" in done.stderr, done.stderr


def test_a_bot_too_busy_to_take_the_question_is_not_waited_for(tmp_path):
    os.chmod(tmp_path, 0o700)
    path = socket_path(tmp_path)
    busy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    busy.bind(str(path))
    busy.listen(1)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: held.append(busy.accept()[0]), daemon=True).start()
    try:
        with pytest.raises(NotServed, match="did not take the question within 0.5s"):
            ask(path, QUESTION, as_json=True, tty=False, accept_s=0.5)
    finally:
        busy.close()
        for conn in held:
            conn.close()


def test_the_client_refuses_a_socket_in_a_folder_others_can_enter(server, tmp_path):
    os.chmod(tmp_path, 0o755)
    try:
        with pytest.raises(NotServed, match="not this user's socket"):
            ask(server.path, QUESTION, as_json=True, tty=False)
    finally:
        os.chmod(tmp_path, 0o700)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_the_server_serves_only_its_own_user():
    """SO_PEERCRED: even with the folder and the socket opened up, another user gets no answer."""
    home = Path(tempfile.mkdtemp(prefix="kbot-ask-", dir="/tmp"))  # its parents let others pass
    server = AskServer(load({"KBOT_HOME": str(home), "KBOT_STATE_DIR": str(home)})).start()
    try:
        os.chmod(home, 0o711)
        os.chmod(server.path, 0o666)
        client = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.settimeout(20); s.connect(sys.argv[1])\n"
            # the server may close before the question is even sent (a broken pipe): no answer either way
            "try:\n"
            '    s.sendall(b\'{"v": 1, "text": "runbook PRODUCER_FENCED", "json": true, "tty": false}\\n\')\n'
            "    data = s.makefile().read()\n"
            "except (ConnectionResetError, BrokenPipeError):\n    data = ''\n"
            "print(repr(data))\n"
        )
        done = subprocess.run(
            ["/usr/bin/python3", "-c", client, str(server.path)],
            capture_output=True,
            text=True,
            timeout=60,
            user="nobody",
            cwd="/",
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "''"  # closed without a word: not even "accepted"
        os.chmod(home, 0o700)
        mine = ask(server.path, QUESTION, as_json=True, tty=False, write=lambda _piece: None)
        assert mine == 0  # its own user still gets answers
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
