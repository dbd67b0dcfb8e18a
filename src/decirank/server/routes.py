"""The endpoints: each turns its body into a tool call or a decision, and the result into its shape.

No endpoint holds decision logic: ``/v1/rank``, ``/v1/filter``, ``/v1/classify``, ``/v1/score``,
``/v1/score_list`` and ``/v1/calibrate`` are made from the tools' definitions (the body is the tool's
HTTP request model, the answer its result model), and they and the rerank shapes (``/v1/rerank``,
``/v2/rerank``) call the tools through the registry, as MCP and plans do (``/v1/calibrations`` lists,
shows and removes what calibrate stored); ``/v1/systemone`` and
``/v1/decisions`` ask one decision through a :class:`ToolCall` (one budget,
one run), reading and writing their wire formats with the backends' codecs.

Which model answers: a request may name a role or a model this server runs
itself (``local``, ``lexical``, ...). Names of providers that call another
server (``typesafe:...``, ``systemone:...``) are refused unless they are the
server's own model, so a client can never spend the server's keys or point
it elsewhere. The System One, Decisions and Cohere rerank endpoints answer
any other name (a hosted model's, such as ``jev-latest`` or
``rerank-english-v3.0``) with the server's model, so a client written for a
hosted service works against this server unchanged; the tool endpoints
refuse an unknown name with a suggestion.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response

from .._version import __version__
from ..backends import openai as decisions_wire
from ..backends import parse_model_name
from ..backends import systemone as systemone_wire
from ..decisions.decider import Decider
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError, UnknownModelError
from ..stores.calibrations import Calibration, CalibrationStore
from ..stores.examples import resolve_examples
from ..stores.runlog import RUN_STATUSES, current_runlog
from ..tools._definition import ToolDefinition
from ..tools.calibrate import CalibrationSummaryOut
from ..tools.registry import definitions, get_tool
from ..tools.rerank import PER_DOCUMENT_TIMEOUT, RERANK, default_budget
from ..types.answers import DecisionResponse
from ..types.questions import DecisionRequest
from . import wire
from ._deps import (
    GuardedRoute,
    RequestBudget,
    ServerSettings,
    error_responses,
    location_of,
    needs_api_key,
    settings_of,
)

__all__ = ["router"]


#: What a tool or decision endpoint can answer besides 200.
TOOL_ERRORS = error_responses(401, 413, 422, 502, 503, 504)

#: A status the run log records, as GET /v1/runs filters by it (the schema lists them).
RunStatus = Literal[RUN_STATUSES]  # type: ignore[valid-type]

router = APIRouter(route_class=GuardedRoute)
api = APIRouter(route_class=GuardedRoute, dependencies=[Depends(needs_api_key)])


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


def _timeout(
    request: Request, requested: float | None, *, work: str | None = None, documents: int | None = None
) -> float:
    """The request's budget, kept on the request so that a 504 can say what it was and whose it was.

    A rerank naming no budget gets the server's ``--timeout`` plus a share per document, as
    :func:`~decirank.tools.rerank.default_budget` gives the Python call.
    """
    if requested is not None:
        budget = RequestBudget(requested, 'the request\'s "timeout"', work)
    elif documents is not None:
        seconds = default_budget(documents, base=settings_of(request).timeout)
        per_document = f"{PER_DOCUMENT_TIMEOUT * 1000:g} ms"
        budget = RequestBudget(seconds, f"the server's --timeout plus {per_document} per document", work)
    else:
        budget = RequestBudget(settings_of(request).timeout, "the server's --timeout", work)
    request.state.budget = budget
    return budget.seconds


async def run_tool(definition: ToolDefinition, arguments: dict[str, Any], request: Request) -> dict[str, Any]:
    """A tool on a request's arguments, called through the registry as MCP and plans call it; its result's JSON.

    ``exec:`` evaluators run only where the operator allows them (``--allow-exec``), never at a caller's word.
    """
    return await get_tool(definition.tool_name).run(arguments, allow_exec=settings_of(request).allow_exec)


def _count(things: Any, noun: str) -> str | None:
    return f"{len(things)} {noun}" if isinstance(things, list) else None


@router.get("/healthz", response_model=wire.Health, tags=["server"])
async def healthz(request: Request) -> dict[str, Any]:
    return {"status": "ok", "version": __version__, "model": settings_of(request).model}


def _cohere_document(document: str | dict[str, Any]) -> dict[str, Any]:
    return {"text": document} if isinstance(document, str) else document


async def _cohere_rerank(
    body: wire.RerankRequest | wire.RerankV2Request, documents: list[Any], request: Request
) -> dict[str, Any]:
    """The rerank tool, called as every surface calls it, on a Cohere request's query and ``documents`` (ids are
    positions); its result's JSON.

    Cohere's ``top_n`` is the tool's ``top_k``; the tool's own parameters the shapes take pass as given.
    """
    settings = settings_of(request)
    given = body.model_dump(include=set(wire.RERANK_EXTENSIONS), exclude_unset=True)
    arguments = {
        **given,
        "query": body.query,
        "documents": documents,
        "top_k": body.top_n,
        "model": served_model(body.model, settings, unknown_is_default=True),
        "timeout": _timeout(request, body.timeout, work=_count(body.documents, "documents"), documents=len(documents)),
    }
    return await run_tool(RERANK, arguments, request)


def _cohere_meta(result: dict[str, Any], warnings: list[str], *, api_version: str) -> dict[str, Any]:
    """Cohere's ``meta`` (API version, tokens, any warnings), plus the model that answered and decirank's usage."""
    usage = result["usage"]
    meta: dict[str, Any] = {
        "api_version": {"version": api_version},
        "tokens": {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]},
    }
    if warnings:
        meta["warnings"] = warnings
    if result.get("notes"):  # a document cut short or not in English: said beside the answer, never an error
        meta["notes"] = result["notes"]
    if result.get("calibration") is not None:  # decirank's extension, as min_relevance is
        meta["calibration"] = result["calibration"]
    return {**meta, "model": result["model"], "usage": usage}


_COHERE_ROUTE: dict[str, Any] = {"response_model_exclude_none": True, "responses": TOOL_ERRORS, "tags": ["tools"]}


def _rank_text(document: dict[str, Any], fields: list[str], index: int) -> str:
    """The text of an object document: one named field's value, or each named field as "field: value" lines."""
    present = [field for field in fields if field in document]
    if not present:
        raise InvalidInputError(
            f"documents.{index}",
            f"an object with at least one of the rank_fields {fields}",
            detail=f"it has the fields {sorted(document)}",
        )

    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    if len(fields) == 1:
        return text(document[present[0]])
    return "\n".join(f"{field}: {text(document[field])}" for field in present)


@api.post("/v1/rerank", response_model=wire.RerankResponse, **_COHERE_ROUTE)
async def rerank(body: wire.RerankRequest, request: Request) -> dict[str, Any]:
    """Score each document's relevance to the query; Cohere's v1 shapes, for ``cohere.Client``.

    A name this server does not run (``rerank-english-v3.0``) is answered by the server's model,
    named in ``meta.model``, so code written for Cohere's v1 API works unchanged.
    """
    # Ids are positions, so each result knows its index whatever ids the documents carry;
    # a document the tool cannot read goes to it as it is, for its error to name it.
    documents: list[Any] = []
    for index, doc in enumerate(body.documents):
        if isinstance(doc, str):
            documents.append({"id": index, "text": doc})
        elif body.rank_fields is not None:
            documents.append({"id": index, "text": _rank_text(doc, body.rank_fields, index)})
        elif isinstance(doc.get("text"), str):
            documents.append({"id": index, "text": doc["text"]})
        else:
            documents.append(doc)
    result = await _cohere_rerank(body, documents, request)
    results = [
        {
            "index": entry["id"],
            "relevance_score": entry["relevance_score"],
            "document": _cohere_document(body.documents[entry["id"]]) if body.return_documents else None,
        }
        for entry in result["results"]
    ]
    warnings = []
    if body.max_chunks_per_doc is not None:
        warnings.append("max_chunks_per_doc is not applied: each model reads a document up to its own context")
    usage = result["usage"]
    return {
        "id": result["run_id"],
        "results": results,
        "meta": _cohere_meta(result, warnings, api_version="1"),
        # Jina's rerank API shares this path and shape, and its clients read these two at the top level.
        "model": result["model"],
        "usage": {"total_tokens": usage["input_tokens"] + usage["output_tokens"]},
    }


@api.post("/v2/rerank", response_model=wire.RerankV2Response, **_COHERE_ROUTE)
async def rerank_v2(body: wire.RerankV2Request, request: Request) -> dict[str, Any]:
    """Score each document's relevance to the query; Cohere's v2 shapes, for ``cohere.ClientV2``.

    ``model`` is required as in Cohere's API; a name this server does not run (``rerank-v3.5``)
    is answered by the server's model, named in ``meta.model``.
    """
    documents = [{"id": index, "text": document} for index, document in enumerate(body.documents)]
    result = await _cohere_rerank(body, documents, request)
    warnings = []
    if body.max_tokens_per_doc is not None:
        warnings.append("max_tokens_per_doc is not applied: each model reads a document up to its own context")
    if body.relevant_spans is not None and body.relevant_spans.mode == "enabled":
        warnings.append("relevant_spans are not returned by decirank's models")
    return {
        "id": result["run_id"],
        "results": [
            {"index": entry["id"], "relevance_score": entry["relevance_score"]} for entry in result["results"]
        ],
        "meta": _cohere_meta(result, warnings, api_version="2"),
    }


def _tool_endpoint(definition: ToolDefinition) -> Any:
    """The endpoint of a tool: its body is the tool's HTTP request, called through the registry as MCP and plans
    call it, with the server's model rules and budget."""
    request_model = wire.tool_request(definition)
    # The tool's first parameter holds its work (items, texts, rows, refs): a 504 says how much there was.
    work = definition.parameters[0].name

    async def endpoint(body: Any, request: Request) -> dict[str, Any]:
        settings = settings_of(request)
        # Only what the request gave: a parameter it leaves out takes the tool's default.
        arguments = body.model_dump(exclude_unset=True)
        arguments["model"] = served_model(arguments.get("model"), settings)
        arguments["timeout"] = _timeout(request, arguments.get("timeout"), work=_count(arguments.get(work), work))
        return await run_tool(definition, arguments, request)

    endpoint.__name__ = endpoint.__qualname__ = definition.name
    endpoint.__doc__ = definition.description
    # FastAPI reads the body's model off the signature; set here, as the model is made at run time (and this
    # module's annotations are strings).
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=request_model),
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
        ],
        return_annotation=dict[str, Any],
    )
    return endpoint


#: The tags the OpenAPI document groups a tool's endpoint under, where not under "tools".
_TAGS = {"calibrate": ["calibrations"]}


def _add_tool_routes() -> None:
    """Every tool with a path gets its endpoint, made from its definition.

    A path a shape of another service already serves (``/v1/rerank``, Cohere's, above) keeps that shape.
    """
    served = {getattr(route, "path", None) for route in api.routes}
    for definition in definitions():
        if definition.route in served:
            continue
        api.add_api_route(
            definition.route,
            _tool_endpoint(definition),
            methods=["POST"],
            response_model=wire.tool_response(definition),
            responses=TOOL_ERRORS,
            tags=_TAGS.get(definition.name, ["tools"]),
            summary=definition.title,
            description=definition.description,
        )


_add_tool_routes()


def _no_calibration(name: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f"no calibration {name!r} on this server")


# The calibration store is read with blocking file I/O, so these run in FastAPI's thread pool (plain ``def``).
@api.get("/v1/calibrations", response_model=wire.CalibrationList, responses=error_responses(401), tags=["calibrations"])
def calibrations() -> dict[str, Any]:
    """Every calibration stored on this server, by name, without its labelled rows' scores."""
    return {"calibrations": CalibrationStore().list()}


@api.get(
    "/v1/calibrations/{name}",
    response_model=CalibrationSummaryOut,
    responses=error_responses(401, 404),
    tags=["calibrations"],
)
def calibration(name: str) -> dict[str, Any]:
    """One stored calibration: what it was fitted for, its map, and reliability before and after."""
    found = _stored_calibration(name)
    if found is None:
        raise _no_calibration(name)
    return found.summary()


@api.delete(
    "/v1/calibrations/{name}", response_model=wire.Removed, responses=error_responses(401, 404), tags=["calibrations"]
)
def remove_calibration(name: str) -> dict[str, Any]:
    """Remove a stored calibration; the tools refuse its name from then on."""
    try:
        removed = CalibrationStore().remove(name)
    except InvalidInputError:  # a name no calibration can have: none of that name, as an unknown one
        removed = False
    if not removed:
        raise _no_calibration(name)
    return {"removed": True}


def _stored_calibration(name: str) -> Calibration | None:
    """The calibration of that name; a name no calibration can have is none (a 404, as an unknown one)."""
    try:
        return CalibrationStore().get(name)
    except InvalidInputError:
        return None


#: Headers of a decision's answer: its run in the run log, and the model calls it took, as a tool's
#: usage.calls counts them; the System One and Decisions bodies have no field for either.
RUN_ID_HEADER = "x-decirank-run-id"
CALLS_HEADER = "x-decirank-calls"


async def _decide(
    tool: str, model: str, decision: DecisionRequest, request: Request, response: Response
) -> DecisionResponse:
    timeout = _timeout(request, None, work=f"{len(decision.questions)} questions")
    async with ToolCall(tool, model=model, timeout=timeout) as call:
        answered = await call.ask(decision)
    response.headers[RUN_ID_HEADER] = call.run_id
    response.headers[CALLS_HEADER] = str(call.usage.calls)
    return answered


def _systemone_question(qid: str, question: Any) -> Any:
    """A wire question as ours; its ``examples`` may name an example set stored on this server.

    An error's location keeps the id whole, dots and all (``["body", "questions", "a.b", "instructions"]``).
    """
    where = f"questions.{qid}"
    try:
        wire_question = question.model_dump(exclude_none=True)
        if "examples" in wire_question:
            wire_question["examples"] = resolve_examples(wire_question["examples"], f"{where}.examples")
        return systemone_wire.decode_question(wire_question, where)
    except InvalidInputError as error:
        if error.field == where or error.field.startswith(f"{where}."):
            inside = location_of(error.field.removeprefix(where).lstrip("."))[1:] if error.field != where else []
            error.location = ["body", "questions", qid, *inside]  # type: ignore[attr-defined]
        raise


@api.post("/v1/systemone", response_model=wire.SystemOneResponse, responses=TOOL_ERRORS, tags=["decisions"])
async def systemone(body: wire.SystemOneRequest, request: Request, response: Response) -> dict[str, Any]:
    """Answer typed questions about a state in the System One format."""
    settings = settings_of(request)
    questions = {qid: _systemone_question(qid, question) for qid, question in body.questions.items()}
    model = served_model(body.model, settings, unknown_is_default=True)
    answered = await _decide("systemone", model, DecisionRequest(body.state, questions), request, response)
    return {
        "model": answered.model,
        "answers": {qid: systemone_wire.encode_answer(answered.answers[qid], q) for qid, q in questions.items()},
        "usage": systemone_wire.encode_usage(answered.usage),
    }


@api.post("/v1/decisions", response_model=wire.DecisionsResponse, responses=TOOL_ERRORS, tags=["decisions"])
async def decisions(body: wire.DecisionsRequest, request: Request, response: Response) -> dict[str, Any]:
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
    answered = await _decide("decisions", model, DecisionRequest(state, questions), request, response)
    return {
        "model": answered.model,
        "answers": [
            decisions_wire.encode_answer(answered.answers[qid], questions[qid], name)
            for qid, name in zip(ids, names, strict=True)
        ],
        "usage": decisions_wire.encode_usage(answered.usage),
    }


# The run log is read with blocking I/O, so these two run in FastAPI's thread pool (plain ``def``).
@api.get("/v1/runs", response_model=wire.RunList, responses=error_responses(401, 422), tags=["runs"])
def runs(
    request: Request,
    limit: int = Query(20, ge=1, le=1000),
    tool: str | None = None,
    status: RunStatus | None = None,
) -> dict[str, Any]:
    """Recent tool runs, newest first, with their status, models, tokens and cost."""
    request.state.input_location = "query"
    runlog = current_runlog()
    if runlog is None:
        return {"enabled": False, "runs": []}
    return {"enabled": True, "runs": runlog.runs(limit=limit, tool=tool, status=status)}


@api.get("/v1/runs/{run_id}", responses=error_responses(401, 404, 422), tags=["runs"])
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
