"""decirank serve against hostile input: deep JSON, bad stored rows, budgets, auth order, framing and pace."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from decirank._jsonpath import MAX_NESTING
from decirank.server import create_app
from decirank.stores.runlog import current_runlog
from tests.loopback import ThreadedServer

KEY = "hardening-key"
AUTH = {"authorization": f"Bearer {KEY}"}
JSON = {"content-type": "application/json"}


def nested(depth: int, leaf: str = "x") -> str:
    """JSON text of ``leaf`` inside ``depth`` lists."""
    return "[" * depth + json.dumps(leaf) + "]" * depth


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DECIRANK_HOME", str(tmp_path_factory.mktemp("home")))
        app = create_app("lexical", api_key=KEY, body_timeout=1.0)
        with ThreadedServer(app) as served:
            yield served


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=30, headers=AUTH) as http:
        yield http


def raw_exchange(url: str, request: bytes, *, read_timeout: float = 10.0) -> bytes:
    """Send ``request`` as it is on a fresh connection; what the server answers before closing or going quiet."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=read_timeout) as connection:
        connection.sendall(request)
        received = b""
        try:
            while b"\r\n\r\n" not in received or not received.endswith(b"}"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                received += chunk
        except TimeoutError:
            pass
        return received


def post_json(client: httpx.Client, path: str, text: str) -> httpx.Response:
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


# -- 1. deep JSON -----------------------------------------------------------------------------

DEEP_BODIES = [
    ("/v1/rank", '{"items": [%s, "b"], "instructions": "q", "state": {}, "model": "lexical"}', ["items", 0]),
    ("/v1/filter", '{"items": [%s], "question": "q", "state": {}}', ["items", 0]),
    ("/v1/rank", '{"items": ["a", "b"], "instructions": "q", "state": %s}', ["state"]),
    ("/v1/systemone", '{"state": %s, "questions": {"q": {"type": "noul", "instructions": "x"}}}', ["state"]),
    ("/v1/rerank", '{"query": "q", "documents": [{"text": "t", "meta": %s}]}', ["documents", 0, "meta"]),
]


@pytest.mark.parametrize("depth", [300, 600, 5000])
@pytest.mark.parametrize(("path", "template", "prefix"), DEEP_BODIES, ids=[f"{p}-{f[-1]}" for p, _, f in DEEP_BODIES])
def test_deep_json_is_a_422_naming_the_field_and_the_limit(client, path, template, prefix, depth):
    """Containers nested past the limit, anywhere, are a 422 locating them and stating the limit; never a 500."""
    response = post_json(client, path, template % nested(depth))
    assert response.status_code == 422, response.text
    issue = response.json()["detail"][0]
    assert issue["loc"][: len(prefix) + 1] == ["body", *prefix]
    assert f"at most {MAX_NESTING} levels of nesting" in issue["msg"]


def test_nesting_within_the_limit_is_answered_and_echoed(client):
    """Items nested just within the limit are ranked and echoed back whole."""
    item = json.loads(nested(MAX_NESTING - 3))
    response = client.post("/v1/rank", json={"items": [item, "b"], "instructions": "q", "state": {"s": item}})
    assert response.status_code == 200, response.text
    assert item in response.json()["items"]


# -- 2. stored rows never break a read -------------------------------------------------------------


def test_the_run_list_holds_counts_not_inputs_and_survives_a_row_too_deep_to_render(client):
    """The page's run list gives item counts, never inputs, and a stored row nested 5000 deep breaks no read."""
    client.post("/v1/rank", json={"items": ["a", "b", "c"], "instructions": "q", "state": {"s": "fleas"}})
    runlog = current_runlog()
    runlog.flush()
    newest = runlog.runs(limit=1)[0]["id"]
    # A row written before the nesting limit, or by another program, holds anything.
    runlog.database.execute("UPDATE runs SET inputs = ?, outputs = ? WHERE id = ?", (nested(5000), nested(300), newest))
    listed = client.get("/v1/runlog/runs")
    assert listed.status_code == 200, listed.text
    row = next(row for row in listed.json()["runs"] if row["id"] == newest)
    assert "inputs" not in row and "outputs" not in row
    for path in ("/v1/runs", f"/v1/runs/{newest}"):
        assert client.get(path).status_code == 200, path


# -- 3. every model honours the budget ---------------------------------------------------------------


def test_lexical_honours_a_tiny_timeout(client):
    """5000 documents with lexical and a 1 ms budget are a 504 naming the budget, as with any model."""
    body = {"query": "fleas", "documents": ["flea treatment for dogs"] * 5000, "timeout": 0.001, "model": "lexical"}
    response = client.post("/v1/rerank", json=body)
    assert response.status_code == 504, response.text[:300]
    assert response.json()["error"]["timeout"] == 0.001


# -- 6. the key comes first ----------------------------------------------------------------------------


def test_without_the_key_a_bad_body_is_a_401_not_a_422(url):
    """With an API key set, a request without it is a 401 whatever its body, and a 422 only with the key."""
    assert httpx.post(f"{url}/v1/rank", content=b"{").status_code == 401
    assert httpx.post(f"{url}/v1/rank", content=b"{", headers={**AUTH, **JSON}).status_code == 422
    assert httpx.post(f"{url}/v1/no-such-route", content=b"{").status_code == 401


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/v1/rank"), ("PUT", "/v1/runs"), ("GET", "/v1/score_list")])
def test_an_undeclared_method_is_a_405_with_or_without_the_key(url, method, path):
    """A method the route does not declare is a 405 naming the allowed ones, key or not; an unknown path, 401."""
    for headers in ({}, AUTH):
        response = httpx.request(method, f"{url}{path}", headers=headers)
        assert response.status_code == 405, (headers, response.text)
        assert response.headers["allow"]
    assert httpx.delete(f"{url}/v1/no-such-route").status_code == 401


def test_the_401_comes_before_the_body_is_sent(url):
    """A request that declares a body and sends none is refused at once without the key, not waited for."""
    head = b"POST /v1/rank HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
    answer = raw_exchange(url, head, read_timeout=5)
    # Had the server waited for the body, it would have answered 408 at its body timeout.
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


# -- 7. statuses the schema lists ----------------------------------------------------------------------


def test_routes_without_a_body_ignore_one_and_a_trailing_slash_is_not_redirected(client):
    """GET /healthz, /v1/server, /v1/models with a bad JSON body answer 200; /v1/runs/ is a 404, not a 307."""
    for path in ("/healthz", "/v1/server", "/v1/models"):
        response = client.request("GET", path, content=b'{"bad', headers={"content-type": "application/json"})
        assert response.status_code == 200, (path, response.text)
    assert client.get("/v1/runs/", follow_redirects=False).status_code == 404


def test_the_schema_lists_every_guard_status_and_refuses_blank_text(client):
    """Every operation lists 400, 408 and 413 (401 under /v1 and /v2, and on /metrics and /rerank, which want it);
    blank text is outside the schema, as the server says."""
    document = client.get("/openapi.json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            listed = set(operation["responses"])
            assert {"400", "408", "413"} <= listed, (path, method)
            keyed = path.startswith(("/v1/", "/v2/")) or path in ("/metrics", "/rerank")
            assert ("401" in listed) == keyed, (path, method)
    instructions = document["components"]["schemas"]["RankRequest"]["properties"]["instructions"]
    assert instructions["minLength"] == 1
    import re

    pattern = re.compile(instructions["pattern"])
    for blank in ("", " ", "\t\n", "\x1c", "\u3000"):
        assert not pattern.search(blank)
        assert client.post("/v1/rank", json={"items": ["a"], "instructions": blank, "state": 1}).status_code == 422
    assert pattern.search(" q ")


# -- 8. the smaller ones ------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", [None, "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_post_not_declared_json_is_a_415_naming_the_header(client, content_type):
    """A body with no Content-Type, or one a web page may send across origins unasked, is a 415, not read as JSON."""
    body = json.dumps({"items": ["a", "b"], "instructions": "q", "state": None}).encode()
    headers = {} if content_type is None else {"content-type": content_type}
    request = client.build_request("POST", "/v1/rank", content=body, headers=headers)
    if content_type is None:
        assert "content-type" not in request.headers
    response = client.send(request)
    assert response.status_code == 415, response.text
    error = response.json()["error"]
    assert error["field"] == "content-type" and "application/json" in error["message"]
    assert client.post("/v1/rank", content=body, headers={"content-type": "application/json; charset=utf-8"}).is_success


def test_a_question_id_with_dots_stays_whole_in_the_error_location(client):
    """A System One question id holding dots is one part of the 422's location."""
    body = {"questions": {"intent.v2": {"type": "noul", "instructions": " "}}}
    response = client.post("/v1/systemone", json=body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "questions", "intent.v2", "instructions"]


def test_no_docs_page_loads_scripts_from_elsewhere(client):
    """/docs and /redoc (which load scripts from a CDN) are not served; the OpenAPI document and the page are."""
    assert client.get("/docs").status_code == 404
    assert client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200
    assert "script-src 'self'" in client.get("/").headers["content-security-policy"]


def test_content_length_with_chunked_is_refused(url):
    """A request declaring both Content-Length and Transfer-Encoding: chunked is a 400, and the connection closes."""
    request = (
        b"POST /v1/rank HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer " + KEY.encode() + b"\r\n"
        b"content-type: application/json\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n"
        b"2\r\n{}\r\n0\r\n\r\n"
    )
    answer = raw_exchange(url, request)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"Content-Length and Transfer-Encoding" in answer


def test_a_half_sent_body_is_a_408_once_the_body_timeout_passes(url):
    """A client that sends half its body and stalls gets a 408 after the server's body timeout (1 s here)."""
    request = (
        b"POST /v1/rank HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer " + KEY.encode() + b"\r\n"
        b'content-type: application/json\r\ncontent-length: 100\r\n\r\n{"items": ['
    )
    answer = raw_exchange(url, request, read_timeout=10)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


# -- the hand probes: every answer a documented one, none a 5xx ------------------------------------

BIG = "x" * (4 * 1024 * 1024 + 10)
RANK = {"items": ["a", "b"], "instructions": "q", "state": None}
#: Deep items exactly as a request that once got a 500 sent them.
REPRODUCER = '{"items": [' + "[" * 300 + "]" * 300 + ', "b"], "instructions": "q", "state": {}, "model": "lexical"}'
SYSTEMONE_STATE = '{"state": STATE, "questions": {"a": {"type": "noul", "instructions": "x"}}}'
#: (method, operation, request options, nesting put where ITEM or STATE stands)
PROBES: list[tuple[str, str, dict, int]] = [
    ("POST", "/v1/rank", {"content": '{"items": [ITEM, "b"], "instructions": "q", "state": {}}'}, 300),
    ("POST", "/v1/rank", {"content": REPRODUCER}, 0),
    ("POST", "/v1/rank", {"content": '{"items": ["a"], "instructions": "q", "state": STATE}'}, 600),
    ("POST", "/v1/filter", {"content": '{"items": [ITEM], "question": "q", "state": {}}'}, 256),
    ("POST", "/v1/filter", {"content": '{"items": ["a"], "question": "q", "state": STATE}'}, 100_000),
    ("POST", "/v1/systemone", {"content": SYSTEMONE_STATE}, 600),
    ("POST", "/v1/decisions", {"content": '{"model": "m", "input": STATE, "questions": []}'}, 500),
    ("POST", "/v1/rerank", {"json": {"query": "q", "documents": ["d"] * 5000, "timeout": 0.001}}, 0),
    ("POST", "/v1/rank", {"content": "{"}, 0),
    ("POST", "/v1/rank", {"content": '{"items": [NaN], "instructions": "q", "state": 1}'}, 0),
    ("POST", "/v1/rank", {"json": {**RANK, "instructions": ""}}, 0),
    ("POST", "/v1/rank", {"json": {**RANK, "model": " "}}, 0),
    ("POST", "/v1/rank", {"json": {**RANK, "top_k": 10**30}}, 0),
    ("POST", "/v1/rerank", {"json": {"query": "", "documents": ["a"]}}, 0),
    ("POST", "/v1/rank", {"content": json.dumps(RANK), "headers": {"content-type": ""}}, 0),
    ("POST", "/v1/rank", {"content": json.dumps(RANK), "headers": {"content-type": "text/plain"}}, 0),
    ("POST", "/v1/rank", {"content": BIG}, 0),
    ("POST", "/v1/systemone", {"json": {"questions": {"a.b": {"type": "noul", "instructions": ""}}}}, 0),
    ("POST", "/v1/score_list", {"json": {"refs": ["r/a"], "evaluator": "exec:true"}}, 0),
    ("POST", "/v1/score_list", {"json": {"refs": "[[[[", "evaluator": "validate:json"}}, 0),
    ("GET", "/healthz", {"content": '{"bad'}, 0),
    ("GET", "/v1/server", {"content": '{"bad'}, 0),
    ("GET", "/v1/models", {"content": '{"bad'}, 0),
    ("GET", "/v1/runs", {"content": BIG}, 0),
    ("GET", "/v1/runs", {"params": {"limit": "-1"}}, 0),
    ("GET", "/v1/runs/{run_id}", {"path": "/v1/runs/"}, 0),
    ("GET", "/v1/runs/{run_id}", {"path": "/v1/runs/%00"}, 0),
    ("GET", "/v1/runlog/runs", {"params": {"status": "nope"}}, 0),
    ("GET", "/v1/runlog/series", {"params": {"buckets": "0"}}, 0),
    ("GET", "/v1/runs/{run_id}", {"path": "/v1/runs/" + "x" * 50_000}, 0),
    ("GET", "/v1/runs", {"params": {"status": ""}}, 0),
    ("GET", "/v1/runs", {"headers": {"origin": "http://evil.example"}}, 0),
    ("GET", "/healthz", {"headers": {"host": "evil.example"}}, 0),
    ("POST", "/v1/score_list", {"content": '{"refs": ["r/a"], "evaluator": "validate:json"}', "headers": {}}, 0),
    ("POST", "/v1/score", {"json": {"texts": ["a", " "], "question": "q"}}, 0),
    ("POST", "/v1/rank", {"json": {**RANK, "top_k": 0}}, 0),
]


def test_hand_probes_get_only_documented_statuses_and_no_5xx(client):
    """Hostile probes (deep JSON, bad bodies, blank text, huge sizes, bodies on GETs): 0 x 5xx, 0 undocumented."""
    document = client.get("/openapi.json").json()
    server_errors, undocumented = [], []
    for method, operation, options, depth in PROBES:
        options = dict(options)
        if depth:
            options["content"] = options["content"].replace("ITEM", nested(depth)).replace("STATE", nested(depth))
        if "content" in options:
            options.setdefault("headers", {"content-type": "application/json"})
        path = options.pop("path", operation)
        response = client.request(method, path, **options)
        documented = document["paths"][operation][method.lower()]["responses"]
        tiny_budget = options.get("json", {}).get("timeout") == 0.001
        if response.status_code >= 500 and not (response.status_code == 504 and tiny_budget):
            server_errors.append((method, path, response.status_code, response.text[:200]))
        if str(response.status_code) not in documented:
            undocumented.append((method, path, response.status_code, response.text[:200]))
    assert (len(server_errors), len(undocumented)) == (0, 0), (server_errors, undocumented)
