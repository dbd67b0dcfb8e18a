"""The other rerank servers' clients against a ``decirank serve`` subprocess, with only the base URL changed.

Hugging Face text-embeddings-inference's (LlamaIndex's ``TextEmbeddingInference``, litellm's
``huggingface/`` route) and Infinity's (``infinity_client``, LangChain's ``InfinityRerank``, litellm's
``infinity/`` route) speak ``POST /rerank``; Jina's (litellm's ``jina_ai/`` route) ``POST /v1/rerank``.
"""

from __future__ import annotations

import math
import os

import httpx
import pytest

import decirank
from tests.server.cohere_server import DOCUMENTS, KEY, QUERY, lexical_server

# litellm fetches its price list from the network on import unless told to read its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``decirank serve --model lexical`` with an API key, on a free loopback port."""
    with lexical_server(tmp_path_factory.mktemp("tei-infinity-home")) as url:
        yield url


@pytest.fixture(scope="module")
def direct():
    """What decirank.rerank gives for the shared query and documents, best first."""
    return decirank.rerank(QUERY, DOCUMENTS, model="lexical")


def _post(server: str, body: dict, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server + "/rerank", json=body, headers=headers, timeout=60)


def test_tei_shape_is_a_sorted_list_of_index_and_score(server, direct):
    """A TEI body (texts) gets TEI's answer: [{index, score}] best first, the rerank tool's probabilities."""
    response = _post(server, {"query": QUERY, "texts": DOCUMENTS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [entry["index"] for entry in body] == [entry.id for entry in direct.results]
    assert [entry["score"] for entry in body] == pytest.approx([entry.relevance_score for entry in direct.results])
    assert all(set(entry) == {"index", "score"} for entry in body)


def test_tei_return_text_and_raw_scores(server, direct):
    """return_text puts each text in its result; raw_scores gives the logit of each probability, as TEI's are."""
    body = _post(server, {"query": QUERY, "texts": DOCUMENTS, "return_text": True, "raw_scores": True}).json()
    assert all(entry["text"] == DOCUMENTS[entry["index"]] for entry in body)
    probabilities = {entry.id: entry.relevance_score for entry in direct.results}
    for entry in body:
        p = probabilities[entry["index"]]
        assert entry["score"] == pytest.approx(math.log(p / (1 - p)))


def test_tei_options_its_clients_send_are_accepted(server):
    """truncate and truncation_direction, which litellm always sends, are accepted."""
    body = {"query": QUERY, "texts": DOCUMENTS, "truncate": False, "truncation_direction": "Right", "top_n": 2}
    response = _post(server, body)
    assert response.status_code == 200, response.text
    assert len(response.json()) == 2


def test_infinity_shape_has_string_documents_model_and_usage(server, direct):
    """An Infinity body (documents) gets Infinity's answer: results with plain-string documents, model, usage."""
    response = _post(server, {"query": QUERY, "documents": DOCUMENTS, "return_documents": True, "model": "bge"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "rerank"
    assert body["model"].startswith("lexical")
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] > 0
    assert [entry["index"] for entry in body["results"]] == [entry.id for entry in direct.results]
    assert all(entry["document"] == DOCUMENTS[entry["index"]] for entry in body["results"])


def test_rerank_needs_the_key_and_one_list(server):
    """/rerank is keyed as /v1 is; a body with both texts and documents, or neither, is a 422 naming them."""
    assert _post(server, {"query": QUERY, "texts": DOCUMENTS}, key=None).status_code == 401
    assert _post(server, {"query": QUERY, "texts": DOCUMENTS}, key="wrong").status_code == 401
    for body in ({"query": QUERY}, {"query": QUERY, "texts": DOCUMENTS, "documents": DOCUMENTS}):
        response = _post(server, body)
        assert response.status_code == 422
        assert "exactly one of texts (as TEI takes) and documents" in response.json()["detail"][0]["msg"]
    bad = _post(server, {"query": QUERY, "texts": "not a list"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][:2] == ["body", "texts"]


def test_llamaindex_tei_reranker(server, direct):
    """LlamaIndex's TextEmbeddingInference postprocessor reranks nodes through /rerank."""
    tei = pytest.importorskip("llama_index.postprocessor.tei_rerank")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    reranker = tei.TextEmbeddingInference(base_url=server, auth_token=f"Bearer {KEY}", top_n=2)
    nodes = [NodeWithScore(node=TextNode(text=text), score=0.0) for text in DOCUMENTS]
    kept = reranker.postprocess_nodes(nodes, QueryBundle(QUERY))
    assert [node.node.text for node in kept] == [DOCUMENTS[entry.id] for entry in direct.results[:2]]
    assert kept[0].score == pytest.approx(direct.results[0].relevance_score)


def test_litellm_huggingface_route(server, direct):
    """litellm's huggingface/ rerank (a TEI client) gets the order, scores and documents back."""
    litellm = pytest.importorskip("litellm")
    response = litellm.rerank(
        model="huggingface/BAAI/bge-reranker-base",
        query=QUERY,
        documents=DOCUMENTS,
        top_n=3,
        return_documents=True,
        api_base=server,
        api_key=KEY,
    )
    assert [result["index"] for result in response.results] == [entry.id for entry in direct.results[:3]]
    assert all(result["document"]["text"] == DOCUMENTS[result["index"]] for result in response.results)


def test_litellm_infinity_route_with_documents(server, direct):
    """litellm's infinity/ rerank with return_documents=True reads Infinity's string documents."""
    litellm = pytest.importorskip("litellm")
    response = litellm.rerank(
        model="infinity/BAAI/bge-reranker-base",
        query=QUERY,
        documents=DOCUMENTS,
        return_documents=True,
        api_base=server,
        api_key=KEY,
    )
    assert [result["index"] for result in response.results] == [entry.id for entry in direct.results]
    assert all(result["document"]["text"] == DOCUMENTS[result["index"]] for result in response.results)
    assert response.meta["tokens"]["input_tokens"] > 0


def test_infinity_client_and_langchain_infinity_rerank(server, direct):
    """Infinity's own generated client, and LangChain's InfinityRerank on it, rerank through /rerank."""
    pytest.importorskip("infinity_client")
    from infinity_client.api.default import rerank
    from infinity_client.client import Client
    from infinity_client.models import RerankInput
    from infinity_client.models.re_rank_result import ReRankResult

    client = Client(base_url=server, headers={"Authorization": f"Bearer {KEY}"}, timeout=httpx.Timeout(60))
    result = rerank.sync(client=client, body=RerankInput(query=QUERY, documents=DOCUMENTS, return_documents=True))
    assert isinstance(result, ReRankResult)
    assert [entry.index for entry in result.results] == [entry.id for entry in direct.results]
    assert result.results[0].document == DOCUMENTS[direct.results[0].id]
    assert result.usage.total_tokens > 0

    infinity_rerank = pytest.importorskip("langchain_community.document_compressors.infinity_rerank")
    from langchain_core.documents import Document

    compressor = infinity_rerank.InfinityRerank(client=client, top_n=2, model="bge")
    kept = compressor.compress_documents([Document(page_content=text) for text in DOCUMENTS], QUERY)
    assert [doc.page_content for doc in kept] == [DOCUMENTS[entry.id] for entry in direct.results[:2]]


def test_jina_clients_read_model_and_usage_at_the_top(server):
    """/v1/rerank gives Jina's top-level model and usage.total_tokens; litellm's jina_ai/ route reads them."""
    raw = httpx.post(
        server + "/v1/rerank",
        json={"model": "jina-reranker-v2-base-multilingual", "query": QUERY, "documents": DOCUMENTS},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    ).json()
    assert raw["model"].startswith("lexical")
    assert raw["usage"]["total_tokens"] > 0
    litellm = pytest.importorskip("litellm")
    response = litellm.rerank(
        model="jina_ai/jina-reranker-v2-base-multilingual",
        query=QUERY,
        documents=DOCUMENTS,
        top_n=2,
        api_base=server,
        api_key=KEY,
    )
    assert len(response.results) == 2
    assert response.meta["billed_units"]["total_tokens"] == raw["usage"]["total_tokens"]
