"""The OpenAPI document and the server agree: what the schema allows is answered, what it refuses is refused."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.server import create_app
from tests.loopback import ThreadedServer

RANK = {"items": ["fleas", "tax"], "instructions": "Which is about pets?", "state": None}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DECIRANK_HOME", str(tmp_path_factory.mktemp("home")))
        with ThreadedServer(create_app("lexical")) as url:
            yield url, httpx.get(f"{url}/openapi.json").json()


def _property(document, schema, name):
    return document["components"]["schemas"][schema]["properties"][name]


def test_values_the_server_refuses_are_outside_the_schema(served):
    """top_k 0 on rank, options [], examples "", status '' and max_concurrency 0: the schema refuses them too."""
    url, document = served
    assert {"type": "integer", "minimum": 1} in [
        {key: value for key, value in part.items()} for part in _property(document, "RankRequest", "top_k")["anyOf"]
    ]
    assert httpx.post(f"{url}/v1/rank", json={**RANK, "top_k": 0}).status_code == 422
    options = _property(document, "ClassifyRequest", "options")["anyOf"]
    assert [part.get("minItems", part.get("minProperties")) for part in options] == [1, 1]
    body = {"texts": ["a"], "question": "q", "options": []}
    assert httpx.post(f"{url}/v1/classify", json=body).status_code == 422
    names = [part for part in _property(document, "ScoreRequest", "examples")["anyOf"] if part.get("type") == "string"]
    assert names and names[0]["minLength"] == 1
    assert httpx.post(f"{url}/v1/score", json={"texts": ["a"], "question": "q", "examples": ""}).status_code == 422
    status = next(p for p in document["paths"]["/v1/runs"]["get"]["parameters"] if p["name"] == "status")
    assert "" not in status["schema"]["anyOf"][0]["enum"]
    assert httpx.get(f"{url}/v1/runs", params={"status": ""}).status_code == 422
    assert httpx.get(f"{url}/v1/runs", params={"status": "failed"}).status_code == 200
    assert _property(document, "ScoreListRequest", "max_concurrency")["minimum"] == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/rank", {**RANK, "top_k": 1.0}),
        ("/v1/rerank", {"query": "fleas", "documents": ["fleas", "tax"], "top_n": 1.0}),
        ("/v1/filter", {"items": ["fleas"], "question": "pets?", "max_items_per_call": 2.0}),
        ("/v1/score_list", {"refs": ["r/a"], "evaluator": "validate:json", "top_k": 1.0, "max_concurrency": 2.0}),
    ],
)
def test_integral_floats_for_integer_fields_are_answered(served, path, body):
    """JSON Schema's integer includes 1.0: the server answers it as 1 (and still refuses 1.5 and true)."""
    url, _ = served
    assert httpx.post(f"{url}{path}", json=body).status_code == 200
    field = next(key for key, value in body.items() if isinstance(value, float))
    assert httpx.post(f"{url}{path}", json={**body, field: 1.5}).status_code == 422
    assert httpx.post(f"{url}{path}", json={**body, field: True}).status_code == 422


def test_the_tools_take_integral_floats_as_the_schemas_integers(store):
    """Through the Python API (and so MCP), max_concurrency=2.0 and top_k=1.0 are 2 and 1."""
    store.put("r/a", "{}")
    result = decirank.score_list(["r/a"], "validate:json", top_k=1.0, max_concurrency=2.0, store=store)
    assert result.top_k == 1 and result.ranked[0].verdict == decirank.Verdict.VALID


def test_calibration_fields_are_in_the_schema_and_refused_outside_it(served):
    """The targets and coverage lie strictly between 0 and 1, and calibrate's tool is one of four, in the schema
    and on the server; the responses document the keys a calibration adds, so none is dropped."""
    url, document = served
    for schema, name in (
        ("FilterRequest", "target_recall"),
        ("FilterRequest", "confidence"),
        ("ClassifyRequest", "coverage"),
    ):
        (number,) = [part for part in _property(document, schema, name)["anyOf"] if part.get("type") == "number"]
        assert number["exclusiveMinimum"] == 0 and number["exclusiveMaximum"] == 1
    assert httpx.post(f"{url}/v1/filter", json={"items": ["a"], "question": "q", "target_recall": 1}).status_code == 422
    assert _property(document, "CalibrateRequest", "tool")["enum"] == ["filter", "score", "rerank", "classify"]
    refused = httpx.post(f"{url}/v1/calibrate", json={"name": "x", "question": "q", "tool": "rank", "rows": []})
    assert refused.status_code == 422
    assert {"promise", "calibration"} <= set(document["components"]["schemas"]["FilterResponse"]["properties"])
    # The responses are the tools' result models, whose parts keep their own names.
    assert "raw_probability" in document["components"]["schemas"]["FilterDecisionOut"]["properties"]
    assert {"raw_probabilities", "calibration"} <= set(document["components"]["schemas"]["ScoreResponse"]["properties"])
    decision = document["components"]["schemas"]["ClassifyDecisionOut"]
    assert {"prediction_set", "none_fits"} <= set(decision["properties"])
    assert {"/v1/calibrate", "/v1/calibrations", "/v1/calibrations/{name}"} <= set(document["paths"])
    assert set(document["paths"]["/v1/calibrations/{name}"]) == {"get", "delete"}
