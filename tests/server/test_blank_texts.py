"""A blank text is refused the same way by every tool and model, naming its place; run ids of any length."""

from __future__ import annotations

import httpx
import pytest

import decirank
from decirank.errors import InvalidInputError
from decirank.server import create_app
from tests.loopback import ThreadedServer

BLANK = " \t"


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DECIRANK_HOME", str(tmp_path_factory.mktemp("home")))
        with ThreadedServer(create_app("lexical")) as served:
            yield served


REQUESTS = [
    ("/v1/score", {"texts": ["fleas on dogs", BLANK], "question": "Is this about pets?"}, ["body", "texts", 1]),
    ("/v1/filter", {"items": ["fleas on dogs", BLANK], "question": "Is this about pets?"}, ["body", "items", 1]),
    (
        "/v1/classify",
        {"texts": [BLANK], "question": "Which topic?", "options": {"pets": "pets", "tax": "tax"}},
        ["body", "texts", 0],
    ),
    ("/v1/rerank", {"query": "fleas", "documents": ["fleas on dogs", {"text": ""}]}, ["body", "documents", 1]),
]


@pytest.mark.parametrize("model", ["lexical", "local"])
@pytest.mark.parametrize(("path", "body", "location"), REQUESTS, ids=[path for path, _, _ in REQUESTS])
def test_a_blank_text_is_a_422_naming_it_on_every_tool_and_model(url, path, body, location, model):
    """score, filter, classify and rerank refuse a blank text with a 422 at its own place, never body.state."""
    response = httpx.post(f"{url}{path}", json={**body, "model": model}, timeout=60)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == location, detail
    assert "not blank" in detail["msg"]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: decirank.score(["a", ""], "q?", model="local"), "texts.1"),
        (lambda: decirank.filter([" "], "q?", model="lexical"), "items.0"),
        (lambda: decirank.classify(["\n"], "q?", options={"a": "a", "b": "b"}, model="lexical"), "texts.0"),
        (lambda: decirank.rerank("q", ["a", " "], model="lexical"), "documents.1"),
    ],
)
def test_the_python_api_refuses_blank_texts_alike(call, field):
    """The Python API raises InvalidInputError naming the blank text, whatever the model."""
    with pytest.raises(InvalidInputError) as raised:
        call()
    assert raised.value.field == field


@pytest.mark.parametrize("run_id", ["x" * 50_000, "%" * 30_000, "_" * 300])
def test_a_run_id_of_any_length_is_a_404(url, run_id):
    """GET /v1/runs/<50,000 characters> (or a pattern of wildcards) is a 404, not a 500."""
    response = httpx.get(f"{url}/v1/runs/{run_id}")
    assert response.status_code == 404, response.text[:300]
