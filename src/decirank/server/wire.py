"""Request and response bodies of ``decirank serve``, as pydantic models.

They check the shape of what comes in (FastAPI answers a misfit with 422 and
the field's location) and describe every endpoint in the OpenAPI docs. The
meaning of a body (empty instructions, an unknown dot path, a threshold out of
range) is checked by the tools themselves, whose errors name the field too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..tools._definition import ToolDefinition
from ..tools._params import FromOne, FromZero, Text, Whole
from ..tools.calibrate import CalibrationSummaryOut
from ..tools.rerank import RERANK

#: The ``model`` of a tool's request: over HTTP, naming none means the server's model, not the tool's default.
ModelName = Annotated[
    str | None,
    Field(description="A role (decider) or a provider:model name this server runs; default: the server's model."),
]
#: A Cohere or TEI request's budget (a tool's request takes the tool's own ``timeout``).
Timeout = Annotated[float | None, Field(gt=0, description="Time budget in seconds for the whole call.")]


class Body(BaseModel):
    """A request body, or part of one: strict, so what the schema does not allow is refused.

    Lax parsing would take ``false`` as the number 0 and ``"5"`` as the count 5,
    values the OpenAPI document says are not numbers.
    """

    model_config = ConfigDict(strict=True)


# --- tools ---------------------------------------------------------------------------------


def tool_request(definition: ToolDefinition) -> type[Body]:
    """A tool's request body: the parameters its definition offers over HTTP, strict as every body.

    HTTP adds only what is its own: a request naming no ``model`` is answered by the server's model.
    The component keeps the name clients read (``FilterRequest``).
    """
    name = f"{_camel(definition.name)}Request"
    offered = definition.request_model("http", base=Body, name=name)
    if "model" not in offered.model_fields:
        return offered
    return create_model(  # type: ignore[call-overload]
        name, __base__=offered, __doc__=offered.__doc__, model=(ModelName, None)
    )


def tool_response(definition: ToolDefinition) -> type[BaseModel]:
    """A tool's response body: its result model, under the component name clients read (``FilterResponse``)."""
    result = definition.result
    name = f"{_camel(definition.name)}Response"
    return create_model(name, __base__=result, __doc__=result.__doc__)  # type: ignore[call-overload]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


#: The rerank tool's parameters that the Cohere shapes take beside Cohere's own fields, as Cohere's API has
#: none of them; their types, bounds and help are the definition's, as on every surface. The shapes write
#: the rest themselves: Cohere's ``top_n`` is the tool's ``top_k``, its ``return_documents`` and
#: ``rank_fields`` shape the answer and the text read, and ``model`` and ``timeout`` are the server's (an
#: unknown model is the server's own; the budget grows with the documents).
RERANK_EXTENSIONS = ("min_relevance", "calibration", "max_documents_per_call")
_rerank_extensions: dict[str, Any] = {
    name: (RERANK.parameter(name).wire, RERANK.parameter(name).field_info()) for name in RERANK_EXTENSIONS
}


class _RerankV1(Body):
    query: Text
    documents: list[str | dict[str, Any]] = Field(
        description='Strings, or objects with a "text" field (or the fields rank_fields names).'
    )
    top_n: FromZero | None = Field(None, description="Keep only the best n (0 or null keeps all).")
    return_documents: bool = Field(False, description="Include each document in its result.")
    rank_fields: list[str] | None = Field(
        None,
        min_length=1,
        description='The fields of object documents to read, each shown as "field: value" on its own line; '
        'default ["text"].',
    )
    max_chunks_per_doc: FromOne | None = Field(
        None, description="Accepted for Cohere clients; each model reads a document up to its own context."
    )
    model: str | None = Field(
        None,
        description="A role or a model this server runs; any other name (a Cohere model's, such as "
        "rerank-english-v3.0) is answered by the server's model. Default: the server's model.",
    )
    timeout: Timeout = None


RerankRequest = create_model(  # type: ignore[call-overload]
    "RerankRequest",
    __base__=_RerankV1,
    __doc__="Cohere's v1 rerank request, for ``cohere.Client``, plus decirank's rerank parameters "
    f"({', '.join(RERANK_EXTENSIONS)}) and ``timeout``.",
    **_rerank_extensions,
)


class RerankResult(BaseModel):
    index: int = Field(description="The document's position in the request.")
    relevance_score: float
    document: dict[str, Any] | None = None


class JinaUsage(BaseModel):
    total_tokens: int


class RerankResponse(BaseModel):
    id: str | None
    results: list[RerankResult]
    meta: dict[str, Any]
    model: str = Field(description="The model that answered (Jina's clients read it here, Cohere's in meta).")
    usage: JinaUsage = Field(description="Tokens read, as Jina's rerank API reports them.")


class RelevantSpans(Body):
    """Cohere v2's ``relevant_spans`` option: accepted, never answered (a warning in ``meta`` says so)."""

    mode: Literal["enabled", "disabled"]
    threshold: float | None = None
    max_spans: Whole | None = None


class _RerankV2(Body):
    model: str = Field(
        description="A role or a model this server runs; any other name (a Cohere model's) is answered by "
        "the server's model."
    )
    query: Text
    documents: list[str] = Field(description="The texts to score against the query.")
    top_n: FromZero | None = Field(None, description="Keep only the best n (0 or null keeps all).")
    max_tokens_per_doc: FromOne | None = Field(
        None, description="Accepted for Cohere clients; each model reads a document up to its own context."
    )
    relevant_spans: RelevantSpans | None = None
    priority: Whole | None = Field(None, description="Accepted for Cohere clients; requests are served in order.")
    timeout: Timeout = None


RerankV2Request = create_model(  # type: ignore[call-overload]
    "RerankV2Request",
    __base__=_RerankV2,
    __doc__="Cohere's v2 rerank request (documents are strings), plus decirank's rerank parameters "
    f"({', '.join(RERANK_EXTENSIONS)}) and ``timeout``.",
    **_rerank_extensions,
)


class RerankV2Result(BaseModel):
    index: int = Field(description="The document's position in the request.")
    relevance_score: float


class RerankV2Response(BaseModel):
    id: str | None
    results: list[RerankV2Result]
    meta: dict[str, Any]


class CalibrationList(BaseModel):
    calibrations: list[CalibrationSummaryOut]


class Removed(BaseModel):
    removed: Literal[True]


# --- System One ----------------------------------------------------------------------------


class NoulCriteria(Body):
    true: str | None = Field(None, description="What a true statement means.")
    false: str | None = Field(None, description="What a false statement means.")


QuestionExamples = Annotated[
    list[dict[str, Any]] | str | None,
    Field(
        description='Labelled examples: [{"state": ..., "answer": ...}] (true/false for noul, an option key for '
        "choice), or the name of an example set stored on this server.",
    ),
]


class NoulQuestion(Body):
    type: Literal["noul"]
    instructions: Text
    criteria: NoulCriteria | None = None
    examples: QuestionExamples = None


class ChoiceQuestion(Body):
    type: Literal["choice"]
    instructions: Text
    criteria: dict[str, str] = Field(min_length=2, max_length=255, description="Option key to its description.")
    examples: QuestionExamples = None


class ScoreQuestion(Body):
    type: Literal["score"]
    instructions: Text
    criteria: list[str] = Field(min_length=2, max_length=10, description="Levels, lowest first.")


SystemOneQuestion = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class SystemOneRequest(Body):
    model: str | None = Field(
        None,
        description="A model this server runs (local, lexical, a role); any other name, such as a hosted "
        "model's, is answered by the server's own model.",
    )
    state: Any = None
    questions: dict[str, SystemOneQuestion] = Field(min_length=1)


class SystemOneResponse(BaseModel):
    model: str
    answers: dict[str, dict[str, Any]]
    usage: dict[str, Any]


# --- OpenAI's Decisions shape --------------------------------------------------------------


class InputText(Body):
    type: Literal["input_text"]
    text: str


class InputImage(Body):
    """Part of the shape, so that refusing it (decision models here read no images) names where it is."""

    model_config = ConfigDict(extra="allow")

    type: Literal["input_image"]


InputPart = Annotated[InputText | InputImage, Field(discriminator="type")]


class InputMessage(Body):
    role: Literal["user"]
    type: Literal["message"] | None = None
    content: str | list[InputPart]


class PredicateQuestion(Body):
    type: Literal["predicate"]
    name: str | None = None
    instructions: Text


class Choice(Body):
    value: str
    description: str | None = None


class DecisionChoiceQuestion(Body):
    type: Literal["choice"]
    name: str | None = None
    instructions: Text
    choices: list[Choice] = Field(min_length=2, max_length=255)


class Level(Body):
    label: str
    description: str | None = None


class DecisionScoreQuestion(Body):
    type: Literal["score"]
    name: str | None = None
    instructions: Text
    levels: list[Level] = Field(min_length=2, max_length=10)


DecisionQuestion = Annotated[
    PredicateQuestion | DecisionChoiceQuestion | DecisionScoreQuestion, Field(discriminator="type")
]


class DecisionsRequest(Body):
    model: str = Field(description="A model this server runs; any other name is answered by the server's own model.")
    input: str | list[InputMessage]
    questions: list[DecisionQuestion] = Field(min_length=1)


class DecisionsResponse(BaseModel):
    model: str
    answers: list[dict[str, Any]]
    usage: dict[str, Any]


# --- the rest ------------------------------------------------------------------------------


class RunList(BaseModel):
    enabled: bool = Field(description="False when the run log is switched off on this server.")
    runs: list[dict[str, Any]]


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    model: str


class Readiness(BaseModel):
    """Whether this server process should be sent requests, and what it checked to say so."""

    status: Literal["ready", "not ready"]
    model: str
    #: The server's models are loaded (start-up loads them before the port accepts).
    model_loaded: bool
    #: ``writable``, ``off``, or why a run cannot be written now.
    runlog: str
    #: The worker process that answered.
    pid: int | None = None


# --- errors --------------------------------------------------------------------------------


class ErrorInfo(BaseModel):
    """A typed decirank error: its class name and message, and the fields of that class."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="The error's class, e.g. DecisionTimeoutError or LimitExceededError.")
    message: str


class ErrorBody(BaseModel):
    error: ErrorInfo


class HTTPErrorBody(BaseModel):
    detail: str


class ValidationIssue(BaseModel):
    model_config = ConfigDict(extra="allow")

    loc: list[str | int] = Field(description='Where the problem is, e.g. ["body", "documents", 3].')
    msg: str
    type: str


class ValidationErrorBody(BaseModel):
    detail: list[ValidationIssue]
    error: ErrorInfo | None = Field(
        None,
        description="The first problem as an InvalidInputError naming the field, whose message SDKs show "
        "(OpenAI's, Cohere's).",
    )
