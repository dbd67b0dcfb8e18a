"""Running an ASGI app with uvicorn under decirank's limits: ``decirank serve`` and ``decirank mcp -t http``.

uvicorn's own guards count every open connection against one cap and never
time out a request's headers, so a few hundred sockets that send nothing (or
half a request line) refuse every request, probes included. The HTTP
protocol here is uvicorn's h11 one with what it lacks:

- **Headers in time**: a connection that has not sent a request's whole
  header section within :data:`HEADER_TIMEOUT_SECONDS` of its first byte (or
  of opening, for one that sends nothing) is closed, with a 408 when part of
  a request came. A timer per request, not per byte, so dripping one byte a
  second gains nothing.
- **Idle keep-alive** connections close after :data:`KEEP_ALIVE_SECONDS`
  (uvicorn's ``timeout_keep_alive``).
- **Connections** are capped near the process's file-descriptor limit (raised
  to its hard limit first), never above :data:`MAX_CONNECTIONS`; a new
  connection past the cap closes the one idle the longest (no request being
  answered on it), so idle sockets cannot keep a probe or a real client out.
  Only when every connection has a request in flight is the new one closed.
- **Requests** in flight are capped by the application (see
  :class:`decirank.server.app.ConcurrencyLimit`), with the probes exempt.
- **Shutdown** (SIGTERM, Ctrl-C) first stops the ``exec:`` commands still
  running (their refs come back UNKNOWN, not judged), so a request waiting
  on one ends at once instead of holding the server for the command's whole
  budget; then uvicorn lets the other requests finish, for at most
  :data:`SHUTDOWN_GRACE_SECONDS`, and cancels what is left.

The body of a request (read whole, with a time limit, before anything parses
it) is the HTTP server's own guard: see :class:`decirank.server.app.BodyLimit`.
"""

from __future__ import annotations

import asyncio
import functools
import resource
import socket
from collections import OrderedDict
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .tools._evaluators.exec import stop_running_commands

__all__ = [
    "HEADER_TIMEOUT_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "MAX_CONNECTIONS",
    "GuardedHTTPProtocol",
    "connection_cap",
    "SHUTDOWN_GRACE_SECONDS",
    "Server",
    "server",
    "stop_commands_on_shutdown",
]

#: The most connections a process keeps open, whatever its file-descriptor limit.
MAX_CONNECTIONS = 16_384
#: Descriptors kept for everything but connections: the run log, the cache, exec: commands' pipes.
RESERVED_DESCRIPTORS = 256
#: Seconds a client has to send a request's headers, from its first byte (or from connecting).
HEADER_TIMEOUT_SECONDS = 5.0
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_GRACE_SECONDS = 10

_LATE = b"the request headers did not arrive in time"
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
)


@functools.cache
def connection_cap() -> int:
    """The connections this process keeps open: its descriptor limit (raised to the hard limit) less a reserve.

    A process that runs out of descriptors stops accepting for a second at a
    time (asyncio's answer to EMFILE), which is what an idle flood wants.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_CONNECTIONS + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard) and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # kept as it was: the cap below follows what the process has
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft - RESERVED_DESCRIPTORS))


class GuardedHTTPProtocol(H11Protocol):
    """uvicorn's h11 protocol with a time limit on request headers and a cap that sheds idle connections.

    uvicorn's ``limit_concurrency`` is left unset: it counts connections that
    send nothing, and answers 503 to everyone once they are many.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit_concurrency = None
        self._header_timer: asyncio.TimerHandle | None = None
        # One registry per server: the connections waiting for a request, longest waiting first.
        idle = getattr(self.server_state, "decirank_idle", None)
        if idle is None:
            idle = self.server_state.decirank_idle = OrderedDict()  # type: ignore[attr-defined]
        self._idle: OrderedDict[GuardedHTTPProtocol, None] = idle

    def _answering(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._became_idle()
        if len(self.connections) > connection_cap():
            # The one waiting longest goes; when that is this one, every other has a request in flight.
            oldest = next(iter(self._idle))
            oldest._close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._answering():
            self._became_busy()
        elif self._header_timer is None and not self.transport.is_closing():
            # Part of the next request on a kept-alive connection: uvicorn's keep-alive timer stopped at its first byte.
            self._header_timer = self.loop.call_later(HEADER_TIMEOUT_SECONDS, self._headers_late)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._idle[self] = None  # uvicorn's keep-alive timer runs from here
            self._idle.move_to_end(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._became_busy()
        self._idle.pop(self, None)
        super().connection_lost(exc)

    def _became_idle(self) -> None:
        self._idle[self] = None
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_SECONDS, self._headers_late)

    def _became_busy(self) -> None:
        self._idle.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._answering() or self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self.transport.write(_TIMED_OUT)  # part of a request came: say why it is refused
        self._close()

    def _close(self) -> None:
        self._became_busy()
        if not self.transport.is_closing():
            self.transport.close()


class Server(uvicorn.Server):
    """uvicorn's server, stopping running ``exec:`` commands as soon as it starts to shut down."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop_running_commands()
        await super().shutdown(sockets=sockets)


def stop_commands_on_shutdown() -> None:
    """Make every uvicorn server of this process stop running ``exec:`` commands as it starts to shut down.

    For the workers of uvicorn's own supervisor, which build a plain ``uvicorn.Server`` in each worker
    process before decirank's code runs there: called from the worker's application factory.
    """
    if getattr(uvicorn.Server.shutdown, "stops_commands", False):
        return
    original = uvicorn.Server.shutdown

    async def shutdown(self: uvicorn.Server, sockets: list[socket.socket] | None = None) -> None:
        stop_running_commands()
        await original(self, sockets=sockets)

    shutdown.stops_commands = True  # type: ignore[attr-defined]
    uvicorn.Server.shutdown = shutdown  # type: ignore[method-assign]


def server(app: Any, *, host: str, port: int, log_level: str = "warning") -> Server:
    """A :class:`Server` for ``app`` on ``host:port`` with the limits above."""
    return Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            http=GuardedHTTPProtocol,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
    )
