"""LlamaIndex: a node postprocessor that reranks with decirank.

    from decirank.integrations.llamaindex import DecirankRerank

    engine = index.as_query_engine(node_postprocessors=[DecirankRerank(top_n=2)])
    DecirankRerank(top_n=2).postprocess_nodes(nodes, query_str="how long do fleas live")

Needs ``llama-index-core`` (``pip install 'decirank[llamaindex]'``).
"""

from __future__ import annotations

from typing import Any

from ..decisions.decider import DEFAULT_ROLE
from ..errors import MissingAssetError
from ..tools.rerank import DEFAULT_TIMEOUT, RerankResult, arerank, rerank

try:
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as error:  # pragma: no cover - depends on what is installed
    raise MissingAssetError("LlamaIndex (llama-index-core)", "pip install 'decirank[llamaindex]'") from error

__all__ = ["DecirankRerank"]


class DecirankRerank(BaseNodePostprocessor):
    """Reranks nodes with :func:`decirank.rerank` and keeps the best ``top_n``.

    Each node comes back in a new ``NodeWithScore`` whose ``score`` is its
    probability of bearing on the query; the nodes themselves are shared, not copied.
    A node's text is what it would embed (``MetadataMode.EMBED``), as LlamaIndex's own rerankers use.
    """

    model: str = Field(default=DEFAULT_ROLE, description="A decirank model name or role.")
    top_n: int | None = Field(default=2, description="How many nodes to keep; None (or 0) keeps them all.")
    min_relevance: float | None = Field(default=None, description="Drop nodes scored below this probability.")
    timeout: float | None = Field(default=DEFAULT_TIMEOUT, description="Seconds for the whole rerank.")

    @classmethod
    def class_name(cls) -> str:
        return "DecirankRerank"

    def _arguments(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> tuple[Any, ...]:
        query = query_bundle.query_str if query_bundle is not None else None
        texts = [node.node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
        options = {
            "top_k": self.top_n, "min_relevance": self.min_relevance, "model": self.model, "timeout": self.timeout
        }
        return query, texts, options

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts, options = self._arguments(nodes, query_bundle)
        return _scored(nodes, rerank(query, texts, **options))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts, options = self._arguments(nodes, query_bundle)
        return _scored(nodes, await arerank(query, texts, **options))


def _scored(nodes: list[NodeWithScore], result: RerankResult) -> list[NodeWithScore]:
    # the texts went in as strings, so each result's id is the node's position
    return [NodeWithScore(node=nodes[ranked.id].node, score=ranked.relevance_score) for ranked in result.results]
