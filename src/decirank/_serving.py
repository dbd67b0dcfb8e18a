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
  The event loop (:class:`GuardedEventLoop`) counts connections as it accepts
  them, so a burst accepted in one wake-up cannot run past the cap before it
  acts: past the cap and a margin for idle ones being shed, a connection is
  closed as soon as it is accepted. The reserve of descriptors kept for
  everything else and the listen backlog are sized from the limit
  (:func:`descriptor_budget`), and running out of descriptors anyway is
  logged at most once every :data:`ACCEPT_LOG_SECONDS`.
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
import errno
import functools
import logging
import resource
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .tools._evaluators.exec import stop_running_commands

__all__ = [
    "ACCEPT_LOG_SECONDS",
    "DescriptorBudget",
    "GUARDED_LOOP",
    "GuardedEventLoop",
    "HEADER_TIMEOUT_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "MAX_CONNECTIONS",
    "GuardedHTTPProtocol",
    "connection_cap",
    "descriptor_budget",
    "SHUTDOWN_GRACE_SECONDS",
    "Server",
    "server",
    "stop_commands_on_shutdown",
]

#: The most connections a process keeps open, whatever its file-descriptor limit.
MAX_CONNECTIONS = 16_384
#: The most descriptors kept for everything but connections (the run log, the cache, exec: commands' pipes);
#: a quarter of the limit when that is less, and never under :data:`MIN_RESERVED_DESCRIPTORS`.
RESERVED_DESCRIPTORS = 256
#: The fewest kept: a process serving the embedded model holds about 20 descriptors before any connection.
MIN_RESERVED_DESCRIPTORS = 64
#: Seconds a client has to send a request's headers, from its first byte (or from connecting).
HEADER_TIMEOUT_SECONDS = 5.0
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_GRACE_SECONDS = 10
#: Seconds between two log lines about connections refused, or accepts failing for want of descriptors.
ACCEPT_LOG_SECONDS = 10.0

logger = logging.getLogger("decirank.server")
#: uvicorn's ``loop`` setting naming :class:`GuardedEventLoop`; a worker process imports it by this name.
GUARDED_LOOP = "decirank._serving:GuardedEventLoop"

_LATE = b"the request headers did not arrive in time"
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
)


@dataclass(frozen=True)
class DescriptorBudget:
    """How a process's descriptor limit is shared between connections and everything else."""

    #: The process's soft RLIMIT_NOFILE once raised (None: unlimited).
    limit: int | None
    #: Descriptors kept for everything but connections.
    reserve: int
    #: Connections kept open; past it the longest idle one is closed for each new one.
    cap: int
    #: Connections accepted at most, the cap plus a quarter of the reserve for idle ones being closed meanwhile;
    #: a connection past it is closed as soon as it is accepted, so the process never reaches its limit.
    refuse_at: int
    #: The listen backlog, and the most connections accepted in one wake-up of the event loop.
    backlog: int


def _raised_limit() -> int | None:
    """The soft descriptor limit, raised towards the hard one as far as connections could use it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = MAX_CONNECTIONS + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard) and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # kept as it was: the budget below follows what the process has
    return None if soft == resource.RLIM_INFINITY else soft


@functools.cache
def descriptor_budget() -> DescriptorBudget:
    """This process's :class:`DescriptorBudget`, its limit raised to the hard one first.

    Sized from the limit: uvicorn's fixed backlog of 2,048 let one wake-up accept
    more connections than a limit of 1,024 allows before any cap could act.
    """
    limit = _raised_limit()
    if limit is None:
        cap = MAX_CONNECTIONS
        reserve = RESERVED_DESCRIPTORS
    else:
        reserve = max(MIN_RESERVED_DESCRIPTORS, min(RESERVED_DESCRIPTORS, limit // 4))
        cap = max(16, min(MAX_CONNECTIONS, limit - reserve))
    refuse_at = cap + max(4, reserve // 4)
    backlog = max(64, min(2048, cap // 16))
    return DescriptorBudget(limit, reserve, cap, refuse_at, backlog)


def connection_cap() -> int:
    """The connections this process keeps open: its descriptor limit (raised to the hard limit) less a reserve."""
    return descriptor_budget().cap


class _RateLimitedLog:
    """One warning now, then at most one every :data:`ACCEPT_LOG_SECONDS` counting what happened meanwhile.

    An idle flood met at the limit repeats the same event thousands of times a second; a line each (with
    asyncio's traceback) once filled 262 MB of log in 40 s.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.unlogged = 0
        self.logged_at = -ACCEPT_LOG_SECONDS

    def __call__(self, detail: str) -> None:
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at < ACCEPT_LOG_SECONDS:
            return
        times = f" ({self.unlogged} times since the last such line)" if self.logged_at >= 0 else ""
        logger.warning("%s%s: %s", self.what, times, detail)
        self.unlogged = 0
        self.logged_at = now


class _CountedSocket(socket.socket):
    """An accepted connection's socket that tells its loop when it is closed, so the loop counts what is open."""

    __slots__ = ("_counted_by",)

    def close(self) -> None:
        loop = getattr(self, "_counted_by", None)
        if loop is not None:
            self._counted_by = None
            loop.open_connections -= 1
        super().close()


class GuardedEventLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop, accepting connections within this process's :class:`DescriptorBudget`.

    asyncio accepts up to the backlog in one wake-up, and creates the
    protocols (where a cap can look) only after; past the descriptor limit
    it logged a traceback and scheduled a retry for every connection it
    could not accept, up to the backlog each wake-up. Here each accepted
    connection is counted at once, one past ``refuse_at`` is closed at once
    (refused: the client sees the connection closed, the process keeps its
    descriptors), and an accept that fails for want of descriptors stops
    accepting for a second, logged at most once every :data:`ACCEPT_LOG_SECONDS`.

    Given to uvicorn as its loop (:data:`GUARDED_LOOP`; uvicorn 0.36 and later take a loop class by name), so
    every worker runs it, uvloop installed or not;
    asyncio's accept loop is private, and this follows its shape on Python 3.11 to 3.13.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_connections = 0
        self.refused_connections = 0
        self._refused_log = _RateLimitedLog("connections refused past the connection cap")
        self._exhausted_log = _RateLimitedLog("socket.accept() out of system resource")

    def _accept_connection(  # type: ignore[override]
        self,
        protocol_factory: Any,
        sock: socket.socket,
        sslcontext: Any = None,
        server: Any = None,
        backlog: int = 100,
        *timeouts: Any,
    ) -> None:
        budget = descriptor_budget()
        # Read through connection_cap, so a cap set apart from the limit keeps the same margin above it.
        refuse_at = connection_cap() + budget.refuse_at - budget.cap
        for _ in range(backlog):
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return  # nothing more waiting
            except OSError as error:
                if error.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise  # the loop logs it and carries on
                limit = descriptor_budget().limit
                self._exhausted_log(
                    f"{error.strerror} with {self.open_connections} connections open (descriptor limit "
                    f"{limit if limit is not None else 'unlimited'}); accepting again in 1 s"
                )
                # Once per wake-up, not once per connection waiting: stop listening for a second, then resume.
                self._remove_reader(sock.fileno())
                self.call_later(
                    1.0, self._start_serving, protocol_factory, sock, sslcontext, server, backlog, *timeouts
                )
                return
            if self.open_connections >= refuse_at:
                conn.close()
                self.refused_connections += 1
                self._refused_log(f"{self.open_connections} open, {refuse_at} at most; each new one is closed at once")
                continue
            counted = _CountedSocket(conn.family, conn.type, conn.proto, fileno=conn.detach())
            counted.setblocking(False)
            counted._counted_by = self
            self.open_connections += 1
            accept = self._accept_connection2(  # type: ignore[attr-defined]
                protocol_factory, counted, {"peername": address}, sslcontext, server, *timeouts
            )
            self.create_task(accept)


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
        if self._declared_chunk_too_large():
            return
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

    def _declared_chunk_too_large(self) -> bool:
        """Refuse a chunked body at once (413, then close) when a chunk-size line declares more than the body limit.

        h11 takes a chunk size of up to 20 hex digits and then waits for that
        many bytes; the application only ever sees the bytes that came, so a
        declared 2^79 held the request until the body timeout. The size is h11's
        own count of what the chunk still lacks (a private attribute: where it
        is missing, the body limit still refuses as the bytes arrive).
        """
        limit = self._body_limit()
        remaining = getattr(getattr(self.conn, "_reader", None), "_bytes_in_chunk", 0)
        if limit is None or not isinstance(remaining, int) or remaining <= limit or self.transport.is_closing():
            return False
        message = b'{"error":{"type":"TooLargeError","message":"the request body is over %d bytes (%s)"}}' % (
            limit,
            b"a chunk of %d more bytes was declared" % remaining,
        )
        self.transport.write(
            b"HTTP/1.1 413 Content Too Large\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(message), message)
        )
        self._close()
        return True

    def _body_limit(self) -> int | None:
        """The application's ``max_body_bytes`` (decirank serve's app and the middleware uvicorn wraps round it)."""
        cached = getattr(self.server_state, "decirank_body_limit", False)
        if cached is not False:
            return cached
        limit, app = None, self.app
        for _ in range(16):
            settings = getattr(getattr(app, "state", None), "settings", None)
            if isinstance(getattr(settings, "max_body_bytes", None), int):
                limit = settings.max_body_bytes
                break
            app = getattr(app, "app", None)
            if app is None:
                break
        self.server_state.decirank_body_limit = limit  # type: ignore[attr-defined]
        return limit

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
            loop=GUARDED_LOOP,
            backlog=descriptor_budget().backlog,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
    )
