"""The running bot's side of one-shot asks (bot/ask_socket.py has the protocol and the client).

`kbot run` (the console) and `kbot serve` listen on ``<state folder>/ask.sock`` in a thread of
their own, with an event loop and a context of their own (the live gateways are bound to a loop),
and answer each question exactly as a one-shot `kbot ask` in its own process would print it: the
same renderers, the live part first and the lake's part when it is in; JSON as one document.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.answer_parts import show_in_parts
from bot.app import close_context, make_context
from bot.ask_socket import VERSION, socket_path
from bot.render import render_addition, render_json, render_text
from commands.registry import ROUTER
from framework.context import Context
from framework.dispatch import Answer, complete, run_request
from framework.followup import parse_request
from framework.reply import Reply
from gate.files import private_dir
from kbot_settings import KbotSettings

log = logging.getLogger(__name__)

#: how long the exit waits for the start-up task (one audit's Kafka requests) to finish
AT_START_GRACE_S = 15.0

# struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_UCRED = struct.Struct("3i")


def peer_uid(sock: socket.socket) -> int | None:
    """The connecting process's uid, from the kernel (SO_PEERCRED); None where it cannot be read."""
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except (OSError, AttributeError):
        return None
    return uid


class AskServer:
    """Serves one-shot asks on the state folder's socket until stop()."""

    def __init__(
        self,
        settings: KbotSettings,
        prepare: Callable[[Context], None] | None = None,
        at_start: Callable[[Context], Awaitable[None]] | None = None,
    ):
        self.settings = settings
        self.prepare = prepare
        self.at_start = at_start  # run once on the server's loop, with its context (a start-up log line)
        self.path = socket_path(settings.state_dir)
        self.serving = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._ctx: Context | None = None
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._at_start: asyncio.Task[None] | None = None
        self._stopping = threading.Event()  # stop() before the loop ran: it never starts serving

    def start(self, timeout: float = 10.0) -> AskServer:
        """Start serving in a thread; wait up to ``timeout`` s for the socket (0: not at all - the
        console's prompt does not wait for it)."""
        self._thread = threading.Thread(target=self._run, name="kbot-ask-socket", daemon=True)
        self._thread.start()
        if timeout > 0:
            self._ready.wait(timeout)
        return self

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._open())
            self._ready.set()
            if self.serving and not self._stopping.is_set():
                loop.run_forever()
        except Exception:  # noqa: BLE001 - the bot runs on without it: asks answer in their own process
            log.warning("one-shot ask socket %s not served", self.path, exc_info=True)
        finally:
            self._ready.set()
            try:
                loop.run_until_complete(self._close())
            finally:
                loop.close()

    async def _open(self) -> None:
        private_dir(self.path.parent)
        if _someone_listens(self.path):
            log.warning("another bot already serves one-shot asks on %s; this one does not", self.path)
            return
        self.path.unlink(missing_ok=True)  # a stale socket of a bot that died
        self._ctx = make_context(self.settings, spark_log=self.settings.spark_log)
        self._server = await asyncio.start_unix_server(self._handle, path=str(self.path))
        os.chmod(self.path, 0o600)  # the folder is 0700 already: nobody else could reach it meanwhile
        self._inode = self.path.stat().st_ino
        self.serving = True
        log.info("serving one-shot asks on %s", self.path)
        if self.at_start is not None:
            self._at_start = asyncio.get_running_loop().create_task(self.at_start(self._ctx))

    async def _close(self) -> None:
        task = self._at_start
        if task is not None and not task.done():
            # a Kafka request in flight must complete before the context closes and the process
            # exits (librdkafka's callbacks into a finalizing interpreter abort it): a bounded wait
            try:
                await asyncio.wait_for(asyncio.shield(task), AT_START_GRACE_S)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - it is a log line
                task.cancel()
        if self._server is not None:
            self._server.close()
            try:
                # ours only: a later bot may have taken the path over
                if self._inode is not None and self.path.stat().st_ino == self._inode:
                    self.path.unlink()
            except OSError:
                pass
        if self._ctx is not None:
            await close_context(self._ctx)

    def stop(self) -> None:
        self._stopping.set()
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(30)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            if sock is None or peer_uid(sock) != os.getuid():
                log.warning("one-shot ask socket: refused a peer of another user")
                return
            line = await asyncio.wait_for(reader.readline(), 10)
            request = json.loads(line)
            if request.get("v") != VERSION or not isinstance(request.get("text"), str):
                await _send(writer, {"error": "this bot speaks another version of the ask protocol"})
                return
            wanted = request.get("bootstrap")
            if wanted and self._ctx is not None and wanted != self._ctx.settings.kbot_bootstrap:
                await _send(writer, {"error": f"the running bot talks to another cluster than {wanted}"})
                return
            await _send(writer, {"accepted": True})
            t0 = asyncio.get_running_loop().time()
            code = await self._answer(request, writer)
            await _send(writer, {"exit": code})
            took = asyncio.get_running_loop().time() - t0
            log.info("answered a one-shot ask over %s in %.2fs (exit %d)", self.path, took, code)
        except (ConnectionError, asyncio.TimeoutError, ValueError):
            log.info("one-shot ask: the client went away or sent no question", exc_info=True)
        except Exception as exc:  # noqa: BLE001 - the client answers in its own process instead
            log.warning("one-shot ask failed", exc_info=True)
            try:
                await _send(writer, {"error": f"the running bot failed on this question ({type(exc).__name__})"})
            except ConnectionError:
                pass
        finally:
            writer.close()

    async def _answer(self, request: dict, writer: asyncio.StreamWriter) -> int:
        ctx = self._ctx
        assert ctx is not None
        if self.prepare is not None:
            self.prepare(ctx)
        user = ctx.gate.acting_user if ctx.gate is not None else None
        parsed = parse_request(request["text"], None, user=user, channel=None, router=ROUTER, cluster=None)
        result = parsed if isinstance(parsed, Answer) else await run_request(parsed, ctx, early=True)
        as_json = bool(request.get("json")) or (result.request is not None and result.request.json)
        if as_json:
            final = await complete(result)  # one JSON document per answer, as `kbot ask --json` prints
            await _send(writer, {"out": render_json(final.reply, indent=2) + "\n"})
            return final.exit_code
        color = ctx.settings.color and bool(request.get("tty"))

        async def show(answer: Answer) -> None:
            full = answer.request is not None and answer.request.full
            await _send(writer, {"out": render_text(answer.reply, full=full, color=color)})

        async def add(addition: Reply) -> None:
            await _send(writer, {"out": render_addition(addition)})

        final = await show_in_parts(result, show, add)
        return final.exit_code


def _someone_listens(path: Path) -> bool:
    if not path.exists():
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


async def _send(writer: asyncio.StreamWriter, message: dict) -> None:
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()


def serve_in_background(
    settings: KbotSettings,
    prepare: Callable[[Context], None] | None = None,
    at_start: Callable[[Context], Awaitable[None]] | None = None,
) -> AskServer:
    """Start answering one-shot asks on the state folder's socket (ready a moment later, without
    holding the caller up); stop() ends it."""
    return AskServer(settings, prepare, at_start).start(timeout=0)
