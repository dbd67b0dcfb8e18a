"""The loopback Host check reads the Host header as HTTP defines it, not as a lenient URL parser would."""

from __future__ import annotations

import httpx
import pytest

from decirank.server import create_app
from tests.loopback import ThreadedServer


@pytest.fixture(scope="module")
def url():
    with ThreadedServer(create_app("lexical")) as served:
        yield served


@pytest.mark.parametrize(
    "host", ["evil.example@127.0.0.1", "127.0.0.1:18002, evil.example", "127.0.0.1/evil.example", "127.0.0.1:x"]
)
def test_a_host_that_only_looks_loopback_is_misdirected(url, host):
    response = httpx.get(url + "/healthz", headers={"host": host})
    assert response.status_code == 421, (host, response.text)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost:1", "[::1]:8000", "LOCALHOST"])
def test_loopback_hosts_are_answered(url, host):
    assert httpx.get(url + "/healthz", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("origin", ["http://evil.example@127.0.0.1", "http://127.0.0.1/evil.example"])
def test_an_origin_that_only_looks_loopback_is_forbidden(url, origin):
    assert httpx.get(url + "/healthz", headers={"origin": origin}).status_code == 403
