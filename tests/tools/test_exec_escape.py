"""``exec:`` commands' descendants die with them even out of their process group; a stopping server stops them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import anyio
import httpx
import pytest

import decirank
from decirank import ArtifactStore, Verdict
from decirank.tools._evaluators.exec import SUBREAPER, _argv, stop_running_commands
from decirank.tools.score_list import ascore_list
from tests.loopback import free_port, subprocess_server
from tests.processes import marked, wait_until_gone

pytestmark = pytest.mark.skipif(not SUBREAPER, reason="the child subreaper is Linux's")

# Background sleeps that leave the shell's process group: one by setsid, one by a double fork
# (its parent exits at once, so it is an orphan), each writing its pid first.
ESCAPES = (
    "setsid sh -c 'echo $$ >> {pids}; exec sleep 301' & "
    "sh -c 'sh -c \"echo \\$\\$ >> {pids}; exec sleep 302\" & exit 0' & "
)


def read_pids(path, count: int, seconds: float = 30.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and len(pids := path.read_text().split()) >= count:
            return [int(pid) for pid in pids]
        time.sleep(0.02)
    raise AssertionError(f"{path} never held {count} pids")


def test_descendants_that_leave_the_group_die_when_the_command_ends(store, tmp_path):
    """setsid and double-forked children of a command that exits 0 are gone within 1 s of the call returning."""
    pids = tmp_path / "pids"
    store.put("r/a", "x")
    # The file exists before the loop reads it: a missing file would end the loop (and the command) at once,
    # before the escapees had written their pids.
    pids.touch()
    command = "exec:" + ESCAPES.format(pids=pids) + f"while [ $(wc -l < {pids}) -lt 2 ]; do sleep 0.05; done; exit 0"
    entry = decirank.score_list(["r/a"], command, store=store).ranked[0]
    assert entry.verdict == Verdict.VALID
    escaped = read_pids(pids, 2)
    assert wait_until_gone(escaped, 1.0) == []


def test_descendants_that_leave_the_group_die_at_the_timeout(store, tmp_path):
    """At a command's timeout its escaped descendants die with it; the verdict is the timeout's."""
    pids = tmp_path / "pids"
    store.put("r/a", "x")
    command = "exec:" + ESCAPES.format(pids=pids) + "sleep 300"
    entry = decirank.score_list(["r/a"], command, store=store, exec_timeout=2).ranked[0]
    assert (entry.verdict, entry.reason) == (Verdict.INVALID, "timed out after 2 s")
    assert wait_until_gone(read_pids(pids, 2), 1.0) == []


def test_descendants_die_when_the_process_running_the_command_is_killed(tmp_path):
    """kill -9 of the process that ran a command (a server, say) leaves none of the command's processes running."""
    pids = tmp_path / "pids"
    store_path = tmp_path / "artifacts.db"
    with ArtifactStore(store_path) as store:
        store.put("r/a", "x")
    command = "exec:" + ESCAPES.format(pids=pids) + f"echo $$ >> {pids}; sleep 300"
    script = textwrap.dedent(
        f"""
        import decirank
        from decirank.stores.artifacts import ArtifactStore
        with ArtifactStore({str(store_path)!r}) as store:
            decirank.score_list(["r/a"], {command!r}, store=store)
        """
    )
    runner = subprocess.Popen([sys.executable, "-c", script], env={**os.environ})
    try:
        started = read_pids(pids, 3, seconds=60)
    finally:
        runner.kill()
        runner.wait()
    assert wait_until_gone(started, 5.0) == []


def test_stop_signals_that_come_together_still_end_all_the_command_started(tmp_path):
    """Two stop signals at once (as a killed parent's death signal comes once per exiting thread): all still end.

    The second one's handler runs when the first has been answered; it must not cut short the ending.
    """
    pids = tmp_path / "pids"
    errors = tmp_path / "stderr"
    command = ESCAPES.format(pids=pids) + f"echo $$ >> {pids}; sleep 300"
    with errors.open("wb") as stderr:
        reaper = subprocess.Popen(_argv(command), stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        started = read_pids(pids, 3)
        # Two different signals both stay pending, so both handlers run, one after the other.
        os.kill(reaper.pid, signal.SIGHUP)
        os.kill(reaper.pid, signal.SIGTERM)
        assert reaper.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        reaper.kill()
    assert errors.read_text() == ""
    assert wait_until_gone(started, 1.0) == []


def test_stopping_running_commands_ends_them_at_once_as_unknown(store, tmp_path):
    """stop_running_commands (a server's shutdown) ends a running command and its escapees: UNKNOWN, not judged."""
    pids = tmp_path / "pids"
    store.put("r/a", "x")
    command = "exec:" + ESCAPES.format(pids=pids) + "sleep 300"

    async def main() -> tuple[object, float]:
        async with anyio.create_task_group() as group:
            outcome: list[object] = []

            async def run() -> None:
                outcome.append(await ascore_list(["r/a"], command, store=store, timeout=60))

            group.start_soon(run)
            while not (pids.exists() and len(pids.read_text().split()) >= 2):
                await anyio.sleep(0.02)
            stopped_at = time.monotonic()
            assert stop_running_commands() == 1
        return outcome[0], time.monotonic() - stopped_at

    result, took = anyio.run(main)
    entry = result.ranked[0]
    assert entry.verdict == Verdict.UNKNOWN and entry.reason == "stopped: the server is shutting down"
    assert took < 10  # not the 60 s budget; the kill itself is immediate
    assert wait_until_gone(read_pids(pids, 2), 1.0) == []


def test_a_server_told_to_stop_ends_a_running_exec_at_once(tmp_path):
    """SIGTERM to decirank serve mid-exec: the request ends, the server exits long before the 60 s budget."""
    home = tmp_path / "home"
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    with ArtifactStore(home / "artifacts.db") as store:
        store.put("r/a", "x")
    pids = tmp_path / "pids"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "decirank", "serve", "-m", "lexical", "-p", str(port), "--allow-exec"]
    body = {"refs": ["r/a"], "evaluator": "exec:" + ESCAPES.format(pids=pids) + "sleep 300", "timeout": 60}
    outcome: dict[str, object] = {}
    with subprocess_server(command, url, ready_path="/healthz", env=env) as server, httpx.Client(timeout=90) as client:

        def post() -> None:
            try:
                outcome["response"] = client.post(f"{url}/v1/score_list", json=body)
            except httpx.HTTPError as error:
                outcome["error"] = error

        thread = threading.Thread(target=post)
        thread.start()
        escaped = read_pids(pids, 2, seconds=60)
        signalled = time.monotonic()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        took = time.monotonic() - signalled
        thread.join(timeout=30)
    assert took < 15, took
    assert wait_until_gone(escaped, 1.0) == []
    response = outcome.get("response")
    assert isinstance(response, httpx.Response) and response.status_code == 200, outcome
    assert response.json()["ranked"][0]["verdict"] == "UNKNOWN"


# -- a command that kills or stops its own subreaper --------------------------------------------


@pytest.fixture
def exec_serve(tmp_path):
    """``decirank serve --allow-exec`` as a real process, with a stored artifact ``ex/a``."""
    from tests.server.serving import serving

    home = tmp_path / "home"
    env = {**os.environ, "DECIRANK_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "decirank", "artifacts", "put", "ex/a", "-"], input="x", text=True,
                   env=env, check=True, capture_output=True)  # fmt: skip
    with serving("--model", "lexical", "--allow-exec", home=home) as served:
        yield served.url


def test_a_command_that_kills_its_subreaper_leaves_nothing_running(exec_serve):
    """The issue's reproducer: setsid sleep, then kill -9 $PPID; once the call returns no sleep is left."""
    command = "exec:setsid sleep 3009.25 >/dev/null 2>&1 & sleep 0.3; kill -9 $PPID"
    response = httpx.post(f"{exec_serve}/v1/score_list", json={"refs": ["ex/a"], "evaluator": command}, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["ranked"][0]["verdict"] == "INVALID"
    assert marked("3009.25") == []


def test_a_command_that_stops_its_subreaper_leaves_nothing_running_once_the_budget_ends(exec_serve):
    """SIGSTOP of the subreaper, a setsid child left running: when the 2 s budget ends, both are gone."""
    command = "exec:setsid sleep 3010.25 >/dev/null 2>&1 & sleep 0.3; kill -STOP $PPID; sleep 300"
    body = {"refs": ["ex/a"], "evaluator": command, "timeout": 2}
    started = time.monotonic()
    response = httpx.post(f"{exec_serve}/v1/score_list", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["ranked"][0]["verdict"] == "UNKNOWN"
    assert time.monotonic() - started < 10
    assert marked("3010.25") == []
    # The server is still serving, and its next command runs as usual.
    again = httpx.post(f"{exec_serve}/v1/score_list", json={"refs": ["ex/a"], "evaluator": "exec:true"}, timeout=60)
    assert again.json()["ranked"][0]["verdict"] == "VALID"
