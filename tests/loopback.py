"""Real servers on 127.0.0.1 for the HTTP tests: ours in a thread or a subprocess, and a scripted one.

:class:`ThreadedServer` runs an ASGI app (``decirank serve``'s) under uvicorn
in a thread; :func:`subprocess_server` runs a command that serves HTTP
(``decirank serve``, ``sparrow-decider serve``) until the block ends;
:class:`ScriptedServer` answers each request from a script of replies, so a
test can make a server fail in every way a real one does (a status, a header,
a slow answer, a dropped connection, a malformed body).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import httpx
import uvicorn

HOST = "127.0.0.1"


def decide_once(backend: Any, request: Any) -> Any:
    """One decision on a fresh event loop, closing the backend's client after it."""

    async def run() -> Any:
        try:
            return await backend.decide(request)
        finally:
            await backend.aclose()

    return asyncio.run(run())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class ThreadedServer:
    """``with ThreadedServer(app) as url:`` serves ``app`` on a free loopback port."""

    def __init__(self, app: Any) -> None:
        self._server = uvicorn.Server(uvicorn.Config(app, host=HOST, log_level="warning", lifespan="off"))
        self._socket = socket.socket()
        self._socket.bind((HOST, 0))
        self.url = f"http://{HOST}:{self._socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


class StderrReader:
    """Reads a process's stderr as it comes, keeping its last ``keep`` lines.

    A server logs a line per request: a pipe nobody reads fills after a few hundred, and the server then
    blocks writing the next.
    """

    def __init__(self, process: subprocess.Popen, keep: int = 5000) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._thread = threading.Thread(target=self._read, args=(process.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        with contextlib.suppress(ValueError, OSError):  # closed as the server stopped
            for line in stream:
                self.lines.append(line.rstrip("\n"))

    def text(self, wait: float = 0.0) -> str:
        """What was read, after waiting up to ``wait`` s for the stream to end (for a process that exited)."""
        if wait:
            self._thread.join(timeout=wait)
        return "\n".join(self.lines)


@contextlib.contextmanager
def subprocess_server(
    command: Sequence[str], url: str, *, ready_path: str = "/", env: dict | None = None, timeout: float = 30.0
) -> Iterator[subprocess.Popen]:
    """Run ``command`` until the block ends; it is ready when ``GET url + ready_path`` answers."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    stderr = StderrReader(process)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {process.returncode}: {stderr.text(wait=5)}")
            try:
                httpx.get(url + ready_path, timeout=1.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not answer at {url} within {timeout:g} s") from None
                time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``body`` is JSON, raw bytes, or a function of the request's JSON."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering.
    delay: float = 0.0
    #: Close the connection without answering.
    drop: bool = False


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    at: float


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out or a dropped connection is what these tests make happen."""


class ScriptedServer:
    """A real HTTP server whose answers are scripted per first path segment.

    ``server.script("flaky", Reply(500), Reply(body=...))`` makes requests to
    ``{server.url}/flaky/...`` get a 500, then that body; the last reply repeats.
    """

    def __init__(self) -> None:
        self.scripts: dict[str, list[Reply]] = {}
        self.received: list[Received] = []
        self._lock = threading.Lock()
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                scenario = self.path.strip("/").split("/")[0]
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = scripted._next(scenario, Received(self.path, headers, body, time.monotonic()))
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                content = reply.body(body) if callable(reply.body) else reply.body
                data = content if isinstance(content, bytes) else json.dumps(content).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = _QuietServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def script(self, scenario: str, *replies: Reply) -> str:
        """Set what ``scenario`` answers; returns its base URL."""
        with self._lock:
            self.scripts[scenario] = list(replies)
        return f"{self.url}/{scenario}"

    def requests_to(self, scenario: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path.strip("/").split("/")[0] == scenario]

    def _next(self, scenario: str, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            script = self.scripts.get(scenario) or [Reply(404, {"error": f"no script for {scenario!r}"})]
            return script.pop(0) if len(script) > 1 else script[0]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.shutdown()
        self._http.server_close()


def answers(answer: Callable[[str, dict], Any]) -> Callable[[dict], dict]:
    """A System One reply body answering each question of the request with ``answer(qid, question)``."""

    def body(request: dict) -> dict:
        return {
            "model": request.get("model"),
            "answers": {qid: answer(qid, question) for qid, question in request["questions"].items()},
            "usage": {"input_tokens": 7, "output_tokens": 1},
        }

    return body


def uniform(qid: str, question: dict) -> dict:
    """A System One answer that favours nothing."""
    if question["type"] == "noul":
        return {"type": "noul", "noul": 0.5}
    keys = (
        list(question["criteria"])
        if question["type"] == "choice"
        else [str(i) for i in range(len(question["criteria"]))]
    )
    return {"type": question["type"], "probabilities": {key: 1 / len(keys) for key in keys}}


class HeldAnswers:
    """A System One reply body that answers the first ``answered_at_once`` requests, then holds each one
    until :meth:`release`: work that cannot finish, for a test to interrupt at a moment it knows.

    ``holding`` is set once a request is held, so a test waits on it rather than on a clock.
    """

    def __init__(self, answered_at_once: int = 0) -> None:
        self.answered_at_once = answered_at_once
        self.holding = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._count = 0

    def __call__(self, request: dict) -> dict:
        with self._lock:
            self._count += 1
            held = self._count > self.answered_at_once
        if held and not self._released.is_set():
            self.holding.set()
            self._released.wait(timeout=300)
        return answers(uniform)(request)

    def release(self) -> None:
        """Answer the held requests and every later one at once."""
        self._released.set()


@dataclass
class HealthProbe:
    """Asks a server's ``/healthz`` every 20 ms from a thread of its own while a test's work runs.

    ``slowest`` is the longest answer seen; an answer other than 200 (or none) is kept in
    ``failures``, which the test reads: an assert inside the thread would fail nothing.
    """

    url: str
    slowest: float = 0.0
    failures: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def running(self) -> Iterator[HealthProbe]:
        done = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=self.url, timeout=60) as client:
                while not done.is_set():
                    started = time.monotonic()
                    try:
                        status = client.get("/healthz").status_code
                    except httpx.HTTPError as error:
                        self.failures.append(repr(error))
                    else:
                        if status != 200:
                            self.failures.append(f"/healthz answered {status}")
                    self.slowest = max(self.slowest, time.monotonic() - started)
                    time.sleep(0.02)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        time.sleep(0.1)  # the prober is connected and asking before the work starts
        try:
            yield self
        finally:
            done.set()
            prober.join(timeout=60)
