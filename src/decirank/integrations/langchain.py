"""LangChain: a document compressor that reranks with decirank.

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from decirank.integrations.langchain import DecirankRerank

    retriever = ContextualCompressionRetriever(base_compressor=DecirankRerank(top_n=3), base_retriever=base)
    retriever.invoke("how long do fleas live")   # the best 3, metadata["relevance_score"] on each

Needs ``langchain-core`` (``pip install 'decirank[langchain]'``); the
``ContextualCompressionRetriever`` itself lives in ``langchain-classic`` since LangChain 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..decisions.decider import DEFAULT_ROLE
from ..errors import MissingAssetError
from ..tools.rerank import AutoTimeout, RerankResult, arerank, rerank

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from pydantic import ConfigDict
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise MissingAssetError("LangChain (langchain-core)", "pip install 'decirank[langchain]'") from error

__all__ = ["DecirankRerank"]


class DecirankRerank(BaseDocumentCompressor):
    """Reranks documents with :func:`decirank.rerank` and keeps the best ``top_n``.

    Each document comes back as a copy whose ``metadata["relevance_score"]`` is
    its probability of bearing on the query; the input documents are not changed.
    """

    model_config = ConfigDict(extra="forbid")

    #: A decirank model name (``local``, ``typesafe:jev-latest``, ...) or role.
    model: str = DEFAULT_ROLE
    #: How many documents to keep, best first; None (or 0) keeps them all.
    top_n: int | None = 3
    #: Drop documents scored below this probability; None keeps them.
    min_relevance: float | None = None
    #: Seconds for the whole rerank, all its model calls together.
    timeout: float | AutoTimeout | None = "auto"

    def _options(self) -> dict[str, Any]:
        return {"top_k": self.top_n, "min_relevance": self.min_relevance, "model": self.model, "timeout": self.timeout}

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        result = rerank(query, [document.page_content for document in documents], **self._options())
        return _scored(documents, result)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        result = await arerank(query, [document.page_content for document in documents], **self._options())
        return _scored(documents, result)


def _scored(documents: Sequence[Document], result: RerankResult) -> list[Document]:
    """Copies of the documents in the result's order, each with its ``relevance_score`` in its metadata."""
    scored = []
    for ranked in result.results:
        document = documents[ranked.id]  # the texts went in as strings, so each id is its position
        metadata = {**document.metadata, "relevance_score": ranked.relevance_score}
        scored.append(document.model_copy(update={"metadata": metadata}))
    return scored
