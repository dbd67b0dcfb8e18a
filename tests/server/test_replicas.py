"""Two ``decirank serve`` replicas on one PostgreSQL run log behave as one service."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import decirank
from decirank.stores.runlog import RunLog
from tests.server.serving import SLEEP_REF, request_in_flight, serving, sleep_body

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")

OPTIONS = ("--model", "lexical", "--allow-exec")


def _rerank(n: int) -> dict:
    """A rerank request whose query is new each time, so no two runs are alike."""
    return {"query": f"fleas on pets {n}", "documents": ["cats get fleas", "bread baking", f"flea treatment {n}"]}


def test_a_run_written_by_one_replica_is_read_from_the_other(database_url, isolated_user_dir):
    """A rerank answered by one replica is listed and shown, with its model call, by the other."""
    with serving(*OPTIONS, home=isolated_user_dir) as first, serving(*OPTIONS, home=isolated_user_dir) as second:
        run_id = httpx.post(first.url + "/v1/rerank", json=_rerank(0), timeout=30).json()["id"]
        shown = httpx.get(f"{second.url}/v1/runs/{run_id}", timeout=30)
        listed = httpx.get(second.url + "/v1/runs", timeout=30).json()
    assert shown.status_code == 200
    assert shown.json()["status"] == "success" and shown.json()["children"][0]["model"] == "lexical:bm25"
    assert [run["id"] for run in listed["runs"]] == [run_id]


def test_concurrent_load_on_two_replicas_loses_no_run(database_url, isolated_user_dir):
    """100 requests from 8 clients spread over two replicas: each acknowledged run is in the log, successful."""
    with serving(*OPTIONS, home=isolated_user_dir) as first, serving(*OPTIONS, home=isolated_user_dir) as second:
        urls = itertools.cycle([first.url, second.url])
        jobs = [(next(urls), n) for n in range(100)]

        def send(job: tuple[str, int]) -> str:
            url, n = job
            response = httpx.post(url + "/v1/rerank", json=_rerank(n), timeout=60)
            assert response.status_code == 200, response.text
            return response.json()["id"]

        with ThreadPoolExecutor(8) as pool:
            acknowledged = list(pool.map(send, jobs))
    runlog = RunLog.open(database_url)
    statuses = {run["id"]: run["status"] for run in runlog.runs(limit=None)}
    assert len(set(acknowledged)) == 100
    assert {statuses.get(run_id) for run_id in acknowledged} == {"success"}
    assert len(statuses) == 100


def test_a_replica_killed_under_load_loses_no_acknowledged_run_and_its_open_runs_are_interrupted(
    database_url, isolated_user_dir
):
    """kill -9 of a replica under load: every acknowledged run is kept, the other serves on, and its open runs
    are marked interrupted when a replica next opens the log."""
    with decirank.ArtifactStore() as store:
        store.put(SLEEP_REF, "anything")
    runlog = RunLog.open(database_url)
    with serving(*OPTIONS, home=isolated_user_dir) as doomed, serving(*OPTIONS, home=isolated_user_dir) as survivor:
        acknowledged: list[str] = []
        refused: dict[str, list[str]] = {doomed.url: [], survivor.url: []}
        stop = threading.Event()

        def load(url: str, client_number: int) -> None:
            for n in itertools.count():
                if stop.is_set():
                    return
                try:
                    response = httpx.post(url + "/v1/rerank", json=_rerank(client_number * 100_000 + n), timeout=30)
                except httpx.TransportError as error:
                    refused[url].append(type(error).__name__)
                    stop.wait(0.05)
                    continue
                if response.status_code == 200:
                    acknowledged.append(response.json()["id"])
                else:
                    refused[url].append(response.text)

        clients = [
            threading.Thread(target=load, args=(url, number))
            for number, url in enumerate([doomed.url, survivor.url] * 2)
        ]
        for client in clients:
            client.start()
        try:
            with request_in_flight(doomed.url, "/v1/score_list", sleep_body(20)):
                # Its opening row is committed with the next runs' commit.
                _wait_until(lambda: runlog.runs(limit=None, status="running", tool="score_list"))
                _wait_until(lambda: len(acknowledged) >= 40)
                os.killpg(doomed.process.pid, signal.SIGKILL)
                doomed.process.wait()
                served_before = len(acknowledged)
                _wait_until(lambda: len(acknowledged) >= served_before + 20)  # the survivor answers on
        finally:
            stop.set()
            for client in clients:
                client.join()
        assert refused[survivor.url] == []
        statuses = {run["id"]: run["status"] for run in runlog.runs(limit=None)}
        assert {statuses.get(run_id) for run_id in acknowledged} == {"success"}, "an acknowledged run was lost"
        (open_run,) = runlog.runs(limit=None, tool="score_list")
        assert open_run["status"] == "running"
        # The killed replica comes back: opening the log closes the runs its predecessor left open.
        with serving(*OPTIONS, home=isolated_user_dir):
            interrupted = runlog.run(open_run["id"])
    assert interrupted["status"] == "interrupted" and interrupted["error_type"] == "Interrupted"


def _wait_until(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_readyz_is_503_while_the_run_log_cannot_be_written(database_url, postgres_server, isolated_user_dir):
    """While the database refuses writes /readyz is 503 naming the run log (/healthz stays 200), and 200 again after."""
    database = database_url.rsplit("/", 1)[1]

    def reconfigure(setting: str) -> None:
        """Change the database's sessions, and cut the server's connection so its next one has the change."""
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {database} {setting}")
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )

    with serving(*OPTIONS, home=isolated_user_dir) as served:
        assert httpx.get(served.url + "/readyz").json()["runlog"] == "writable"
        reconfigure("SET default_transaction_read_only = on")
        refused = httpx.get(served.url + "/readyz", timeout=30)
        assert httpx.get(served.url + "/healthz").status_code == 200
        reconfigure("RESET default_transaction_read_only")
        recovered = httpx.get(served.url + "/readyz", timeout=30)
    assert refused.status_code == 503
    assert refused.json()["status"] == "not ready" and refused.json()["runlog"].startswith("not writable: run log")
    assert "read-only" in refused.json()["runlog"]
    assert recovered.status_code == 200 and recovered.json()["runlog"] == "writable"
