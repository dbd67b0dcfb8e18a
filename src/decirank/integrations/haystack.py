"""Haystack (2.12 and later, 3 too): a ranker component that reranks with decirank.

    from decirank.integrations.haystack import DecirankRanker

    pipeline.add_component("ranker", DecirankRanker(top_k=5))
    pipeline.connect("retriever.documents", "ranker.documents")
    pipeline.run({"retriever": {"query": q}, "ranker": {"query": q}})["ranker"]["documents"]

It has ``run_async`` too (with :func:`decirank.arerank`), which async pipeline runs call.

Needs ``haystack-ai`` (``pip install 'decirank[haystack]'``).
"""

import dataclasses  # no "from __future__ import annotations": Haystack reads the run signature's types
from typing import Any

from ..decisions.decider import DEFAULT_ROLE
from ..errors import MissingAssetError
from ..tools.rerank import AutoTimeout, RerankResult, arerank, rerank

try:
    from haystack import Document, component
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise MissingAssetError("Haystack (haystack-ai)", "pip install 'decirank[haystack]'") from error

__all__ = ["DecirankRanker"]


@component
class DecirankRanker:
    """Ranks documents by :func:`decirank.rerank`'s relevance score and keeps the best ``top_k``.

    Documents come back as copies (same ``id``) whose ``score`` is their probability
    of bearing on the query; a document without ``content`` is scored as empty text.
    Outside a pipeline errors are decirank's typed errors; a ``Pipeline`` wraps
    them in its ``PipelineRuntimeError``, whose ``__cause__`` is decirank's error.
    """

    def __init__(
        self,
        model: str = DEFAULT_ROLE,
        top_k: int | None = 10,
        min_relevance: float | None = None,
        timeout: float | AutoTimeout | None = "auto",
    ) -> None:
        """
        :param model: a decirank model name (``local``, ``typesafe:jev-latest``, ...) or role.
        :param top_k: how many documents to keep, best first; None (or 0) keeps them all.
        :param min_relevance: drop documents scored below this probability.
        :param timeout: seconds for the whole rerank, all its model calls together; "auto" (the default):
            15 s plus 20 ms per document.
        """
        self.model = model
        self.top_k = top_k
        self.min_relevance = min_relevance
        self.timeout = timeout

    def _options(self, top_k: int | None) -> dict[str, Any]:
        top_k = self.top_k if top_k is None else top_k
        return {"top_k": top_k, "min_relevance": self.min_relevance, "model": self.model, "timeout": self.timeout}

    @component.output_types(documents=list[Document])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[Document]]:
        """
        :param query: what the documents are ranked against.
        :param documents: the documents to rank.
        :param top_k: overrides the ``top_k`` given at init for this run.
        :returns: ``documents``: the kept documents, best first, each with its ``score``.
        """
        result = rerank(query, [document.content or "" for document in documents], **self._options(top_k))
        return {"documents": _scored(documents, result)}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, documents: list[Document], top_k: int | None = None
    ) -> dict[str, list[Document]]:
        """The same as :meth:`run`, with :func:`decirank.arerank`, for an ``AsyncPipeline``."""
        result = await arerank(query, [document.content or "" for document in documents], **self._options(top_k))
        return {"documents": _scored(documents, result)}


def _scored(documents: list[Document], result: RerankResult) -> list[Document]:
    # the texts went in as strings, so each result's id is the document's position
    return [dataclasses.replace(documents[ranked.id], score=ranked.relevance_score) for ranked in result.results]
