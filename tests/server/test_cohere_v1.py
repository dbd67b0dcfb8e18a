"""Cohere's own v1 SDK (``cohere.Client``) against a ``decirank serve`` subprocess: ``POST /v1/rerank``."""

from __future__ import annotations

import httpx
import pytest

import decirank
from tests.server.cohere_server import DOCUMENTS, KEY, QUERY, lexical_server

cohere = pytest.importorskip("cohere")

COHERE_MODELS = ["rerank-english-v3.0", "rerank-v3.5", "rerank-multilingual-v3.0", "rerank-english-v2.0"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``decirank serve --model lexical`` with an API key, on a free loopback port."""
    with lexical_server(tmp_path_factory.mktemp("cohere-v1-home")) as url:
        yield url


@pytest.fixture
def client(server):
    with cohere.Client(base_url=server, api_key=KEY, timeout=60) as opened:
        yield opened


@pytest.mark.parametrize("model", COHERE_MODELS)
def test_cohere_model_names_are_answered_by_the_servers_model(client, model):
    """Client.rerank with one of Cohere's model names gets decirank.rerank's order and scores from the server's model."""
    response = client.rerank(model=model, query=QUERY, documents=DOCUMENTS, top_n=3)
    direct = decirank.rerank(QUERY, DOCUMENTS, model="lexical", top_k=3)
    assert isinstance(response, cohere.RerankResponse)
    assert [result.index for result in response.results] == [entry.id for entry in direct.results]
    assert [result.relevance_score for result in response.results] == pytest.approx(
        [entry.relevance_score for entry in direct.results]
    )
    assert response.results[0].index in (1, 3), "a flea document is best"
    assert response.meta.api_version.version == "1"
    assert response.meta.model_extra["model"].startswith("lexical")
    assert response.meta.tokens.input_tokens > 0


def test_return_documents_gives_each_document_back(client):
    """return_documents=True puts each document's text in its result, as Cohere's v1 API does."""
    response = client.rerank(model="rerank-english-v3.0", query=QUERY, documents=DOCUMENTS, return_documents=True)
    assert sorted(result.index for result in response.results) == [0, 1, 2, 3]
    assert all(result.document.text == DOCUMENTS[result.index] for result in response.results)


def test_rank_fields_choose_what_of_an_object_document_is_read(client):
    """With rank_fields, an object document is read by the fields named, so a title alone can win."""
    documents = [
        {"title": "Bread", "body": "A starter and a long rise."},
        {"title": "Fleas on dogs", "body": "A monthly spot-on treatment."},
    ]
    by_title = client.rerank(model="rerank-v3.5", query="fleas dogs", documents=documents, rank_fields=["title"])
    assert by_title.results[0].index == 1
    by_both = client.rerank(
        model="rerank-v3.5", query="starter rise", documents=documents, rank_fields=["title", "body"], top_n=1
    )
    assert by_both.results[0].index == 0


def test_a_document_without_any_rank_field_is_a_422_naming_it(client):
    """An object document that has none of rank_fields is the SDK's 422, naming the document."""
    with pytest.raises(cohere.UnprocessableEntityError) as caught:
        client.rerank(model="rerank-v3.5", query=QUERY, documents=[{"title": "a"}, {"body": "b"}], rank_fields=["title"])
    assert caught.value.body["error"]["field"] == "documents.1"


def test_max_chunks_per_doc_is_accepted_with_a_warning(client):
    """max_chunks_per_doc is taken and meta.warnings says it is not applied."""
    response = client.rerank(model="rerank-v3.5", query=QUERY, documents=DOCUMENTS, max_chunks_per_doc=4)
    assert len(response.results) == len(DOCUMENTS)
    assert any("max_chunks_per_doc" in warning for warning in response.meta.warnings)


def test_a_model_that_calls_another_server_is_still_refused(server):
    """Only unknown names fall back to the server's model: a client may not make it call a hosted provider."""
    response = httpx.post(
        f"{server}/v1/rerank",
        json={"model": "typesafe:jev-latest", "query": QUERY, "documents": DOCUMENTS},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "model"
