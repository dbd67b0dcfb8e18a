"""Running ``decirank serve``: one process, or N worker processes on one port, each pinned to its cores.

One Python process cannot use many cores: tokenising, JSON and the event
loop hold the GIL. With ``workers`` above one, uvicorn's supervisor binds the
port once and starts that many worker processes (spawned, so each loads the
model itself, once); the kernel hands each new connection to one of them.
Each worker builds the application from the :class:`ServeOptions` this
process leaves in the environment (``DECIRANK_SERVE_OPTIONS``), which a
spawned process inherits.

Cores: a worker given ``threads`` is pinned to that many cores (its share,
taken in turn: worker 0 the first ones, worker 1 the next, wrapping round),
and the embedded model sizes its encoder pool, and the tokenizer its own
threads, to the cores the process may use. Several workers share the cores
evenly unless told otherwise; one worker without ``threads`` uses them all.
A worker finds its place by locking the first free slot file in the serve's
run directory, so a worker that dies is replaced on the same cores.

What the workers share: the run log (SQLite in WAL mode, or PostgreSQL;
every write is a transaction, so processes interleave safely), the decision
cache (SQLite, likewise), and ``/metrics``, which adds up every worker's
figures (``metrics``). SIGTERM stops the supervisor accepting, then each
worker finishes what it is answering within ``shutdown_timeout`` seconds
and cancels the rest, whose runs are recorded ``cancelled``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess

from .._serving import (
    GUARDED_LOOP,
    KEEP_ALIVE_SECONDS,
    GuardedHTTPProtocol,
    Server,
    descriptor_budget,
    stop_commands_on_shutdown,
)
from ..batching.engines import usable_cores
from ..tools._evaluators.exec import adopt_orphans

__all__ = ["OPTIONS_VARIABLE", "PortInUseError", "ServeOptions", "listen", "serve", "worker_app"]

OPTIONS_VARIABLE = "DECIRANK_SERVE_OPTIONS"


@dataclass(frozen=True)
class ServeOptions:
    """What ``decirank serve`` was asked for: the application's settings and how to run it."""

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_body_bytes: int | None = None
    timeout: float | None = None
    allow_exec: bool = False
    max_concurrency: int | None = None
    metrics_public: bool = False
    #: Origins (``scheme://host[:port]``) whose pages may use a server on a loopback address.
    allowed_origins: tuple[str, ...] = ()
    #: Worker processes; 0 is one per usable core.
    workers: int = 1
    #: Cores (and so encoder threads) per worker; None: an even share, or every core for a single worker.
    threads: int | None = None
    shutdown_timeout: float = 30.0
    log_level: str = "warning"
    #: The cores the workers share, as the serve command found them (set by :meth:`resolved`).
    cores: tuple[int, ...] = ()
    #: A directory of the serve's own (slot files, metrics), made by :func:`serve`.
    run_directory: str | None = None
    #: A line per request on standard error (``--quiet`` turns it off).
    access_log: bool = True

    def resolved(self) -> ServeOptions:
        """The options with ``workers`` and ``threads`` made explicit for the cores this process may use."""
        cores = tuple(self.cores or usable_cores())
        workers = self.workers or len(cores)
        threads = self.threads
        if threads is None and workers > 1:
            threads = max(1, len(cores) // workers)
        return dataclasses.replace(self, cores=cores, workers=workers, threads=threads)

    def app_settings(self) -> dict[str, Any]:
        """The arguments of :func:`decirank.server.create_app`; unset limits keep the server's defaults."""
        settings: dict[str, Any] = {
            "api_key": self.api_key,
            "allow_exec": self.allow_exec,
            "max_concurrency": self.max_concurrency,
            "metrics_public": self.metrics_public,
            "host": self.host,
            "allowed_origins": tuple(self.allowed_origins),
            "access_log": self.access_log,
        }
        if self.max_body_bytes is not None:
            settings["max_body_bytes"] = self.max_body_bytes
        if self.timeout is not None:
            settings["timeout"] = self.timeout
        return settings


#: The slot file each worker holds locked for as long as it lives (the kernel releases it when the process ends).
_held_slots: list[Any] = []


def _claim_slot(options: ServeOptions) -> int:
    """The lowest worker number no live worker holds, held until this process ends."""
    assert options.run_directory is not None
    slots = Path(options.run_directory, "slots")
    slots.mkdir(exist_ok=True)
    for slot in range(options.workers):
        handle = open(slots / f"{slot}.lock", "w")  # noqa: SIM115 - kept open: the lock lives as long as the worker
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _held_slots.append(handle)
        return slot
    return 0  # unreachable while the supervisor keeps ``workers`` processes; sharing the first cores is harmless


def _pin(options: ServeOptions, slot: int) -> None:
    """Pin this process to its share of the cores, so the encoders and the tokenizer size their threads to it."""
    if options.threads is None or not hasattr(os, "sched_setaffinity"):
        return
    cores = options.cores
    share = [cores[(slot * options.threads + n) % len(cores)] for n in range(min(options.threads, len(cores)))]
    with contextlib.suppress(OSError):  # a core taken away since the command started: run unpinned
        os.sched_setaffinity(0, share)


def worker_app() -> Any:
    """The application of one worker, from the options the serve command left in the environment."""
    from . import create_app

    options = ServeOptions(**json.loads(os.environ[OPTIONS_VARIABLE]))
    stop_commands_on_shutdown()  # as the single worker's Server does
    adopt_orphans()  # a worker starts no children but its commands'
    slot = _claim_slot(options) if options.run_directory is not None else 0
    _pin(options, slot)
    return create_app(options.model, **options.app_settings())


class _Supervisor(Multiprocess):
    """uvicorn's supervisor, which also closes the port as soon as it is told to stop.

    Its workers stop accepting when they get SIGTERM, but the supervisor's
    own copy of the listening socket would let the kernel keep queueing new
    connections that nobody will answer.
    """

    def terminate_all(self) -> None:
        for sock in self.sockets:
            sock.close()
        super().terminate_all()

    def keep_subprocess_alive(self) -> None:
        from .metrics import mark_worker_gone

        before = {process.pid for process in self.processes}
        super().keep_subprocess_alive()
        for pid in before - {process.pid for process in self.processes}:
            if pid is not None:
                mark_worker_gone(pid)


class PortInUseError(OSError):
    """The address to serve on is taken, or cannot be bound; the message says which, on one line."""


def listen(host: str, port: int) -> socket.socket:
    """The bound socket ``serve`` will listen on, bound now so a taken port is refused before anything starts.

    Bound as uvicorn binds it (``SO_REUSEADDR``, inheritable for the workers).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise PortInUseError(error.errno, f"port {port} is in use on {host}") from None
        raise PortInUseError(error.errno, f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.set_inheritable(True)
    return sock


def serve(options: ServeOptions, sock: socket.socket | None = None) -> None:
    """Serve until SIGTERM or SIGINT: in this process for one worker, else under a supervisor.

    ``sock`` is the socket :func:`listen` bound (bound here when not given).
    """
    options = options.resolved()
    sock = sock if sock is not None else listen(options.host, options.port)
    made = tempfile.mkdtemp(prefix="decirank-serve-")
    options = dataclasses.replace(options, run_directory=made)
    previous = {name: os.environ.get(name) for name in (OPTIONS_VARIABLE, "PROMETHEUS_MULTIPROC_DIR")}
    try:
        if options.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            # Set before any worker starts: prometheus_client reads it when first imported.
            metrics_directory = Path(made, "metrics")
            metrics_directory.mkdir()
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_directory)
        os.environ[OPTIONS_VARIABLE] = json.dumps(dataclasses.asdict(options))
        config = uvicorn.Config(
            f"{__name__}:worker_app",
            factory=True,
            host=options.host,
            port=options.port,
            workers=options.workers,
            log_level=options.log_level,
            timeout_graceful_shutdown=options.shutdown_timeout,
            http=GuardedHTTPProtocol,  # header timeout and a connection cap that sheds idle ones
            loop=GUARDED_LOOP,  # counts connections as it accepts them, refusing past the descriptor budget
            # Sized from the descriptor limit (raised here, which the workers inherit), not uvicorn's 2,048.
            backlog=descriptor_budget().backlog,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            access_log=False,  # the application's own access log names the run; uvicorn's would repeat each line
        )
        if options.workers == 1:
            adopt_orphans()  # this process serves, and starts no children but its commands'
            server = Server(config)  # stops running exec: commands as soon as it starts to shut down
            server.run(sockets=[sock])
            if not server.started:
                raise SystemExit(STARTUP_FAILURE)  # uvicorn has logged why
        else:
            _Supervisor(config, sockets=[sock]).run()
    finally:
        sock.close()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(made, ignore_errors=True)
