"""One big body does not stall everyone: it is parsed aside, refused past the item cap before any work, and
``/healthz`` answers within a second while it is being answered."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest

from decirank.tools._checks import MAX_ITEMS
from tests.loopback import HealthProbe
from tests.server.serving import serving


def while_probing(url: str, work: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    """``work()``'s response, and the slowest ``/healthz`` asked every 20 ms while it ran (each one a 200)."""
    with HealthProbe(url).running() as probe:
        response = work()
    assert probe.failures == []
    return response, probe.slowest


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving("--model", "lexical", home=tmp_path_factory.mktemp("home")) as server:
        yield server.url


def test_a_million_integers_are_refused_naming_the_field_and_the_limit(served):
    """The report's 2 MB /v1/rank of a million integers: a 422 naming items and the cap, /healthz under 1 s."""
    items = [7] * 1_000_000
    body = json.dumps({"items": items, "instructions": "Which is largest?"}, separators=(",", ":")).encode()
    headers = {"content-type": "application/json"}
    started = time.monotonic()
    response, slowest = while_probing(
        served, lambda: httpx.post(f"{served}/v1/rank", content=body, headers=headers, timeout=120)
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "items" and f"at most {MAX_ITEMS} items" in error["message"]
    assert response.json()["detail"][0]["loc"] == ["body", "items"]
    assert slowest < 1.0, f"/healthz took {slowest:.2f} s"
    assert time.monotonic() - started < 10


def test_400k_documents_to_rerank_are_refused_at_once(served):
    documents = ["a flea"] * 400_000
    response, slowest = while_probing(
        served,
        lambda: httpx.post(f"{served}/v1/rerank", json={"query": "fleas", "documents": documents}, timeout=120),
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "documents"
    assert slowest < 1.0, f"/healthz took {slowest:.2f} s"


def test_a_full_size_body_at_the_cap_is_answered_while_healthz_is_too(served):
    """MAX_ITEMS items in a body near the 4 MiB limit: answered, and /healthz stays under 1 s meanwhile."""
    items = [f"item {number} " + "x" * 380 for number in range(MAX_ITEMS)]
    body = {"query": "item 77", "documents": items, "top_n": 3}
    assert 3_500_000 < len(json.dumps(body)) < 4 * 1024 * 1024
    response, slowest = while_probing(served, lambda: httpx.post(f"{served}/v1/rerank", json=body, timeout=300))
    assert response.status_code == 200, response.text
    assert len(response.json()["results"]) == 3
    assert slowest < 1.0, f"/healthz took {slowest:.2f} s"


def test_a_rank_at_the_cap_is_answered_while_healthz_is_too(served):
    items = [f"item {number} " + "y" * 300 for number in range(MAX_ITEMS)]
    body = {"items": items, "instructions": "Which is item 5?"}
    response, slowest = while_probing(served, lambda: httpx.post(f"{served}/v1/rank", json=body, timeout=300))
    assert response.status_code == 200, response.text
    assert slowest < 1.0, f"/healthz took {slowest:.2f} s"
