"""``decirank serve`` as a real process for the deployment tests: start it, wait until ready, look inside."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from decirank.stores.runlog import RunLog
from tests.loopback import HOST, StderrReader, free_port

#: What a long request runs: score_list's exec: evaluator sleeping (the server needs --allow-exec).
SLEEP_REF = "slow/one"


@dataclass
class Served:
    process: subprocess.Popen
    url: str
    #: Its stderr (the access log among it), read as it comes so the pipe never fills.
    log: StderrReader

    def workers(self) -> list[int]:
        """The PIDs of the worker processes under the supervisor (none when it serves by itself)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def wait_ready(
    url: str, process: subprocess.Popen, timeout: float = 120.0, stderr: StderrReader | None = None
) -> httpx.Response:
    """The first answer of ``/readyz``, once the server answers at all."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            said = stderr.text(wait=5) if stderr is not None else process.stderr.read()
            raise RuntimeError(f"decirank serve exited with {process.returncode}: {said}")
        try:
            return httpx.get(url + "/readyz", timeout=30)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"decirank serve did not answer at {url} within {timeout:g} s") from None
            time.sleep(0.05)


@contextlib.contextmanager
def serving(*options: str, home: Path, env: dict[str, str] | None = None, port: int | None = None) -> Iterator[Served]:
    """``decirank serve OPTIONS`` with its user state in ``home``, until the block ends (then SIGTERM, or kill)."""
    port = port or free_port()
    environment = {**os.environ, "DECIRANK_HOME": str(home), **(env or {})}
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), *options]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    url = f"http://{HOST}:{port}"
    log = StderrReader(process)
    try:
        ready = wait_ready(url, process, stderr=log)
        assert ready.status_code == 200, ready.text
        yield Served(process, url, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        process.stderr.close()


def runlog_of(home: Path) -> RunLog:
    return RunLog.open(home / "runs.db")


def wait_for_runs(runlog: RunLog, count: int, *, status: str = "running", timeout: float = 60.0) -> list[dict]:
    """The log's tool runs of ``status``, once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        runs = runlog.runs(limit=None, status=status)
        if len(runs) >= count or time.monotonic() > deadline:
            return runs
        time.sleep(0.05)


@contextlib.contextmanager
def request_in_flight(url: str, path: str, body: dict) -> Iterator[socket.socket]:
    """A POST sent on a connection of its own and left waiting; the block's end closes it (the client leaves)."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        yield connection


def sleep_body(seconds: float) -> dict:
    """A score_list request that takes ``seconds`` (its exec: evaluator sleeps) and cannot time out first."""
    return {"refs": [SLEEP_REF], "evaluator": f"exec:sleep {seconds:g}", "timeout": 600}
