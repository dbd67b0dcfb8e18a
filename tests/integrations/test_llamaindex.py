"""LlamaIndex: DecirankRerank as the node postprocessor of a real query engine, local model, offline."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="needs the llamaindex extra")

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import MockEmbedding  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.response_synthesizers.no_text import NoText  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from decirank.errors import DecisionError, InvalidInputError, UnknownModelError  # noqa: E402
from decirank.integrations.llamaindex import DecirankRerank  # noqa: E402

from .conftest import PASSAGES, QUERY  # noqa: E402


def nodes() -> list[TextNode]:
    # the metadata is kept out of the text to embed, so each node's text is its passage alone
    return [
        TextNode(text=text, id_=metadata["source"], metadata=metadata, excluded_embed_metadata_keys=["source"])
        for text, metadata in PASSAGES
    ]


def query_engine(**options):
    """A vector index over the passages (mock embeddings: every passage comes back), reranked by decirank.

    A ``NoText`` synthesizer with a mock LLM: the engine retrieves and postprocesses, and no LLM is called
    (``as_query_engine(response_mode="no_text")`` would still look for the default OpenAI LLM).
    """
    index = VectorStoreIndex(nodes(), embed_model=MockEmbedding(embed_dim=8))
    return RetrieverQueryEngine(
        retriever=index.as_retriever(similarity_top_k=len(PASSAGES)),
        response_synthesizer=NoText(llm=MockLLM()),
        node_postprocessors=[DecirankRerank(**options)],
    )


def test_query_engine_keeps_top_n_best_first_scored_and_logs_the_run(rerank_runs):
    """Through RetrieverQueryEngine.query: the flea node first, top_n kept, the relevance score on NodeWithScore."""
    assert isinstance(DecirankRerank(), BaseNodePostprocessor)
    response = query_engine(top_n=2).query(QUERY)
    found = response.source_nodes
    assert len(found) == 2 and all(isinstance(node, NodeWithScore) for node in found)
    assert found[0].node.node_id == "fleas"
    assert found[0].score > found[1].score and all(0.0 <= node.score <= 1.0 for node in found)
    (run,) = rerank_runs()
    assert (run["status"], run["role"], run["model"]) == ("success", "decider", "local:default")


def test_async_query_uses_arerank(rerank_runs):
    """aquery goes through apostprocess_nodes (decirank's arerank): same nodes, same scores."""
    sync = query_engine(top_n=3).query(QUERY).source_nodes
    found = asyncio.run(query_engine(top_n=3).aquery(QUERY)).source_nodes
    assert [n.node.node_id for n in found] == [n.node.node_id for n in sync]
    assert [n.score for n in found] == pytest.approx([n.score for n in sync])
    assert len(rerank_runs()) == 2


def test_postprocess_nodes_with_top_n_none_keeps_all_and_leaves_the_input_alone():
    """top_n=None keeps every node; the input NodeWithScore objects keep their retrieval scores."""
    given = [NodeWithScore(node=node, score=0.5) for node in nodes()]
    found = DecirankRerank(top_n=None).postprocess_nodes(given, query_str=QUERY)
    assert sorted(n.node.node_id for n in found) == sorted(n.node.node_id for n in given)
    assert found[0].node is given[1].node
    assert all(n.score == 0.5 for n in given)


def test_model_is_a_decirank_model_name_or_role(rerank_runs, monkeypatch):
    """model names a model (lexical here); the default role follows decirank's config (DECIRANK_ROLE_DECIDER)."""
    given = [NodeWithScore(node=node) for node in nodes()]
    DecirankRerank(model="lexical").postprocess_nodes(given, query_str=QUERY)
    monkeypatch.setenv("DECIRANK_ROLE_DECIDER", "lexical")
    DecirankRerank().postprocess_nodes(given, query_str=QUERY)
    assert [run["model"] for run in rerank_runs()] == ["lexical:bm25", "lexical:bm25"]


def test_errors_are_decirank_typed_errors_unwrapped(rerank_runs, failing_model):
    """An unknown model, a bad top_n, no query and a failing model raise decirank's own errors."""
    given = [NodeWithScore(node=node) for node in nodes()]
    with pytest.raises(UnknownModelError):
        query_engine(model="no-such-model").query(QUERY)
    with pytest.raises(InvalidInputError) as bad_top_n:
        query_engine(top_n=-1).query(QUERY)
    assert bad_top_n.value.field == "top_k"
    with pytest.raises(InvalidInputError) as no_query:
        DecirankRerank().postprocess_nodes(given)
    assert no_query.value.field == "query"
    with pytest.raises(DecisionError):
        asyncio.run(query_engine(model=failing_model).aquery(QUERY))
    assert rerank_runs()[0]["status"] == "failed"
