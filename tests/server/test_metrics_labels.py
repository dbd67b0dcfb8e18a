"""``/metrics`` cannot be grown by clients: every label comes from a closed set."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from decirank.server import create_app
from decirank.server.metrics import KNOWN_METHODS, MAX_LABEL_VALUES, OTHER, ServerMetrics
from decirank.decisions.failover import Attempt
from decirank.types.answers import DecisionResponse, LikelihoodAnswer, Usage
from decirank.types.questions import DecisionRequest, LikelihoodQuestion
from tests.loopback import ThreadedServer


def _label_values(text: str, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if label in sample.labels
    }


def test_made_up_methods_are_counted_as_other_and_metrics_stay_small():
    """300 requests with made-up methods (each a 405) add one series, not 300: /metrics stays the same size."""
    with ThreadedServer(create_app("lexical")) as url, httpx.Client(base_url=url) as client:
        client.get("/healthz")
        before = len(client.get("/metrics").content)
        for number in range(300):
            assert client.request(f"X{number}", "/healthz").status_code == 405
        text = client.get("/metrics").text
    assert _label_values(text, "method") <= KNOWN_METHODS | {OTHER}
    assert OTHER in _label_values(text, "method")
    # One new series per metric for method="other" (a counter and a histogram's buckets), whatever the count.
    assert len(text) < before + 4_000, (before, len(text))


def test_paths_are_route_templates_and_unmatched_paths_one_series():
    with ThreadedServer(create_app("lexical")) as url, httpx.Client(base_url=url) as client:
        for number in range(50):
            client.get(f"/no/such/path/{number}")
            client.get(f"/v1/runs/{number:032x}")
        routes = _label_values(client.get("/metrics").text, "route")
    assert "unmatched" in routes and "/v1/runs/{run_id}" in routes
    assert not any(route.startswith("/no/") for route in routes)


def _attempt(model: str) -> Attempt:
    """One answered model call, of a model named by whoever asked."""
    request = DecisionRequest("a state", {"q": LikelihoodQuestion("Is it?")})
    usage = Usage(input_tokens=1, output_tokens=1, cost=0.001, currency=model[-3:])
    response = DecisionResponse(model, {"q": LikelihoodAnswer(0.5)}, usage=usage)
    return Attempt(model, "systemone", 1, request, started=0.0, duration=0.01, status="success", response=response)


def test_model_labels_past_the_limit_are_other():
    """A stream of distinct model names keeps at most MAX_LABEL_VALUES series per label."""
    metrics = ServerMetrics()
    for number in range(MAX_LABEL_VALUES * 3):
        metrics.model_call("rank", _attempt(f"systemone:model-{number:04d}"), cache_on=False)
    text = metrics.render().decode()
    assert len(_label_values(text, "model")) == MAX_LABEL_VALUES + 1
    assert OTHER in _label_values(text, "model")
    assert len(_label_values(text, "currency")) <= MAX_LABEL_VALUES + 1
