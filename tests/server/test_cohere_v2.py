"""Cohere's own SDK (``cohere.ClientV2``) against a ``decirank serve`` subprocess: ``POST /v2/rerank``."""

from __future__ import annotations

import asyncio

import pytest

import decirank
from tests.server.cohere_server import DOCUMENTS, KEY, QUERY, lexical_server

cohere = pytest.importorskip("cohere")



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``decirank serve --model lexical`` with an API key, on a free loopback port."""
    with lexical_server(tmp_path_factory.mktemp("cohere-v2-home")) as url:
        yield url


@pytest.fixture
def client(server):
    with cohere.ClientV2(base_url=server, api_key=KEY, timeout=60) as opened:
        yield opened


def test_client_v2_reranks_as_the_model_itself(client):
    """ClientV2.rerank gets the order and scores decirank.rerank gives with the same model, cut to top_n."""
    response = client.rerank(model="lexical", query=QUERY, documents=DOCUMENTS, top_n=3)
    direct = decirank.rerank(QUERY, DOCUMENTS, model="lexical", top_k=3)
    assert isinstance(response, cohere.V2RerankResponse)
    assert [result.index for result in response.results] == [entry.id for entry in direct.results]
    assert [result.relevance_score for result in response.results] == pytest.approx(
        [entry.relevance_score for entry in direct.results]
    )
    assert response.results[0].index in (1, 3), "a flea document is best"
    scores = [result.relevance_score for result in response.results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= score <= 1.0 for score in scores)
    assert response.id
    assert response.meta.api_version.version == "2"
    assert response.meta.tokens.input_tokens > 0
    assert not response.meta.warnings


def test_a_cohere_model_name_is_answered_by_the_servers_model(client):
    """A client written for Cohere (model rerank-v3.5) works unchanged; meta names the model that answered."""
    response = client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCUMENTS)
    assert sorted(result.index for result in response.results) == [0, 1, 2, 3]
    assert response.meta.model_extra["model"].startswith("lexical")


def test_options_decirank_cannot_honour_are_accepted_with_a_warning(client):
    """max_tokens_per_doc, relevant_spans and priority are taken, and meta.warnings says what was not applied."""
    response = client.rerank(
        model="lexical",
        query=QUERY,
        documents=DOCUMENTS,
        max_tokens_per_doc=64,
        relevant_spans={"mode": "enabled", "threshold": 0.2},
        priority=1,
    )
    assert len(response.results) == len(DOCUMENTS)
    assert len(response.meta.warnings) == 2
    assert any("max_tokens_per_doc" in warning for warning in response.meta.warnings)
    assert all(result.relevant_spans is None for result in response.results)


def test_the_async_client_works_too(server):
    """AsyncClientV2 speaks to the same endpoint."""

    async def ask():
        async with cohere.AsyncClientV2(base_url=server, api_key=KEY, timeout=60) as client:
            return await client.rerank(model="lexical", query=QUERY, documents=DOCUMENTS, top_n=1)

    response = asyncio.run(ask())
    assert len(response.results) == 1 and response.results[0].index in (1, 3)


def test_bad_input_is_the_sdks_422_naming_the_field(client):
    """An empty query is a 422 the SDK raises as UnprocessableEntityError, with decirank's typed error in it."""
    with pytest.raises(cohere.UnprocessableEntityError) as caught:
        client.rerank(model="lexical", query="", documents=DOCUMENTS)
    assert caught.value.status_code == 422
    assert caught.value.body["error"]["field"] == "query"


def test_a_wrong_key_is_the_sdks_401(server):
    """The server's API key is required: the SDK's own client with another key gets UnauthorizedError."""
    with cohere.ClientV2(base_url=server, api_key="wrong", timeout=60) as client:
        with pytest.raises(cohere.UnauthorizedError):
            client.rerank(model="lexical", query=QUERY, documents=DOCUMENTS)
