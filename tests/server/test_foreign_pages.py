"""A web page cannot use a server on loopback: foreign Host 421, foreign Origin 403, a POST not JSON 415."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

import decirank
from decirank.server import create_app
from tests.loopback import HOST, ThreadedServer, free_port
from tests.server.serving import serving

EVIL = "http://evil.example"


@pytest.fixture
def exec_server(isolated_user_dir):
    with decirank.ArtifactStore() as store:
        store.put("example-run/valid-json", '{"a": 1}')
    with ThreadedServer(create_app("lexical", allow_exec=True)) as served:
        yield served


def body_for(proof) -> bytes:
    return b'{"refs":["example-run/valid-json"],"evaluator":"exec:id > %s"}' % str(proof).encode()


def test_the_issues_page_post_runs_nothing(exec_server, tmp_path):
    """The reproducer: no Content-Type and a foreign Origin; refused, and the command never runs."""
    proof = tmp_path / "proof"
    response = httpx.post(
        f"{exec_server}/v1/score_list", content=body_for(proof), headers={"content-type": "", "origin": EVIL}
    )
    assert response.status_code == 403, response.text
    assert response.json()["error"]["type"] == "ForbiddenOriginError"
    time.sleep(0.3)
    assert not proof.exists()


@pytest.mark.parametrize("content_type", ["", "text/plain", "application/x-www-form-urlencoded"])
def test_a_post_a_page_may_send_unasked_is_a_415_and_runs_nothing(exec_server, tmp_path, content_type):
    """What a form or fetch(no-cors) sends (no type, text/plain, a form) is a 415 even from a same-site page."""
    proof = tmp_path / "proof"
    headers = {"content-type": content_type, "origin": exec_server}
    response = httpx.post(f"{exec_server}/v1/score_list", content=body_for(proof), headers=headers)
    assert response.status_code == 415, response.text
    assert response.json()["error"]["field"] == "content-type"
    assert not proof.exists()


def test_a_rebound_name_is_a_421_and_runs_nothing(exec_server, tmp_path):
    """A DNS-rebinding page sends its own name as Host, with JSON and its own Origin: 421, nothing runs."""
    proof = tmp_path / "proof"
    headers = {"content-type": "application/json", "host": "evil.example:8000", "origin": "http://evil.example:8000"}
    response = httpx.post(f"{exec_server}/v1/score_list", content=body_for(proof), headers=headers)
    assert response.status_code == 421, response.text
    assert response.json()["error"]["type"] == "MisdirectedRequestError"
    assert not proof.exists()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]:9", "127.0.0.1:1"])
def test_loopback_hosts_and_origins_are_answered(exec_server, tmp_path, host):
    """A Host that is a loopback address or localhost (any port), and a loopback Origin, are served."""
    proof = tmp_path / "proof"
    headers = {"content-type": "application/json", "host": host, "origin": f"http://{host}"}
    response = httpx.post(f"{exec_server}/v1/score_list", content=body_for(proof), headers=headers)
    assert response.status_code == 200, response.text
    assert proof.exists()


@pytest.mark.parametrize("origin", [EVIL, "null", "http://127.0.0.1.evil.example", "file://"])
def test_foreign_origins_are_a_403_on_every_route(exec_server, origin):
    """A foreign, opaque or look-alike Origin is refused on reads too (the run log, the page)."""
    for method, path in (("GET", "/v1/runs"), ("GET", "/"), ("POST", "/v1/rank")):
        response = httpx.request(method, f"{exec_server}{path}", headers={"origin": origin}, json={})
        assert response.status_code == 403, (method, path, response.text)


def test_a_named_origin_is_allowed_and_others_still_refused(isolated_user_dir):
    """``allowed_origins`` lets the operator's own page in, and only it."""
    app = create_app("lexical", allowed_origins=["https://tools.example.com"])
    body = {"items": ["a", "b"], "instructions": "q", "state": None}
    with ThreadedServer(app) as url:
        allowed = httpx.post(f"{url}/v1/rank", json=body, headers={"origin": "https://tools.example.com"})
        refused = httpx.post(f"{url}/v1/rank", json=body, headers={"origin": "https://other.example.com"})
    assert (allowed.status_code, refused.status_code) == (200, 403)


def test_a_server_bound_beyond_loopback_checks_no_host(isolated_user_dir):
    """Bound to another address, any Host is answered (a proxy or a DNS name is how it is reached)."""
    body = {"items": ["a", "b"], "instructions": "q", "state": None}
    with ThreadedServer(create_app("lexical", host="0.0.0.0")) as url:
        response = httpx.post(f"{url}/v1/rank", json=body, headers={"host": "ranker.internal", "origin": EVIL})
    assert response.status_code == 200, response.text


def test_the_schema_lists_421_403_and_415(exec_server):
    """Every operation lists 421 and 403; every one with a body lists 415."""
    document = httpx.get(f"{exec_server}/openapi.json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            listed = set(operation["responses"])
            assert {"421", "403"} <= listed, (path, method)
            assert ("415" in listed) == ("requestBody" in operation), (path, method)


def test_serve_allow_origin_lets_that_origin_in(tmp_path):
    """``decirank serve --allow-origin`` serves that origin's page; any other origin gets 403."""
    body = {"items": ["a", "b"], "instructions": "q", "state": None}
    with serving("--model", "lexical", "--allow-origin", "http://app.example:3000", home=tmp_path) as served:
        allowed = httpx.post(f"{served.url}/v1/rank", json=body, headers={"origin": "http://app.example:3000"})
        refused = httpx.post(f"{served.url}/v1/rank", json=body, headers={"origin": EVIL})
        foreign_host = httpx.get(f"{served.url}/healthz", headers={"host": "evil.example"})
    assert (allowed.status_code, refused.status_code, foreign_host.status_code) == (200, 403, 421)


def test_serve_on_a_busy_port_says_so_in_one_line_and_exits_2(tmp_path):
    """A port already taken: 'port N is in use' on one line, exit 2, and no serving banner."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind((HOST, port))
        taken.listen()
        done = subprocess.run(
            [sys.executable, "-m", "decirank", "serve", "-m", "lexical", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DECIRANK_HOME": str(tmp_path)},
        )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} is in use" in lines[0], done.stderr
    assert "decirank serve: http" not in done.stderr
