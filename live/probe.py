"""Is a Kafka process there, and does it answer? A probe that tells a dead node from a stopped one.

A broker that was SIGKILLed or crashed refuses connections on its listener (nothing holds the port).
A JVM that is paused - a long GC pause, SIGSTOP, a hung process, swapped out - still owns its
listening socket: the kernel completes the TCP handshake for it, but no request is ever answered.
To the controller both look the same (no heartbeat, the broker is fenced), and metadata alone cannot
tell them apart, yet the right response differs: a dead broker's replicas may need a new home, a
paused one comes back by itself and moving its data only adds load.

So the probe connects and sends the smallest request every Kafka listener answers before
authentication, ApiVersions v0 (the client's first request on any connection), and waits a short
while for the reply. The bytes are written by hand: both client libraries hide the socket, and
neither can be asked "did the TCP connect succeed but the request time out?".
"""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass
from typing import Literal

# A live JVM answers ApiVersions in milliseconds; 1.5 s leaves room for a loaded machine while
# keeping a whole diagnosis within a few seconds. Longer silence means the process is not running
# its network threads (paused) or is too overloaded to serve anyone, which the answer says too.
ANSWER_TIMEOUT_S = 1.5
CONNECT_TIMEOUT_S = 1.5

Liveness = Literal["refused", "silent", "answers", "unreachable"]

_API_VERSIONS = 18
_CLIENT_ID = b"kbot-probe"


@dataclass(frozen=True)
class ProbeResult:
    host: str
    port: int
    state: Liveness
    seconds: float
    detail: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        """One line for an evidence table."""
        if self.state == "refused":
            return f"{self.address} refuses connections: no process is listening (stopped or crashed)"
        if self.state == "silent":
            return (
                f"{self.address} accepts TCP connections but did not answer a request in {self.seconds:.1f} s: "
                "the process exists but is not running (GC pause, SIGSTOP, hung or starved JVM)"
            )
        if self.state == "answers":
            return f"{self.address} answers requests ({self.seconds * 1000:.0f} ms): the process is up"
        return f"{self.address} could not be reached ({self.detail or 'no route'})"


def api_versions_request(correlation_id: int = 1) -> bytes:
    """ApiVersions v0: request header v1 (api key, version, correlation id, client id), empty body."""
    header = struct.pack(">hhih", _API_VERSIONS, 0, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    return struct.pack(">i", len(header)) + header


async def probe(
    host: str, port: int, answer_timeout: float = ANSWER_TIMEOUT_S, connect_timeout: float = CONNECT_TIMEOUT_S
) -> ProbeResult:
    started = time.monotonic()
    host = host.strip("[]")

    def result(state: Liveness, detail: str = "") -> ProbeResult:
        return ProbeResult(host, int(port), state, time.monotonic() - started, detail)

    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), connect_timeout)
    except ConnectionRefusedError:
        return result("refused", "connection refused")
    except asyncio.TimeoutError:
        # No SYN-ACK at all: a firewall, a dead host or a network partition, not a paused process.
        return result("unreachable", f"no TCP answer within {connect_timeout:g} s")
    except OSError as exc:
        return result("unreachable", exc.strerror or str(exc))
    try:
        writer.write(api_versions_request())
        await writer.drain()
        head = await asyncio.wait_for(reader.readexactly(8), answer_timeout)
        _size, correlation = struct.unpack(">ii", head)
        return result("answers", f"correlation id {correlation}")
    except asyncio.TimeoutError:
        return result("silent", f"no answer within {answer_timeout:g} s")
    except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
        # The listener took the connection and closed it: a process that is shutting down or
        # rejecting us (e.g. an SSL listener hearing plaintext). It is running, so not paused.
        return result("answers", f"connection closed without a reply ({type(exc).__name__})")
    except OSError as exc:
        return result("unreachable", exc.strerror or str(exc))
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 0.5)
        except (OSError, asyncio.TimeoutError):
            pass


async def probe_all(
    addresses: dict[int, tuple[str, int]], answer_timeout: float = ANSWER_TIMEOUT_S
) -> dict[int, ProbeResult]:
    """Probe several nodes at once: node id -> result."""
    ids = list(addresses)
    results = await asyncio.gather(*(probe(*addresses[i], answer_timeout=answer_timeout) for i in ids))
    return dict(zip(ids, results))


def parse_voters(voters: str | None) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters ('1@host:9093,2@[::1]:9093') -> {1: ('host', 9093), ...}."""
    out: dict[int, tuple[str, int]] = {}
    for item in (voters or "").split(","):
        node, sep, address = item.strip().partition("@")
        host, _, port = address.rpartition(":")
        if sep and node.strip().isdigit() and port.isdigit():
            out[int(node)] = (host.strip("[]"), int(port))
    return out


def parse_addresses(servers: str | None) -> list[tuple[str, int]]:
    """'host:9093,host2:9093' (controller.quorum.bootstrap.servers) -> [(host, port), ...]."""
    out = []
    for item in (servers or "").split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out
