"""``POST /rerank``: the rerank endpoint of the other rerank servers people run, in their own shapes.

Hugging Face's text-embeddings-inference (TEI) and Infinity both serve
``/rerank`` at the server's root, so their clients (LlamaIndex's
``TextEmbeddingInference``, LangChain's ``InfinityRerank``, litellm's
``huggingface/`` and ``infinity/`` routes, ``infinity_client``) work against
``decirank serve`` with only the base URL changed. The body says which one
is speaking:

- TEI sends ``texts`` and gets a bare list ``[{"index", "score", "text"?}]``,
  best first; ``raw_scores`` gives each score as the logit of its
  probability (what TEI's sigmoid was applied to), ``return_text`` the text.
- Infinity sends ``documents`` and gets ``{"object": "rerank", "results":
  [{"index", "relevance_score", "document"?}], "model", "usage", "id",
  "created"}``, best first, each document a plain string.

Both are the rerank tool (a likelihood per document, the server's model, its
budget); ``truncate`` and ``truncation_direction`` are accepted and not
needed, since each model reads a document up to its own context.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field, model_validator

from ..tools.rerank import RERANK
from ._deps import GuardedRoute, error_responses, needs_api_key, settings_of
# The Cohere route's model and budget rules, so every rerank shape the server speaks behaves alike.
from .routes import _count, _timeout, run_tool, served_model
from .wire import Body, Text, Timeout

__all__ = ["RERANK_PATH", "tei_infinity_router"]

RERANK_PATH = "/rerank"
#: Probabilities of 0 or 1 (a hosted model rounds to two decimals) have no finite logit: clip them here.
_LOGIT_EDGE = 1e-6


class TeiInfinityRerankRequest(Body):
    """TEI's request (``texts``) or Infinity's (``documents``): exactly one of the two."""

    query: Text
    texts: list[str] | None = Field(None, description="TEI: the texts to score against the query.")
    documents: list[str] | None = Field(None, description="Infinity: the documents to score against the query.")
    raw_scores: bool = Field(False, description="Scores as logits of the probabilities rather than probabilities.")
    return_text: bool = Field(False, description="TEI: include each text in its result.")
    return_documents: bool = Field(False, description="Infinity: include each document in its result.")
    truncate: bool | None = Field(None, description="Accepted for TEI clients; documents are read whole or in windows.")
    truncation_direction: Literal["Left", "Right", "left", "right"] | None = Field(
        None, description="Accepted for TEI clients, as truncate."
    )
    top_n: int | None = Field(None, ge=0, description="Keep only the best n (0 or null keeps all).")
    model: str | None = Field(
        None, description="Accepted for Infinity clients; the server's model answers whatever the name."
    )
    timeout: Timeout = None

    @model_validator(mode="after")
    def _one_list(self) -> TeiInfinityRerankRequest:
        if (self.texts is None) == (self.documents is None):
            raise ValueError("give exactly one of texts (as TEI takes) and documents (as Infinity takes)")
        return self


class TeiResult(BaseModel):
    index: int = Field(description="The text's position in the request.")
    score: float
    text: str | None = None


class InfinityResult(BaseModel):
    index: int = Field(description="The document's position in the request.")
    relevance_score: float
    document: str | None = None


class InfinityUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class InfinityResponse(BaseModel):
    object: Literal["rerank"] = "rerank"
    results: list[InfinityResult]
    model: str
    usage: InfinityUsage
    id: str | None
    created: int


def _logit(probability: float) -> float:
    p = min(max(probability, _LOGIT_EDGE), 1.0 - _LOGIT_EDGE)
    return math.log(p / (1.0 - p))


tei_infinity_router = APIRouter(route_class=GuardedRoute, dependencies=[Depends(needs_api_key)])


@tei_infinity_router.post(
    RERANK_PATH,
    response_model=list[TeiResult] | InfinityResponse,
    response_model_exclude_none=True,
    responses=error_responses(401, 413, 422, 502, 503, 504),
    tags=["tools"],
)
async def tei_infinity_rerank(body: TeiInfinityRerankRequest, request: Request) -> Any:
    """Score each text's relevance to the query, as text-embeddings-inference (``texts``) or Infinity
    (``documents``) answers ``/rerank``; the server's model answers."""
    is_tei = body.texts is not None
    texts: list[str] = body.texts if is_tei else body.documents  # type: ignore[assignment]
    field = "texts" if is_tei else "documents"
    arguments = {
        "query": body.query,
        "documents": [{"id": index, "text": text} for index, text in enumerate(texts)],
        "top_k": body.top_n,
        "model": served_model(body.model, settings_of(request), unknown_is_default=True),
        "timeout": _timeout(request, body.timeout, work=_count(texts, field), documents=len(texts)),
    }
    result = await run_tool(RERANK, arguments, request)

    def score(entry: dict[str, Any]) -> float:
        return _logit(entry["relevance_score"]) if body.raw_scores else entry["relevance_score"]

    if is_tei:
        return [
            {"index": entry["id"], "score": score(entry), "text": texts[entry["id"]] if body.return_text else None}
            for entry in result["results"]
        ]
    tokens = result["usage"]["input_tokens"]
    return {
        "object": "rerank",
        "results": [
            {
                "index": entry["id"],
                "relevance_score": score(entry),
                "document": texts[entry["id"]] if body.return_documents else None,
            }
            for entry in result["results"]
        ],
        "model": result["model"],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "id": result["run_id"],
        "created": int(time.time()),
    }
