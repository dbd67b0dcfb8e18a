"""The endpoints: each turns its body into a tool call or a decision, and the result into its shape.

No endpoint holds decision logic: ``/v1/rank``, ``/v1/rerank``,
``/v1/filter`` and ``/v1/score_list`` call the async tools, and ``/v1/systemone`` and
``/v1/decisions`` ask one decision through a :class:`ToolCall` (one budget,
one run), reading and writing their wire formats with the backends' codecs.

Which model answers: a request may name a role or a model this server runs
itself (``local``, ``lexical``, ...). Names of providers that call another
server (``typesafe:...``, ``systemone:...``) are refused unless they are the
server's own model, so a client can never spend the server's keys or point
it elsewhere. The System One and Decisions endpoints answer any other name
(a hosted model's, such as ``jev-latest``) with the server's model, so a
client written for a hosted service works against this server unchanged;
the tool endpoints refuse an unknown name with a suggestion.
"""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from .. import __version__
from ..backends import openai as decisions_wire
from ..backends import parse_model_name
from ..backends import systemone as systemone_wire
from ..decisions.decider import Decider
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError, UnknownModelError
from ..stores.examples import resolve_examples
from ..stores.runlog import current_runlog
from ..tools.filter import afilter
from ..tools.rank import arank
from ..tools.rerank import RerankResult, arerank
from ..tools.score_list import ascore_list
from ..types.answers import DecisionResponse
from ..types.questions import DecisionRequest
from . import wire
from .app import GuardedRoute, RequestBudget, ServerSettings, settings_of

__all__ = ["router"]


def require_api_key(request: Request) -> None:
    expected = settings_of(request).api_key
    if expected is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), expected.encode()):
        raise HTTPException(
            status_code=401,
            detail="a valid API key is required: Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entries of the error statuses a route can answer with."""
    documented: dict[int, dict[str, Any]] = {
        401: {"model": wire.HTTPErrorBody, "description": "An API key is required and was missing or wrong."},
        404: {"model": wire.HTTPErrorBody, "description": "No such run, or the run log is off."},
        413: {
            "model": wire.ErrorBody,
            "description": "The body is over the server's size limit, or the request over the model's "
            "declared limits (LimitExceededError, whose message states the limit).",
        },
        422: {
            "model": wire.ValidationErrorBody,
            "description": "Bad input: not JSON, NaN or Infinity, a lone surrogate, a misshapen body or a "
            "meaning the tool refuses; detail locates the field.",
        },
        502: {"model": wire.ErrorBody, "description": "The decision could not be had: the typed error."},
        503: {
            "model": wire.ErrorBody,
            "description": "The server's own configuration cannot answer, or it is answering its --max-concurrency "
            "requests already (OverloadedError, with Retry-After).",
        },
        504: {
            "model": wire.ErrorBody,
            "description": "The time budget ran out; the message says after how long and whose limit it was.",
        },
    }
    return {status: documented[status] for status in statuses}


#: What a tool or decision endpoint can answer besides 200.
TOOL_ERRORS = _errors(401, 413, 422, 502, 503, 504)

router = APIRouter(route_class=GuardedRoute)
api = APIRouter(route_class=GuardedRoute, dependencies=[Depends(require_api_key)])


def served_model(requested: str | None, settings: ServerSettings, *, unknown_is_default: bool = False) -> str:
    """The model that answers a request naming ``requested``; see the module's docstring."""
    if not requested or requested == settings.model:
        return settings.model
    try:
        provider, _ = parse_model_name(requested)
    except UnknownModelError:
        try:
            Decider.resolve(requested)  # a role, configured by whoever runs the server
        except UnknownModelError:
            if unknown_is_default:
                return settings.model
            raise
        return requested
    if "base_url" in provider.options:
        raise InvalidInputError(
            "model",
            "a model this server runs itself",
            detail=f"{requested} calls another server; only the server's own --model may do that",
        )
    return requested


def _timeout(request: Request, requested: float | None, *, work: str | None = None) -> float:
    """The request's budget, kept on the request so that a 504 can say what it was and whose it was."""
    if requested is not None:
        budget = RequestBudget(requested, 'the request\'s "timeout"', work)
    else:
        budget = RequestBudget(settings_of(request).timeout, "the server's --timeout", work)
    request.state.budget = budget
    return budget.seconds


def _count(things: Any, noun: str) -> str | None:
    return f"{len(things)} {noun}" if isinstance(things, list) else None


@router.get("/healthz", response_model=wire.Health, tags=["server"])
async def healthz(request: Request) -> dict[str, Any]:
    return {"status": "ok", "version": __version__, "model": settings_of(request).model}


@api.post("/v1/rank", response_model=wire.RankResponse, responses=TOOL_ERRORS, tags=["tools"])
async def rank(body: wire.RankRequest, request: Request) -> dict[str, Any]:
    """Rank a list against a question in one choice (the ``builtin__rank`` tool)."""
    settings = settings_of(request)
    result = await arank(
        body.items,
        body.instructions,
        body.state,
        describe=body.describe,
        none=body.none,
        top_k=body.top_k,
        model=served_model(body.model, settings),
        timeout=_timeout(request, body.timeout, work=_count(body.items, "items")),
    )
    return result.to_dict()


def _cohere_document(document: str | dict[str, Any]) -> dict[str, Any]:
    return {"text": document} if isinstance(document, str) else document


async def _cohere_rerank(
    body: wire.RerankRequest | wire.RerankV2Request, documents: list[Any], request: Request, *, unknown_is_default: bool
) -> RerankResult:
    """The rerank tool on a Cohere request's query and ``documents`` (ids are positions), under its options."""
    return await arerank(
        body.query,
        documents,
        top_k=body.top_n,
        min_relevance=body.min_relevance,
        model=served_model(body.model, settings_of(request), unknown_is_default=unknown_is_default),
        timeout=_timeout(request, body.timeout, work=_count(body.documents, "documents")),
    )


def _cohere_meta(result: RerankResult, warnings: list[str]) -> dict[str, Any]:
    """Cohere's ``meta`` (API version, tokens, any warnings), plus the model that answered and decirank's usage."""
    usage = result.usage
    meta: dict[str, Any] = {
        "api_version": {"version": "2"},
        "tokens": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }
    if warnings:
        meta["warnings"] = warnings
    return {**meta, "model": result.model, "usage": usage.to_dict()}


_COHERE_ROUTE: dict[str, Any] = {"response_model_exclude_none": True, "responses": TOOL_ERRORS, "tags": ["tools"]}


@api.post("/v1/rerank", response_model=wire.RerankResponse, **_COHERE_ROUTE)
async def rerank(body: wire.RerankRequest, request: Request) -> dict[str, Any]:
    """Score each document's relevance to the query; Cohere's request and response shapes."""
    # Ids are positions, so each result knows its index whatever ids the documents carry;
    # a document the tool cannot read goes to it as it is, for its error to name it.
    documents = [
        {"id": index, "text": doc if isinstance(doc, str) else doc["text"]}
        if isinstance(doc, str) or isinstance(doc.get("text"), str)
        else doc
        for index, doc in enumerate(body.documents)
    ]
    result = await _cohere_rerank(body, documents, request, unknown_is_default=False)
    results = [
        {
            "index": entry.id,
            "relevance_score": entry.relevance_score,
            "document": _cohere_document(body.documents[entry.id]) if body.return_documents else None,
        }
        for entry in result.results
    ]
    return {"id": result.run_id, "results": results, "meta": _cohere_meta(result, [])}


@api.post("/v2/rerank", response_model=wire.RerankV2Response, **_COHERE_ROUTE)
async def rerank_v2(body: wire.RerankV2Request, request: Request) -> dict[str, Any]:
    """Score each document's relevance to the query; Cohere's v2 shapes, for ``cohere.ClientV2``.

    ``model`` is required as in Cohere's API; a name this server does not run (``rerank-v3.5``)
    is answered by the server's model, named in ``meta.model``.
    """
    documents = [{"id": index, "text": document} for index, document in enumerate(body.documents)]
    result = await _cohere_rerank(body, documents, request, unknown_is_default=True)
    warnings = []
    if body.max_tokens_per_doc is not None:
        warnings.append("max_tokens_per_doc is not applied: each model reads a document up to its own context")
    if body.relevant_spans is not None and body.relevant_spans.mode == "enabled":
        warnings.append("relevant_spans are not returned by decirank's models")
    return {
        "id": result.run_id,
        "results": [{"index": entry.id, "relevance_score": entry.relevance_score} for entry in result.results],
        "meta": _cohere_meta(result, warnings),
    }


@api.post("/v1/filter", response_model=wire.FilterResponse, responses=TOOL_ERRORS, tags=["tools"])
async def filter_items(body: wire.FilterRequest, request: Request) -> dict[str, Any]:
    """Keep the items for which a yes/no question is likely true (the decide gate)."""
    settings = settings_of(request)
    result = await afilter(
        body.items,
        body.question,
        body.state,
        min_confidence=body.min_confidence,
        describe=body.describe,
        max_items_per_call=body.max_items_per_call,
        model=served_model(body.model, settings),
        timeout=_timeout(request, body.timeout, work=_count(body.items, "items")),
        examples=body.examples,
    )
    return result.to_dict()


@api.post("/v1/score_list", response_model=wire.ScoreListResponse, responses=TOOL_ERRORS, tags=["tools"])
async def score_list(body: wire.ScoreListRequest, request: Request) -> dict[str, Any]:
    """Score and rank stored artifacts by ref with an evaluator; each ref gets a stamp."""
    settings = settings_of(request)
    result = await ascore_list(
        body.refs,
        body.evaluator,
        top_k=body.top_k,
        max_concurrency=body.max_concurrency,
        model=served_model(body.model, settings),
        timeout=_timeout(request, body.timeout, work=_count(body.refs, "refs")),
        allow_exec=settings.allow_exec,
    )
    return result.to_dict()


async def _decide(tool: str, model: str, decision: DecisionRequest, request: Request) -> DecisionResponse:
    timeout = _timeout(request, None, work=f"{len(decision.questions)} questions")
    async with ToolCall(tool, model=model, timeout=timeout) as call:
        return await call.ask(decision)


def _systemone_question(qid: str, question: Any) -> Any:
    """A wire question as ours; its ``examples`` may name an example set stored on this server."""
    wire_question = question.model_dump(exclude_none=True)
    if "examples" in wire_question:
        wire_question["examples"] = resolve_examples(wire_question["examples"], f"questions.{qid}.examples")
    return systemone_wire.decode_question(wire_question, f"questions.{qid}")


@api.post("/v1/systemone", response_model=wire.SystemOneResponse, responses=TOOL_ERRORS, tags=["decisions"])
async def systemone(body: wire.SystemOneRequest, request: Request) -> dict[str, Any]:
    """Answer typed questions about a state in the System One format."""
    settings = settings_of(request)
    questions = {qid: _systemone_question(qid, question) for qid, question in body.questions.items()}
    model = served_model(body.model, settings, unknown_is_default=True)
    response = await _decide("systemone", model, DecisionRequest(body.state, questions), request)
    return {
        "model": response.model,
        "answers": {qid: systemone_wire.encode_answer(response.answers[qid], q) for qid, q in questions.items()},
        "usage": systemone_wire.encode_usage(response.usage),
    }


@api.post("/v1/decisions", response_model=wire.DecisionsResponse, responses=TOOL_ERRORS, tags=["decisions"])
async def decisions(body: wire.DecisionsRequest, request: Request) -> dict[str, Any]:
    """Answer typed questions about an input in OpenAI's Decisions shape; answers in question order."""
    settings = settings_of(request)
    names = [question.name for question in body.questions]
    # An unnamed question is keyed by its position; answers go back by position, with the name as given.
    ids = [name if name is not None else f"#{position}" for position, name in enumerate(names)]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("questions", "distinct question names")
    questions = {
        qid: decisions_wire.decode_question(question.model_dump(exclude_none=True), f"questions.{position}")
        for position, (qid, question) in enumerate(zip(ids, body.questions, strict=True))
    }
    state = decisions_wire.decode_input(
        body.input if isinstance(body.input, str) else [m.model_dump(exclude_none=True) for m in body.input]
    )
    model = served_model(body.model, settings, unknown_is_default=True)
    response = await _decide("decisions", model, DecisionRequest(state, questions), request)
    return {
        "model": response.model,
        "answers": [
            decisions_wire.encode_answer(response.answers[qid], questions[qid], name)
            for qid, name in zip(ids, names, strict=True)
        ],
        "usage": decisions_wire.encode_usage(response.usage),
    }


# The run log is read with blocking I/O, so these two run in FastAPI's thread pool (plain ``def``).
@api.get("/v1/runs", response_model=wire.RunList, responses=_errors(401, 422), tags=["runs"])
def runs(
    request: Request, limit: int = Query(20, ge=1, le=1000), tool: str | None = None, status: str | None = None
) -> dict[str, Any]:
    """Recent tool runs, newest first, with their status, models, tokens and cost."""
    request.state.input_location = "query"
    runlog = current_runlog()
    if runlog is None:
        return {"enabled": False, "runs": []}
    return {"enabled": True, "runs": runlog.runs(limit=limit, tool=tool, status=status)}


@api.get("/v1/runs/{run_id}", responses=_errors(401, 404, 422), tags=["runs"])
def run(run_id: str) -> dict[str, Any]:
    """One run by id (or a unique prefix of it), with its model calls as ``children``."""
    runlog = current_runlog()
    if runlog is None:
        raise HTTPException(status_code=404, detail="the run log is off on this server")
    try:
        return runlog.run(run_id)
    except InvalidInputError as error:
        raise HTTPException(status_code=404, detail=str(error)) from None


router.include_router(api)
