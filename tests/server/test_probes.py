"""``/readyz`` and ``/metrics``: what a load balancer and a Prometheus scraper ask of the server."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from decirank.server import create_app
from decirank.server.metrics import CONTENT_TYPE
from tests.loopback import ThreadedServer, free_port
from tests.server.serving import serving, wait_ready

#: TestClient calls itself "testserver", a Host a loopback server refuses.
LOOPBACK = "http://127.0.0.1"
RERANK = {"query": "fleas on pets", "documents": ["cats get fleas", "bread baking", "flea treatment for dogs"]}


def _values(text: str, name: str) -> dict[tuple, float]:
    """Each sample of ``name`` by its labels (sorted pairs)."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def test_readyz_is_503_until_start_up_has_loaded_the_models():
    """Before the application's start-up has run /readyz is 503 saying the model is not loaded; after, 200."""
    application = create_app("local")
    before = TestClient(application, base_url=LOOPBACK).get("/readyz")  # no start-up: the lifespan has not run
    assert before.status_code == 503
    assert before.json()["model_loaded"] is False and before.json()["status"] == "not ready"
    with TestClient(application, base_url=LOOPBACK) as client:
        after = client.get("/readyz")
    assert after.status_code == 200
    assert after.json() == {**after.json(), "status": "ready", "model_loaded": True, "runlog": "writable"}


def test_a_served_port_is_ready_from_its_first_answer():
    """decirank serve loads the embedded model before its port answers, so its very first /readyz is 200."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "decirank", "serve", "--port", str(port), "--model", "local"]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as process:
        try:
            first = wait_ready(url, process)
            assert first.status_code == 200 and first.json()["model_loaded"] is True
            assert httpx.get(url + "/healthz").json()["status"] == "ok"
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_metrics_count_requests_model_calls_tokens_cache_and_batch_rows(monkeypatch):
    """/metrics parses as Prometheus text and counts each request, model call, token, cache hit and miss, batch row."""
    monkeypatch.setenv("DECIRANK_CACHE", "on")
    with ThreadedServer(create_app("lexical")) as url:
        for _ in range(3):  # the same question thrice: one miss, then two hits
            assert httpx.post(url + "/v1/rerank", json=RERANK).status_code == 200
        assert httpx.post(url + "/v1/rerank", json={"query": ""}).status_code == 422
        assert httpx.get(url + "/v1/runs/no-such-run").status_code == 404
        text = httpx.get(url + "/metrics").text
    requests = _values(text, "decirank_http_requests_total")
    assert requests[(("method", "POST"), ("route", "/v1/rerank"), ("status", "200"))] == 3
    assert requests[(("method", "POST"), ("route", "/v1/rerank"), ("status", "422"))] == 1
    # The route's template, never the raw path: ids do not multiply the series.
    assert requests[(("method", "GET"), ("route", "/v1/runs/{run_id}"), ("status", "404"))] == 1
    latency = _values(text, "decirank_http_request_duration_seconds_count")
    assert latency[(("method", "POST"), ("route", "/v1/rerank"))] == 4
    calls = _values(text, "decirank_model_calls_total")
    assert calls == {(("model", "lexical:bm25"), ("provider", "lexical"), ("status", "success")): 3}
    assert _values(text, "decirank_decision_cache_lookups_total") == {(("result", "hit"),): 2, (("result", "miss"),): 1}
    # Only the call the model ran counts its rows and tokens; hits did no work.
    assert _values(text, "decirank_model_call_questions_sum") == {(("model", "lexical:bm25"),): 3}
    tokens = _values(text, "decirank_model_tokens_total")
    assert tokens[(("kind", "input"), ("model", "lexical:bm25"))] > 0
    assert _values(text, "decirank_model_cost_total") == {(("currency", "USD"), ("model", "lexical:bm25")): 0.0}
    assert _values(text, "decirank_model_call_duration_seconds_count") == {(("model", "lexical:bm25"),): 1}
    assert _values(text, "decirank_http_requests_in_flight") == {(): 1.0}  # the scrape itself


@pytest.mark.parametrize(("public", "expected"), [(False, 401), (True, 200)])
def test_metrics_want_the_api_key_unless_made_public(public, expected):
    """With --api-key, /metrics wants the key unless --metrics-public; /readyz and /healthz stay open."""
    with ThreadedServer(create_app("lexical", api_key="s3cret", metrics_public=public)) as url:
        assert httpx.get(url + "/metrics").status_code == expected
        keyed = httpx.get(url + "/metrics", headers={"authorization": "Bearer s3cret"})
        assert keyed.status_code == 200 and keyed.headers["content-type"].startswith("text/plain")
        assert httpx.get(url + "/healthz").status_code == 200
        assert httpx.get(url + "/readyz").status_code != 401


def test_the_api_schema_lists_the_probes_and_metrics():
    """/openapi.json documents /readyz (200 and 503) and /metrics (the Prometheus text)."""
    schema = TestClient(create_app("lexical"), base_url=LOOPBACK).get("/openapi.json").json()
    assert set(schema["paths"]["/readyz"]["get"]["responses"]) >= {"200", "503"}
    assert list(schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == [CONTENT_TYPE]


def test_the_served_metrics_need_the_key_of_a_real_process(isolated_user_dir):
    """A decirank serve process with --api-key refuses /metrics without the key and serves it with the key."""
    with serving("--model", "lexical", "--api-key", "k3y", home=isolated_user_dir) as served:
        assert httpx.get(served.url + "/metrics").status_code == 401
        text = httpx.get(served.url + "/metrics", headers={"authorization": "Bearer k3y"}).text
    assert (
        _values(text, "decirank_http_requests_total")[(("method", "GET"), ("route", "/metrics"), ("status", "401"))]
        == 1
    )


def test_readyz_names_the_worker_pid_only_to_a_request_with_the_api_key(tmp_path):
    """decirank serve --api-key: /readyz is 200 to everyone, and says which process answered only with the key;
    a server without a key never says it."""
    with serving("--model", "lexical", "--api-key", "s3cret", home=tmp_path / "keyed") as served:
        anonymous = httpx.get(served.url + "/readyz")
        wrong = httpx.get(served.url + "/readyz", headers={"authorization": "Bearer nope"})
        keyed = httpx.get(served.url + "/readyz", headers={"authorization": "Bearer s3cret"})
        assert (anonymous.status_code, wrong.status_code, keyed.status_code) == (200, 200, 200)
        assert anonymous.json()["status"] == "ready" and "pid" not in anonymous.json()
        assert "pid" not in wrong.json()
        assert keyed.json()["pid"] == served.process.pid
    with serving("--model", "lexical", home=tmp_path / "open") as served:
        body = httpx.get(served.url + "/readyz").json()
        assert body["status"] == "ready" and "pid" not in body
