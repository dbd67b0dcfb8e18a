"""decirank serve on loopback: the tool endpoints, the two decision formats, and every guard."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.errors import ServerError
from decirank.server import create_app
from decirank.testing import ScriptedBackend, use_backend
from tests.loopback import ThreadedServer

DOCUMENTS = [
    "bread baking at home",
    "flea treatment for dogs",
    {"id": "doc-x", "text": "cats get fleas too", "lang": "en"},
]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DECIRANK_HOME", str(tmp_path_factory.mktemp("home")))
        app = create_app("lexical", max_body_bytes=20_000)
    with ThreadedServer(app) as served:
        yield served


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=10) as http:
        yield http


def test_health_and_docs_need_no_key(client):
    """/healthz names the version and the model, and the OpenAPI docs list every endpoint, without a key."""
    assert client.get("/healthz").json() == {"status": "ok", "version": decirank.__version__, "model": "lexical"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/rank", "/v1/rerank", "/v1/filter", "/v1/classify", "/v1/score", "/v1/score_list", "/v1/systemone",
        "/v1/decisions", "/v1/runs", "/healthz",
    } <= set(paths)
    assert client.get("/docs").status_code == 404  # Swagger UI loads its scripts from a CDN: not served


def test_rank_takes_and_gives_the_documented_shape(client):
    """/v1/rank takes builtin__rank's documented input and answers with its output shape."""
    body = {
        "items": [{"title": "bread"}, {"title": "fleas on dogs"}, {"title": "cars"}],
        "instructions": "Which is about fleas?",
        "state": {"question": "fleas"},
        "describe": "title",
        "none": "none of these",
        "top_k": 2,
    }
    data = client.post("/v1/rank", json=body).json()
    assert data["items"][0] == {"title": "fleas on dogs"}
    assert len(data["items"]) == len(data["ranked"]) == 2
    assert data["ranked"][0]["index"] == 1
    assert isinstance(data["none"], float) and data["no_fit"] is False
    assert data["model"] == "lexical:bm25" and data["run_id"]


def test_rerank_speaks_cohere(client):
    """/v1/rerank answers Cohere's shape: results by index, best first, cut to top_n, with token counts in meta."""
    response = client.post("/v1/rerank", json={"query": "fleas", "documents": DOCUMENTS, "top_n": 2})
    data = response.json()
    assert [r["index"] for r in data["results"]] == [2, 1] or [r["index"] for r in data["results"]] == [1, 2]
    assert all("document" not in r for r in data["results"]), "documents come back only when asked"
    assert data["id"] and data["meta"]["api_version"] == {"version": "1"}
    assert data["meta"]["tokens"]["input_tokens"] > 0
    scores = [r["relevance_score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)


def test_rerank_returns_documents_as_cohere_does(client):
    """With return_documents, a text comes back as {text} and an object document as it was sent."""
    data = client.post("/v1/rerank", json={"query": "bread", "documents": DOCUMENTS, "return_documents": True}).json()
    by_index = {r["index"]: r["document"] for r in data["results"]}
    assert by_index[0] == {"text": "bread baking at home"}
    assert by_index[2] == DOCUMENTS[2], "an object document comes back as it was sent"
    assert data["results"][0]["index"] == 0


def test_filter_keeps_what_is_likely_enough(client):
    """/v1/filter keeps the items at min_confidence or more and lists the rest as dropped."""
    body = {"items": ["fleas on dogs", "bread"], "question": "Is it about fleas?", "state": "fleas"}
    probabilities = [d["probability"] for d in client.post("/v1/filter", json=body).json()["decisions"]]
    assert probabilities[0] > 0.5 > probabilities[1]
    data = client.post("/v1/filter", json={**body, "min_confidence": sum(probabilities) / 2}).json()
    assert data["items"] == ["fleas on dogs"] and data["dropped"] == ["bread"]
    assert data["count"] == 1 and data["dropped_count"] == 1


def test_rank_and_filter_need_no_state(client):
    """state is optional: a body without one is ranked and filtered as with an empty context."""
    items = ["fleas on dogs", "bread"]
    ranked = client.post("/v1/rank", json={"items": items, "instructions": "Which is about fleas?"})
    assert ranked.status_code == 200 and ranked.json()["items"][0] == "fleas on dogs"
    kept = client.post("/v1/filter", json={"items": items, "question": "Is it about fleas?", "model": "local"})
    assert kept.status_code == 200
    probabilities = [decision["probability"] for decision in kept.json()["decisions"]]
    assert probabilities[0] > 0.5 > probabilities[1]


def test_classify_and_score_take_their_documented_shapes(client):
    """/v1/classify and /v1/score answer per text, with none, true/false and examples as in Python."""
    texts = ["my dog has fleas", "bake bread at home"]
    body = {"texts": texts, "question": "Which topic?", "options": {"pets": "dogs and fleas", "food": "bread"}}
    classified = client.post("/v1/classify", json={**body, "none": "something else"}).json()
    assert [d["index"] for d in classified["decisions"]] == [0, 1]
    assert [d["choice"] for d in classified["decisions"]] == ["pets", "food"]
    assert set(classified["decisions"][0]["probabilities"]) == {"pets", "food", "something else"}  # none as the caller wrote it
    assert classified["model"] == "lexical:bm25" and classified["run_id"] and classified["usage"]["calls"] == 2

    examples = [{"state": "cats get fleas", "answer": True}, {"state": "a loaf of bread", "answer": False}]
    scored = client.post(
        "/v1/score",
        json={"texts": texts, "question": "Is this about fleas?", "true": "about fleas", "examples": examples},
    ).json()
    assert len(scored["probabilities"]) == 2 and scored["probabilities"][0] > scored["probabilities"][1]
    assert scored["run_id"] and client.get(f"/v1/runs/{scored['run_id']}").json()["tool"] == "score"


SYSTEMONE_QUESTIONS = {
    "fleas": {"type": "noul", "instructions": "The note is about fleas."},
    "topic": {"type": "choice", "instructions": "Which topic?", "criteria": {"pets": "animals", "cars": "vehicles"}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "medium", "high"]},
}


@pytest.mark.parametrize("model", [None, "jev-latest", "lexical", "lexical:bm25"])
def test_systemone_answers_any_client_with_the_models_it_runs(client, model):
    """/v1/systemone answers every question type with the server's model, whatever hosted model the client names."""
    body = {"state": {"note": "my dog has fleas"}, "questions": SYSTEMONE_QUESTIONS}
    if model:
        body["model"] = model
    data = client.post("/v1/systemone", json=body).json()
    assert data["model"] == "lexical:bm25"
    assert data["answers"]["fleas"]["type"] == "noul" and 0 <= data["answers"]["fleas"]["noul"] <= 1
    assert data["answers"]["topic"]["choice"] in {"pets", "cars"}
    assert set(data["answers"]["urgency"]["probabilities"]) == {"0", "1", "2"}
    assert data["answers"]["urgency"]["legend"] == {"0": "low", "1": "medium", "2": "high"}
    assert set(data["usage"]) >= {"input_tokens", "output_tokens"}


def test_a_decision_names_its_run_and_calls_in_headers(client):
    """/v1/systemone and /v1/decisions keep their wire bodies and name their run and model calls in headers."""
    body = {"state": "my dog has fleas", "questions": {"fleas": SYSTEMONE_QUESTIONS["fleas"]}}
    answered = client.post("/v1/systemone", json=body)
    run = client.get(f"/v1/runs/{answered.headers['x-decirank-run-id']}").json()
    assert run["tool"] == "systemone" and answered.headers["x-decirank-calls"] == "1" == str(run["calls"])
    decided = client.post(
        "/v1/decisions", json={"model": "m", "input": "x", "questions": [{"type": "predicate", "instructions": "y"}]}
    )
    assert client.get(f"/v1/runs/{decided.headers['x-decirank-run-id']}").json()["tool"] == "decisions"


def test_decisions_answer_in_question_order_with_names_as_given(client):
    """/v1/decisions answers in question order, each with the name it was asked with (or none)."""
    body = {
        "model": "gpt-6-luna",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "my dog has fleas"}]}],
        "questions": [
            {"type": "predicate", "name": "fleas", "instructions": "The note is about fleas."},
            {"type": "choice", "instructions": "Which topic?", "choices": [{"value": "pets"}, {"value": "cars"}]},
            {"type": "score", "instructions": "How urgent?", "levels": [{"label": "low"}, {"label": "high"}]},
        ],
    }
    data = client.post("/v1/decisions", json=body).json()
    assert [(a["type"], a["name"]) for a in data["answers"]] == [
        ("predicate", "fleas"),
        ("choice", None),
        ("score", None),
    ]
    assert [p["label"] for p in data["answers"][2]["probabilities"]] == ["low", "high"]
    assert data["usage"]["total_tokens"] == data["usage"]["input_tokens"] + data["usage"]["output_tokens"]


def test_runs_lists_the_calls_the_server_made(client):
    """/v1/runs lists the server's tool runs; one run is found by id prefix, an unknown one is a 404."""
    made = client.post("/v1/rank", json={"items": ["a", "b"], "instructions": "Which?", "state": "a"}).json()
    listed = client.get("/v1/runs", params={"tool": "rank"}).json()
    assert listed["enabled"] and made["run_id"] in [run["id"] for run in listed["runs"]]
    run = client.get(f"/v1/runs/{made['run_id'][:12]}").json()
    assert run["id"] == made["run_id"] and run["children"][0]["model"] == "lexical:bm25"
    assert client.get("/v1/runs/ffffffffffff").status_code == 404
    assert client.get("/v1/runs", params={"status": "sideways"}).status_code == 422


# --- bad input is a 422 naming the field, never a 500 ------------------------------------------

BAD_BODIES = [
    ("/v1/rank", {"items": ["a"], "state": 1}, ["body", "instructions"]),
    ("/v1/rank", {"items": ["a", "b"], "instructions": " ", "state": 1}, ["body", "instructions"]),
    ("/v1/rank", {"items": "not a list", "instructions": "Which?", "state": 1}, ["body", "items"]),
    (
        "/v1/rank",
        {"items": [{"a": 1}, {"b": 2}], "instructions": "Which?", "state": 1, "describe": "a"},
        ["body", "describe"],
    ),
    ("/v1/rank", {"items": ["a", "b"], "instructions": "Which?", "state": 1, "model": "lexicl"}, ["body", "model"]),
    (
        "/v1/rank",
        {"items": ["a", "b"], "instructions": "Which?", "state": 1, "model": "typesafe:jev-latest"},
        ["body", "model"],
    ),
    ("/v1/rerank", {"query": "", "documents": ["a"]}, ["body", "query"]),
    ("/v1/rerank", {"query": "q", "documents": [{"title": "no text"}]}, ["body", "documents", 0]),
    ("/v1/rerank", {"query": "q", "documents": ["a"], "top_n": -1}, ["body", "top_n"]),
    ("/v1/filter", {"items": ["a"], "question": "Q?", "state": 1, "min_confidence": 2}, ["body", "min_confidence"]),
    ("/v1/classify", {"texts": ["a"], "question": "Which?", "options": ["only"]}, ["body", "options"]),
    ("/v1/classify", {"texts": ["a"], "question": "Which?"}, ["body", "options"]),
    ("/v1/classify", {"texts": ["a"], "question": "Which?", "options": ["a", "b"], "none": ""}, ["body", "none"]),
    ("/v1/score", {"texts": "a", "question": "Is it?"}, ["body", "texts"]),
    ("/v1/score", {"texts": ["a"], "question": " "}, ["body", "question"]),
    ("/v1/score", {"texts": ["a"], "question": "Is it?", "examples": "no-such-set"}, ["body", "examples"]),
    ("/v1/systemone", {"state": 1, "questions": {}}, ["body", "questions"]),
    (
        "/v1/systemone",
        {"state": 1, "questions": {"q": {"type": "box", "instructions": "x"}}},
        ["body", "questions", "q"],
    ),
    (
        "/v1/systemone",
        {"state": 1, "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": "only"}}}},
        ["body", "questions", "q", "choice", "criteria"],
    ),
    (
        "/v1/systemone",
        {"state": 1, "questions": {"q": {"type": "noul", "instructions": ""}}},
        ["body", "questions", "q", "instructions"],
    ),
    (
        "/v1/decisions",
        {
            "model": "m",
            "input": "x",
            "questions": [
                {"type": "predicate", "name": "a", "instructions": "x"},
                {"type": "predicate", "name": "a", "instructions": "y"},
            ],
        },
        ["body", "questions"],
    ),
    (
        "/v1/decisions",
        {
            "model": "m",
            "input": [{"role": "user", "content": [{"type": "input_image"}]}],
            "questions": [{"type": "predicate", "instructions": "x"}],
        },
        ["body", "input", 0, "content", 0],
    ),
]


@pytest.mark.parametrize(("path", "body", "location"), BAD_BODIES)
def test_bad_input_is_a_422_naming_the_field(client, path, body, location):
    """Each malformed or meaningless body is a 422 whose detail locates the field."""
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    locations = [item["loc"] for item in response.json()["detail"]]
    assert any(loc[: len(location)] == location for loc in locations), locations


def test_a_body_that_is_not_json_is_a_422(client):
    """A body that does not parse as JSON is a 422, not a 500."""
    response = client.post("/v1/rank", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422


def test_a_body_over_the_limit_is_a_413_declared_or_streamed(client):
    """A body over the limit is a 413, whether its length is declared or it arrives in chunks."""
    big = {"query": "q", "documents": ["x" * 1000] * 30}
    assert client.post("/v1/rerank", json=big).status_code == 413

    def chunks():
        for _ in range(30):
            yield b"x" * 1000

    response = client.post("/v1/rerank", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "TooLargeError"


def test_score_list_ranks_artifacts_of_the_servers_store(client):
    """/v1/score_list resolves refs server-side and refuses exec: evaluators unless allowed."""
    with decirank.ArtifactStore() as store:
        store.put("run9/good", '{"ok": true}')
        store.put("run9/bad", "{nope")
    body = {"refs": ["run9/bad", "run9/good"], "evaluator": "validate:json", "top_k": 1}
    data = client.post("/v1/score_list", json=body).json()
    assert data["winners"] == ["run9/good"]
    assert [entry["verdict"] for entry in data["ranked"]] == ["VALID", "INVALID"]
    refused = client.post("/v1/score_list", json={**body, "evaluator": "exec:true"})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "evaluator"


def test_an_operator_may_allow_exec_evaluators():
    """A server created with allow_exec runs exec: evaluators over its stored artifacts."""
    with decirank.ArtifactStore() as store:
        store.put("run9/good", '{"ok": true}')
    with ThreadedServer(create_app("lexical", allow_exec=True)) as url:
        body = {"refs": ["run9/good"], "evaluator": "exec:python -m json.tool {artifact}"}
        data = httpx.post(f"{url}/v1/score_list", json=body, timeout=30).json()
    assert data["ranked"][0]["verdict"] == "VALID"


# --- keys, and decisions that could not be had --------------------------------------------------


def test_an_api_key_guards_every_v1_endpoint():
    """With an API key, /v1 wants that Bearer key (401 otherwise) while /healthz stays open."""
    with ThreadedServer(create_app("lexical", api_key="s3cret")) as url:
        body = {"items": ["a", "b"], "instructions": "Which?", "state": 1}
        assert httpx.post(f"{url}/v1/rank", json=body).status_code == 401
        wrong = httpx.post(f"{url}/v1/rank", json=body, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
        assert httpx.post(f"{url}/v1/rank", json=body, headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_failed_model_is_a_502_with_the_typed_error():
    """A model that fails makes a 502 carrying the typed error, never an invented score."""
    failing = ScriptedBackend("down", error=ServerError("upstream is down", model="scripted:down", status=503))
    with use_backend(failing) as model, ThreadedServer(create_app(model)) as url:
        response = httpx.post(f"{url}/v1/rerank", json={"query": "q", "documents": ["a"]})
    assert response.status_code == 502
    assert response.json()["error"] == {
        "type": "ServerError",
        "message": "scripted:down: upstream is down",
        "model": "scripted:down",
        "status": 503,
    }


def test_a_spent_budget_is_a_504():
    """A request whose time budget runs out is a 504 with DecisionTimeoutError."""
    slow = ScriptedBackend("slow", delay=2.0)
    with use_backend(slow) as model, ThreadedServer(create_app(model)) as url:
        response = httpx.post(f"{url}/v1/rerank", json={"query": "q", "documents": ["a"], "timeout": 0.2})
    assert response.status_code == 504
    assert response.json()["error"]["type"] == "DecisionTimeoutError"
