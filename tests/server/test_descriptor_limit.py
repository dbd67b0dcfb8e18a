"""Where the descriptor limit is low, an idle flood is refused at the cap instead of exhausting the process."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from decirank._serving import MAX_CONNECTIONS, descriptor_budget
from tests.loopback import HOST, free_port
from tests.server.serving import wait_ready

#: The server's descriptor limit, soft and hard, so it cannot raise it: a quarter goes to the reserve.
LIMIT = 256
#: Idle connections the test opens, past the cap (192) and the refusal point (208).
FLOOD = 600


def _lower_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_the_budget_is_sized_from_the_limit():
    """The reserve, the cap, the refusal point and the backlog all follow the limit this process has."""
    budget = descriptor_budget()
    if budget.limit is None:
        pytest.skip("this process has no descriptor limit")
    if budget.limit - budget.reserve <= MAX_CONNECTIONS:
        assert budget.cap + budget.reserve == budget.limit
    assert budget.reserve <= max(64, budget.limit // 4)
    assert budget.cap < budget.refuse_at < budget.limit
    assert 64 <= budget.backlog <= 2048


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts the server's descriptors in /proc")
def test_an_idle_flood_at_a_limit_of_256_is_refused_past_the_cap_and_probes_still_answer(tmp_path):
    """decirank serve under RLIMIT_NOFILE 256 with 600 idle connections opened at once: it never reaches
    the limit, /healthz answers, and the log holds at most a few lines about it (no traceback per accept)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < FLOOD + 256:
        pytest.skip(f"this machine lets a process open {hard} files, fewer than {FLOOD + 256}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, FLOOD + 256), hard))
    port = free_port()
    url = f"http://{HOST}:{port}"
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "lexical"]
    environment = {**os.environ, "DECIRANK_HOME": str(tmp_path)}
    process = subprocess.Popen(
        command,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_lower_limit,
        start_new_session=True,
    )
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(process.stderr), daemon=True)
    reader.start()
    flood = []
    most = 0
    try:
        assert wait_ready(url, process).status_code == 200
        at_rest = _descriptors(process.pid)
        for _ in range(FLOOD):
            flood.append(socket.create_connection((HOST, port)))
            if len(flood) % 50 == 0:
                most = max(most, _descriptors(process.pid))
        probes = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            most = max(most, _descriptors(process.pid))
            began = time.monotonic()
            health = httpx.get(url + "/healthz", headers={"connection": "close"}, timeout=5)
            probes.append((health.status_code, round(time.monotonic() - began, 3)))
            time.sleep(0.1)
        print(f"descriptors at rest {at_rest}, at most {most} of {LIMIT}; probes {probes[:5]}...")
        assert all(status == 200 for status, _ in probes), probes
        assert max(seconds for _, seconds in probes) < 1.0, probes
        assert most < LIMIT, f"the server held {most} descriptors, its limit is {LIMIT}"
    finally:
        for connection in flood:
            connection.close()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reader.join(timeout=10)
    text = "".join(log)
    assert text.count("out of system resource") <= 3, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert text.count("refused past the connection cap") <= 3, text[-3000:]
    assert len(text) < 20_000, text[-3000:]
