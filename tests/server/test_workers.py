"""``decirank serve`` as deployed: worker processes on their cores, back-pressure, graceful shutdown."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import decirank
from decirank.server.workers import ServeOptions
from tests.cli._run import decirank as decirank_cli
from tests.server.serving import SLEEP_REF, request_in_flight, runlog_of, serving, sleep_body, wait_for_runs

RERANK = {"query": "fleas on pets", "documents": ["cats get fleas", "bread baking", "flea treatment for dogs"]}


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _samples(text: str, name: str) -> list:
    return [
        sample for family in text_string_to_metric_families(text) for sample in family.samples if sample.name == name
    ]


@pytest.mark.skipif(_usable_cores() < 2, reason="two workers on their own cores need two cores")
def test_two_workers_each_pinned_to_its_own_core(isolated_user_dir):
    """--workers 2 --threads 1 runs two worker processes under one supervisor, each pinned to a different core."""
    with serving("--model", "lexical", "--workers", "2", "--threads", "1", home=isolated_user_dir) as served:
        workers = served.workers()
        assert len(workers) == 2
        # A worker pins itself as it builds its application, which may be after the port first answers.
        deadline = time.monotonic() + 60
        while True:
            pinned = [os.sched_getaffinity(pid) for pid in workers]
            if all(len(cores) == 1 for cores in pinned) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert all(len(cores) == 1 for cores in pinned) and pinned[0] != pinned[1]


def test_workers_share_one_run_log_and_their_metrics_add_up(isolated_user_dir):
    """Requests spread over two workers all land in one SQLite run log, and /metrics counts every one of them."""
    with serving("--model", "lexical", "--workers", "2", home=isolated_user_dir) as served:
        runlog = runlog_of(isolated_user_dir)
        sent = 0
        # New connections go to whichever worker accepts first; send until both have answered.
        while sent < 400:
            with httpx.Client(base_url=served.url, timeout=30) as client:
                assert client.post("/v1/rerank", json=RERANK).status_code == 200
            sent += 1
            writers = runlog.database.query("SELECT DISTINCT writer FROM runs WHERE kind = 'tool'")
            if sent >= 20 and len(writers) == 2:
                break
        metrics = httpx.get(served.url + "/metrics").text
    assert len(writers) == 2, "both workers answered"
    assert len(runlog.runs(limit=None, tool="rerank", status="success")) == sent
    requests = _samples(metrics, "decirank_http_requests_total")
    counted = {(s.labels["method"], s.labels["route"], s.labels["status"]): s.value for s in requests}
    assert counted[("POST", "/v1/rerank", "200")] == sent
    calls = _samples(metrics, "decirank_model_calls_total")
    assert sum(s.value for s in calls if s.labels["model"] == "lexical:bm25") == sent


def test_past_max_concurrency_a_request_gets_503_at_once_and_leaves_no_run(isolated_user_dir):
    """With --max-concurrency 1 and a request in flight, the next gets 503 and Retry-After, leaving no run."""
    with decirank.ArtifactStore() as store:
        store.put(SLEEP_REF, "anything")
    options = ("--model", "lexical", "--max-concurrency", "1", "--allow-exec")
    with serving(*options, home=isolated_user_dir) as served:
        runlog = runlog_of(isolated_user_dir)
        with request_in_flight(served.url, "/v1/score_list", sleep_body(60)):
            (running,) = wait_for_runs(runlog, 1)
            refused = httpx.post(served.url + "/v1/rerank", json=RERANK, timeout=30)
            # Refused while the slow one still runs: at once, not after waiting for a slot.
            assert [run["status"] for run in runlog.runs(limit=None)] == ["running"]
            for probe in ("/healthz", "/readyz", "/metrics"):
                assert httpx.get(served.url + probe, timeout=30).status_code == 200
            metrics = httpx.get(served.url + "/metrics").text
        # The slow request's client left: its run ends cancelled, and the refused one left none.
        (cancelled,) = wait_for_runs(runlog, 1, status="cancelled")
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "OverloadedError"
    counted = {
        (s.labels["route"], s.labels["status"]): s.value for s in _samples(metrics, "decirank_http_requests_total")
    }
    assert counted[("/v1/rerank", "503")] == 1
    assert [run["id"] for run in runlog.runs(limit=None)] == [running["id"]] == [cancelled["id"]]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_finishes_requests_in_flight_cancels_the_rest_and_exits(isolated_user_dir, workers):
    """On SIGTERM the port closes, requests in flight are answered, and running exec: commands are stopped at once."""
    with decirank.ArtifactStore() as store:
        store.put(SLEEP_REF, "anything")
    options = ("--model", "lexical", "--allow-exec", "--shutdown-timeout", "4", "--workers", workers)
    with serving(*options, home=isolated_user_dir) as served:
        runlog = runlog_of(isolated_user_dir)
        answers: dict[str, httpx.Response | Exception] = {}

        def send(name: str, seconds: float) -> None:
            try:
                answers[name] = httpx.post(served.url + "/v1/score_list", json=sleep_body(seconds), timeout=60)
            except httpx.TransportError as error:
                answers[name] = error

        senders = [threading.Thread(target=send, args=args) for args in (("short", 2), ("long", 60))]
        for sender in senders:
            sender.start()
        wait_for_runs(runlog, 2)
        served.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # The port closes soon after the signal (how soon depends on the machine's load): wait on a probe,
        # which records no run, then a real request must find it closed.
        while True:
            try:
                httpx.get(served.url + "/healthz", timeout=2)
            except httpx.TransportError:
                break
            assert time.monotonic() - signalled < 10, "the port stayed open after SIGTERM"
            time.sleep(0.1)
        with pytest.raises(httpx.TransportError):
            httpx.post(served.url + "/v1/rerank", json=RERANK, timeout=5)
        served.process.wait(timeout=60)
        stopped = time.monotonic() - signalled
        for sender in senders:
            sender.join()
    short, long = answers["short"], answers["long"]
    assert isinstance(short, httpx.Response) and short.status_code == 200, short
    # A running exec: command is stopped as shutdown starts, so its request is answered at once: not judged.
    assert isinstance(long, httpx.Response) and long.status_code == 200, long
    assert long.json()["ranked"][0]["verdict"] == "UNKNOWN"
    statuses = {run["id"]: run["status"] for run in runlog.runs(limit=None)}
    assert statuses[short.json()["run_id"]] == "success"
    assert sorted(statuses.values()) == ["success", "success"]
    assert stopped < 15, "the long request held the server"


@pytest.mark.parametrize(
    ("workers", "threads", "expected"),
    [(0, None, (4, 1)), (2, None, (2, 2)), (1, None, (1, None)), (3, None, (3, 1)), (2, 3, (2, 3))],
)
def test_workers_and_threads_default_to_an_even_share_of_the_cores(workers, threads, expected):
    """--workers 0 is one per core; several workers share the cores evenly; one worker alone is not pinned."""
    options = ServeOptions(model="lexical", workers=workers, threads=threads, cores=(0, 1, 2, 3)).resolved()
    assert (options.workers, options.threads) == expected


def test_more_threads_than_cores_is_refused_naming_the_option(isolated_user_dir):
    """--threads above the cores this process may use is a usage error naming --threads, before anything starts."""
    result = decirank_cli("serve", "--threads", str(_usable_cores() + 1))
    assert result.returncode == 2
    assert "--threads" in result.stderr and "cores this process may use" in result.stderr


def test_a_request_still_running_when_the_shutdown_timeout_ends_is_cancelled(isolated_user_dir):
    """SIGTERM with a model call in flight: past --shutdown-timeout it is cancelled, its run recorded cancelled."""
    documents = [f"document {i}: " + "fleas live on cats and dogs and bite people " * 20 for i in range(600)]
    options = ("--model", "local", "--shutdown-timeout", "0.5")
    with serving(*options, home=isolated_user_dir) as served:
        runlog = runlog_of(isolated_user_dir)
        answers: list[httpx.Response | Exception] = []

        def send() -> None:
            try:
                body = {"query": "how long do fleas live", "documents": documents, "timeout": 120}
                answers.append(httpx.post(served.url + "/v1/rerank", json=body, timeout=120))
            except httpx.TransportError as error:
                answers.append(error)

        sender = threading.Thread(target=send)
        sender.start()
        wait_for_runs(runlog, 1)
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=60)
        sender.join(timeout=60)
    assert not isinstance(answers[0], httpx.Response) or answers[0].status_code >= 500
    assert [run["status"] for run in runlog.runs(limit=None)] == ["cancelled"]
