"""LangChain: DecirankRerank as the compressor of a real ContextualCompressionRetriever, local model, offline."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="needs the langchain extra")
# Since LangChain 1.0 ContextualCompressionRetriever lives in langchain-classic, not in langchain.
pytest.importorskip("langchain_classic", reason="needs langchain-classic (the test extra)")

from langchain_classic.retrievers import ContextualCompressionRetriever  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import BaseDocumentCompressor, Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from decirank.errors import DecisionError, InvalidInputError, UnknownModelError  # noqa: E402
from decirank.integrations.langchain import DecirankRerank  # noqa: E402

from .conftest import PASSAGES, QUERY  # noqa: E402


class ListRetriever(BaseRetriever):
    """A first stage that returns every document it holds, in the order given."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.documents)


def documents() -> list[Document]:
    return [Document(page_content=text, metadata=dict(metadata), id=metadata["source"]) for text, metadata in PASSAGES]


def retriever(**options) -> ContextualCompressionRetriever:
    return ContextualCompressionRetriever(
        base_compressor=DecirankRerank(**options), base_retriever=ListRetriever(documents=documents())
    )


def test_retriever_keeps_top_n_best_first_with_relevance_score_and_logs_the_run(rerank_runs):
    """Through ContextualCompressionRetriever.invoke: the flea passage first, top_n kept, scores in metadata."""
    assert isinstance(DecirankRerank(), BaseDocumentCompressor)
    found = retriever(top_n=2).invoke(QUERY)
    assert len(found) == 2
    assert found[0].metadata["source"] == "fleas" and found[0].id == "fleas"
    scores = [document.metadata["relevance_score"] for document in found]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= score <= 1.0 for score in scores)
    (run,) = rerank_runs()
    assert (run["status"], run["role"], run["model"]) == ("success", "decider", "local:default")


def test_async_retriever_uses_arerank(rerank_runs):
    """ainvoke goes through acompress_documents (decirank's arerank): same documents, same scores."""
    sync = retriever(top_n=3).invoke(QUERY)
    found = asyncio.run(retriever(top_n=3).ainvoke(QUERY))
    assert [d.id for d in found] == [d.id for d in sync]
    assert [d.metadata["relevance_score"] for d in found] == pytest.approx(
        [d.metadata["relevance_score"] for d in sync]
    )
    assert len(rerank_runs()) == 2


def test_compress_documents_keeps_every_document_with_top_n_none_and_leaves_the_input_alone():
    """top_n=None keeps all; each result is a copy with the original metadata plus relevance_score."""
    given = documents()
    found = DecirankRerank(top_n=None).compress_documents(given, QUERY)
    assert sorted(d.id for d in found) == sorted(d.id for d in given)
    assert found[0].metadata == {"source": "fleas", "relevance_score": found[0].metadata["relevance_score"]}
    assert all("relevance_score" not in d.metadata for d in given)


def test_model_is_a_decirank_model_name_or_role(rerank_runs, monkeypatch):
    """model names a model (lexical here); the default role follows decirank's config (DECIRANK_ROLE_DECIDER)."""
    DecirankRerank(model="lexical").compress_documents(documents(), QUERY)
    monkeypatch.setenv("DECIRANK_ROLE_DECIDER", "lexical")
    DecirankRerank().compress_documents(documents(), QUERY)
    assert [run["model"] for run in rerank_runs()] == ["lexical:bm25", "lexical:bm25"]


def test_errors_are_decirank_typed_errors_unwrapped(rerank_runs, failing_model):
    """An unknown model, a bad top_n, an empty query and a failing model raise decirank's own errors."""
    with pytest.raises(UnknownModelError):
        retriever(model="no-such-model").invoke(QUERY)
    with pytest.raises(InvalidInputError) as bad_top_n:
        retriever(top_n=-1).invoke(QUERY)
    assert bad_top_n.value.field == "top_k"
    with pytest.raises(InvalidInputError):
        DecirankRerank().compress_documents(documents(), "")
    with pytest.raises(DecisionError):
        asyncio.run(retriever(model=failing_model).ainvoke(QUERY))
    assert rerank_runs()[0]["status"] == "failed"
