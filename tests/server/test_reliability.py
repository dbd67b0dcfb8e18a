"""decirank serve under input it cannot answer: always a 4xx naming the problem, never a 500 or a dropped connection.

Also: the statuses in the OpenAPI document are the ones the server answers
with, a 504 says what ran out and whose limit it was, and a request's work
(exec: commands included) ends with its budget or with its client.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

import decirank
from decirank.server import create_app
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.limits import ModelLimits
from tests.loopback import ThreadedServer
from tests.processes import is_running, wait_until_gone

RANK = {"items": ["a", "b"], "instructions": "Which?", "state": "a"}
RERANK = {"query": "fleas", "documents": ["flea treatment", "bread"]}
NOUL = {"type": "noul", "instructions": "The note is about fleas."}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DECIRANK_HOME", str(tmp_path_factory.mktemp("home")))
        app = create_app("lexical")
    with ThreadedServer(app) as served:
        yield served


@pytest.fixture
def client(url):
    """One keep-alive connection, so a test sees whether a bad request broke it for the next one."""
    with httpx.Client(base_url=url, timeout=10, limits=httpx.Limits(max_connections=1)) as http:
        yield http


def post_raw(client: httpx.Client, path: str, text: str) -> httpx.Response:
    """POST ``text`` as it is written, so it may hold NaN or a lone surrogate escape such as \\ud800."""
    return client.post(path, content=text.encode("utf-8"), headers={"content-type": "application/json"})


def assert_422_at(response: httpx.Response, location: list) -> dict:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["detail"][0]["loc"] == location, body
    assert body["error"]["type"] == "InvalidInputError"
    assert body["error"]["field"] == ".".join(str(part) for part in location[1:])
    return body


def assert_connection_still_serves(client: httpx.Client) -> None:
    assert client.post("/v1/rerank", json=RERANK).status_code == 200


NON_FINITE = [
    ("/v1/rerank", '{"query": "q", "documents": ["a"], "timeout": NaN}', ["body", "timeout"]),
    ("/v1/rerank", '{"query": "q", "documents": ["a"], "top_n": Infinity}', ["body", "top_n"]),
    ("/v1/rank", '{"items": ["a", "b"], "instructions": "x", "state": 1, "top_k": -Infinity}', ["body", "top_k"]),
    ("/v1/filter", '{"items": [1], "question": "q", "state": {"n": [1, 1e999]}}', ["body", "state", "n", 1]),
    ("/v1/rank", '{"items": ["a", {"x": NaN}], "instructions": "x", "state": 1}', ["body", "items", 1, "x"]),
]


@pytest.mark.parametrize(
    ("path", "text", "location"), NON_FINITE, ids=["NaN", "Infinity", "-Infinity", "1e999", "nested"]
)
def test_nan_and_infinity_are_a_422_naming_the_field(client, path, text, location):
    """NaN, Infinity and 1e999 (which JSON cannot carry) are a 422 locating them, and the connection lives on."""
    body = assert_422_at(post_raw(client, path, text), location)
    assert "NaN or Infinity" in body["detail"][0]["msg"]
    assert_connection_still_serves(client)


SURROGATES = [
    ("/v1/rank", {**RANK, "model": "lexical\\ud800"}, ["body", "model"]),
    ("/v1/rank", {**RANK, "instructions": "Which\\udc00?"}, ["body", "instructions"]),
    ("/v1/rank", {**RANK, "items": ["a", {"title": "b\\ud800"}]}, ["body", "items", 1, "title"]),
    ("/v1/filter", {"items": ["a"], "question": "q", "state": {"site": "\\udfff"}}, ["body", "state", "site"]),
    ("/v1/rerank", {"query": "fleas", "documents": ["a", "\\ud83d"]}, ["body", "documents", 1]),
    ("/v1/rerank", {"query": "fl\\ud800eas", "documents": ["a"]}, ["body", "query"]),
    ("/v1/systemone", {"state": "\\ud800", "questions": {"q": NOUL}}, ["body", "state"]),
    (
        "/v1/systemone",
        {"questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": "one", "b": "t\\ud800"}}}},
        ["body", "questions", "q", "criteria", "b"],
    ),
    (
        "/v1/decisions",
        {
            "model": "m",
            "input": "x",
            "questions": [{"type": "choice", "instructions": "x", "choices": [{"value": "a"}, {"value": "\\ud800"}]}],
        },
        ["body", "questions", 0, "choices", 1, "value"],
    ),
    ("/v1/systemone", {"questions": {"q\\ud800": NOUL}}, ["body", "questions", "q\\ud800"]),
]


@pytest.mark.parametrize(
    ("path", "body", "location"), SURROGATES, ids=[".".join(map(str, loc[1:])) for _, _, loc in SURROGATES]
)
def test_a_lone_surrogate_anywhere_is_a_422_naming_the_field(client, path, body, location):
    """A lone surrogate (valid JSON, not encodable as UTF-8) is a 422 locating it, and the connection lives on."""
    response = post_raw(client, path, json.dumps(body).replace("\\\\u", "\\u"))
    assert "lone surrogate" in assert_422_at(response, location)["detail"][0]["msg"]
    assert_connection_still_serves(client)


def test_a_refused_surrogate_starts_no_run_and_the_next_request_is_served(client):
    """The surrogate is refused before any run starts, so nothing unloggable reaches the run log."""
    before = client.get("/v1/runs", params={"limit": 1000}).json()["runs"]
    assert post_raw(client, "/v1/rerank", '{"query": "q\\ud800", "documents": ["a"]}').status_code == 422
    assert client.get("/v1/runs", params={"limit": 1000}).json()["runs"] == before
    assert_connection_still_serves(client)


def test_nesting_the_parser_cannot_follow_is_a_422_locating_where_it_passes_the_limit(client):
    """100,000 nested lists (past the parser's recursion) are a 422 at the first list over the nesting limit."""
    content = b"[" * 100_000 + b"]" * 100_000
    response = client.post("/v1/rerank", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", *[0] * 64] and detail["type"] == "too_deep"
    assert "at most 64 levels of nesting" in detail["msg"]
    assert_connection_still_serves(client)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "not JSON: Expecting property name"),
        (b'{"query": "\xff", "documents": []}', "not UTF-8"),
        (b'{"query": "q", "documents": ["a"]', "not JSON"),
    ],
    ids=["malformed", "not-utf8", "truncated"],
)
def test_a_body_that_is_not_json_is_a_422_naming_the_problem(client, content, problem):
    """Malformed JSON, bytes that are not UTF-8, and a truncated document: each a 422, as documented."""
    response = client.post("/v1/rerank", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body"] and detail["type"] == "json_invalid"
    assert problem in detail["msg"]
    assert_connection_still_serves(client)


def test_an_integer_longer_than_python_converts_is_a_422_not_a_500(client):
    """Python's parser refuses an integer of more than 4300 digits with a ValueError; that is bad input too."""
    content = b'{"query": "q", "documents": ["a"], "top_n": ' + b"1" * 5000 + b"}"
    response = client.post("/v1/rerank", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body"] and "digits" in detail["msg"]
    assert_connection_still_serves(client)


def test_the_openapi_document_lists_every_status_a_route_answers_with(client):
    """Each route documents its error statuses: 401 with a key, 413, 422, 502, 503, 504, and 404 for a run;
    every route the guards' 400 (framing), 408 (a slow body), 413 (a large one), 421 and 403 (a foreign Host or
    Origin on loopback), and every route with a body 415 (not declared JSON)."""
    paths = client.get("/openapi.json").json()["paths"]
    guards = {"400", "408", "413", "421", "403"}
    for path in ("/v1/rank", "/v1/rerank", "/v1/filter", "/v1/score_list", "/v1/systemone", "/v1/decisions"):
        expected = {"200", "401", "415", "422", "502", "503", "504"} | guards
        assert set(paths[path]["post"]["responses"]) == expected, path
    assert set(paths["/v1/runs"]["get"]["responses"]) == {"200", "401", "422"} | guards
    assert set(paths["/v1/runs/{run_id}"]["get"]["responses"]) == {"200", "401", "404", "422"} | guards
    assert client.get("/v1/runs/no-such-run").status_code == 404


def test_a_request_over_the_models_limits_is_a_413_stating_the_limit():
    """More questions than the model takes in one call is the client's to fix: a 413 whose message states the limit."""
    small = ScriptedBackend("small", limits=ModelLimits(max_questions=5))
    questions = {f"q{index}": NOUL for index in range(6)}
    with use_backend(small) as model, ThreadedServer(create_app(model)) as url:
        response = httpx.post(f"{url}/v1/systemone", json={"state": "x", "questions": questions})
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["type"] == "LimitExceededError"
    assert "6 questions in one call, over the limit of 5" in error["message"]
    assert small.requests == [], "a request over the limits is never sent"


def test_a_504_says_what_ran_out_after_how_long_and_whose_limit_it_was():
    """The 504 names the work, the seconds, and whether they were the server's --timeout (plus a share per
    document for a rerank) or the request's."""
    slow = ScriptedBackend("slow", delay=5.0)
    with use_backend(slow) as model, ThreadedServer(create_app(model, timeout=0.3)) as url:
        by_server = httpx.post(f"{url}/v1/rerank", json={"query": "q", "documents": ["a", "b"]}, timeout=10)
        by_request = httpx.post(f"{url}/v1/rerank", json={"query": "q", "documents": ["a"], "timeout": 0.2})
    assert by_server.status_code == by_request.status_code == 504
    error = by_server.json()["error"]
    assert error["type"] == "DecisionTimeoutError"
    assert error["message"].startswith(f"rerank with {model} on 2 documents timed out after 0.34 s")
    limit = "the server's --timeout plus 20 ms per document"
    assert f"({limit})" in error["message"]
    assert error["timeout"] == pytest.approx(0.34) and error["limit"] == limit
    error = by_request.json()["error"]
    assert "timed out after 0.2 s (the request's \"timeout\")" in error["message"]


# --- exec: bounded by the request's budget, and by its client -----------------------------------


@pytest.fixture
def exec_server():
    with decirank.ArtifactStore() as store:
        store.put("run1/a", "anything")
    with ThreadedServer(create_app("lexical", allow_exec=True)) as served:
        yield served


def test_an_exec_run_ends_with_the_requests_timeout(exec_server, tmp_path):
    """An exec: command runs no longer than the request's timeout (not the 300 s default), and its group is killed."""
    pid_file = tmp_path / "pid"
    body = {"refs": ["run1/a"], "evaluator": f"exec:echo $$ > {pid_file}; exec sleep 30", "timeout": 1}
    started = time.monotonic()
    response = httpx.post(f"{exec_server}/v1/score_list", json=body, timeout=15)
    assert time.monotonic() - started < 5
    assert response.status_code == 200, response.text
    entry = response.json()["ranked"][0]
    assert (entry["score"], entry["verdict"]) == (None, "UNKNOWN")
    assert entry["reason"] == "stopped when the call's time budget of 1 s ran out"
    assert wait_until_gone([int(pid_file.read_text())]) == []


def test_a_client_that_goes_away_ends_its_exec_commands(exec_server, tmp_path):
    """When the client disconnects, the request is cancelled and its command's whole process group killed."""
    pid_file = tmp_path / "pids"
    command = f"exec:sleep 30 & echo $! >> {pid_file}; echo $$ >> {pid_file}; wait"
    body = {"refs": ["run1/a"], "evaluator": command, "timeout": 60}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{exec_server}/v1/score_list", json=body, timeout=1.5)
    pids = [int(line) for line in Path(pid_file).read_text().split()]
    assert len(pids) == 2
    assert wait_until_gone(pids, seconds=5) == [], [pid for pid in pids if is_running(pid)]
