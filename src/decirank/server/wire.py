"""Request and response bodies of ``decirank serve``, as pydantic models.

They check the shape of what comes in (FastAPI answers a misfit with 422 and
the field's location) and describe every endpoint in the OpenAPI docs. The
meaning of a body (empty instructions, an unknown dot path, a threshold out of
range) is checked by the tools themselves, whose errors name the field too.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..tools._calibrated import DEFAULT_CONFIDENCE
from ..tools.calibrate import MIN_EACH, MIN_ROWS
from ..tools.filter import DEFAULT_MIN_CONFIDENCE
from ..tools.score_list import DEFAULT_MAX_CONCURRENCY

ModelName = Annotated[
    str | None,
    Field(description="A role (decider) or a provider:model name this server runs; default: the server's model."),
]
Timeout = Annotated[float | None, Field(gt=0, description="Time budget in seconds for the whole call.")]

#: A character other than those Python's ``str.strip()`` removes: text the tools refuse as blank has none.
NON_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
#: Text that must not be blank. The tools refuse blank text themselves, naming the field; the
#: schema says so too, so that a client generated from it never sends what the server refuses.
Text = Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": NON_BLANK})]


def _whole_number(value: Any) -> Any:
    """A float with no fractional part as the integer it is: JSON Schema's ``integer`` includes ``2.0``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer field of a request: strict (no ``true``, no ``"5"``), but ``5.0`` is the integer 5.
Whole = Annotated[int, BeforeValidator(_whole_number)]
#: A whole number of at least 0, and of at least 1 (constraints inside the type, so a union with None keeps them).
FromZero = Annotated[int, Field(ge=0), BeforeValidator(_whole_number)]
FromOne = Annotated[int, Field(ge=1), BeforeValidator(_whole_number)]
#: A stored example set's name: not blank, as the server refuses a blank one.
SetName = Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": NON_BLANK})]
#: A stored calibration's name (``POST /v1/calibrate`` stores one); the probabilities go through its map.
CalibrationName = Annotated[
    SetName | None,
    Field(
        description="A calibration stored on this server (POST /v1/calibrate), fitted for this tool, question and "
        "model: the probabilities are then the calibrated ones."
    ),
]


class Body(BaseModel):
    """A request body, or part of one: strict, so what the schema does not allow is refused.

    Lax parsing would take ``false`` as the number 0 and ``"5"`` as the count 5,
    values the OpenAPI document says are not numbers.
    """

    model_config = ConfigDict(strict=True)


class Usage(BaseModel):
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cost: float | None = None
    currency: str = "USD"
    calls: int = 0


# --- tools ---------------------------------------------------------------------------------


class RankRequest(Body):
    """The input of ``builtin__rank``."""

    items: list[Any] = Field(description="The list to rank.")
    instructions: Text = Field(description="The choice question.")
    state: Any = Field(None, description='The context the items are judged against, e.g. {"question": "..."}.')
    describe: Text | None = Field(
        None, description="Dot path into each item to show as its option, e.g. url or meta.date."
    )
    none: Text | None = Field(None, description="Text of a 'nothing fits' option.")
    top_k: FromOne | None = Field(None, description="Keep only the best k.")
    model: ModelName = None
    timeout: Timeout = None


class RankedItem(BaseModel):
    item: Any
    index: int = Field(description="The item's position in the input.")
    probability: float | None = Field(description="Null for items that did not reach the final choice.")


class RankResponse(BaseModel):
    items: list[Any]
    ranked: list[RankedItem]
    none: float | None
    no_fit: bool
    model: str
    usage: Usage
    run_id: str | None


class RerankRequest(Body):
    """Cohere's v1 rerank request, for ``cohere.Client``, plus decirank's ``min_relevance``, ``calibration`` and
    ``timeout``."""

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
    min_relevance: float | None = Field(None, ge=0, le=1, description="Drop documents scored below this.")
    calibration: CalibrationName = None
    model: str | None = Field(
        None,
        description="A role or a model this server runs; any other name (a Cohere model's, such as "
        "rerank-english-v3.0) is answered by the server's model. Default: the server's model.",
    )
    timeout: Timeout = None


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


class RerankV2Request(Body):
    """Cohere's v2 rerank request (documents are strings), plus decirank's ``min_relevance``, ``calibration`` and
    ``timeout``."""

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
    min_relevance: float | None = Field(None, ge=0, le=1, description="Drop documents scored below this.")
    calibration: CalibrationName = None
    timeout: Timeout = None


class RerankV2Result(BaseModel):
    index: int = Field(description="The document's position in the request.")
    relevance_score: float


class RerankV2Response(BaseModel):
    id: str | None
    results: list[RerankV2Result]
    meta: dict[str, Any]


class FilterRequest(Body):
    items: list[Any]
    question: Text = Field(description="The yes/no question asked of each item.")
    state: Any = Field(None, description="The context the items are judged against; none: no context.")
    min_confidence: float | None = Field(
        None,
        description=f"Keep items at least this likely; null: {DEFAULT_MIN_CONFIDENCE:g}, unless a target picks the "
        "cut-off.",
    )
    describe: str | None = None
    max_items_per_call: FromOne | None = None
    model: ModelName = None
    timeout: Timeout = None
    examples: list[dict[str, Any]] | SetName | None = Field(
        None,
        description='Labelled items: [{"item": ..., "answer": true/false}] (shown as items are) or '
        '[{"state": <item text>, "answer": ...}], or the name of an example set stored on this server.',
    )
    calibration: CalibrationName = None
    target_recall: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Keep at least this share of the items for which the answer is yes (with the calibration's "
        "confidence); the calibration's labelled rows pick the cut-off. Needs calibration.",
    )
    target_precision: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Keep items of which at least this share are yes (with confidence); the calibration's labelled "
        "rows pick the cut-off. Needs calibration.",
    )
    confidence: float | None = Field(
        None, gt=0, lt=1, description=f"How sure a target's promise is; default {DEFAULT_CONFIDENCE:g}."
    )


class FilterDecision(BaseModel):
    item: Any
    index: int
    probability: float = Field(description="The item's probability: the calibrated one when a calibration is named.")
    raw_probability: float = Field(description="The model's own probability (the same without a calibration).")
    kept: bool


class Promise(BaseModel):
    """The cut-off a target picked from a calibration's labelled rows, and what it promises on new items."""

    threshold: float | None = Field(description="The cut-off on the model's own probability; null keeps every item.")
    target_recall: float | None = None
    target_precision: float | None = None
    confidence: float
    method: str
    calibration_rows: int
    observed_recall: float = Field(description="The recall on the calibration's labelled rows at this cut-off.")
    observed_precision: float | None = Field(description="The precision on the labelled rows; null: none kept.")
    note: str | None = None
    batch_positives: int | None = Field(
        None, description="A recall promise: the fewest positives it assumed the batch holds (it holds for them too)."
    )


class TextNote(BaseModel):
    """How the model read one input: cut short, or not in English; never an error."""

    index: int | None = Field(description="The input's position; null for the query or state every question shares.")
    kind: Literal["cut", "non_english"]
    message: str


Notes = Annotated[
    list[TextNote], Field(default_factory=list, description="Inputs the model cut short or that do not look English.")
]


class FilterResponse(BaseModel):
    items: list[Any]
    count: int
    dropped: list[Any]
    dropped_count: int
    decisions: list[FilterDecision]
    min_confidence: float
    model: str
    usage: Usage
    run_id: str | None
    notes: Notes
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")
    promise: Promise | None = Field(None, description="With target_recall or target_precision: the promise kept.")


Texts = Annotated[list[Any], Field(description="The texts, each asked about on its own (others shown as JSON).")]


def _text_examples(answer: str) -> Any:
    return Field(
        None,
        description=f'Labelled texts: [{{"item": <text>, "answer": {answer}}}] or [{{"state": <text>, "answer": '
        f'{answer}}}], or the name of an example set stored on this server.',
    )


class ClassifyRequest(Body):
    """The input of ``builtin__classify``: one choice question per text."""

    texts: Texts
    question: Text = Field(description="The choice question asked of each text.")
    options: (
        Annotated[list[str], Field(min_length=1, max_length=255)]
        | Annotated[dict[str, str], Field(min_length=1, max_length=255)]
    ) = Field(description="The labels, or an object of label to description (2 to 255 options, none's counted).")
    none: str | None = Field(None, description="Text of a 'none of these' option, whose key is none.")
    examples: list[dict[str, Any]] | SetName | None = _text_examples("<option key>")
    calibration: CalibrationName = None
    coverage: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Give each text a prediction set that holds its right option for at least this share of new "
        "texts, with confidence (conformal, from the calibration's labelled rows). Needs calibration.",
    )
    confidence: float | None = Field(
        None, gt=0, lt=1, description=f"How sure coverage's promise is; default {DEFAULT_CONFIDENCE:g}."
    )
    model: ModelName = None
    timeout: Timeout = None


class ClassifyDecision(BaseModel):
    index: int = Field(description="The text's position in the request.")
    choice: str = Field(description="The chosen option's key (none when 'none of these' won).")
    probability: float
    probabilities: dict[str, float]
    prediction_set: list[str] | None = Field(
        None, description="With coverage: the options that hold the right one at that rate, most probable first."
    )
    none_fits: bool | None = Field(
        None, description="With coverage: true when the set is empty or holds the 'none of these' option."
    )


class Coverage(BaseModel):
    """The conformal threshold ``coverage`` picked from the calibration's labelled rows."""

    coverage: float
    confidence: float
    threshold: float = Field(description="An option is in a set when 1 - its model probability is at most this.")
    calibration_rows: int
    method: str
    mean_set_size: float | None


class ClassifyResponse(BaseModel):
    decisions: list[ClassifyDecision]
    model: str
    usage: Usage
    run_id: str | None
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")
    coverage: Coverage | None = Field(None, description="With coverage: the prediction sets' threshold.")


class ScoreRequest(Body):
    """The input of ``builtin__score``: one likelihood question per text."""

    texts: Texts
    question: Text = Field(description="The yes/no question asked of each text.")
    true: str | None = Field(None, description="What a yes means.")
    false: str | None = Field(None, description="What a no means.")
    examples: list[dict[str, Any]] | SetName | None = _text_examples("true/false")
    calibration: CalibrationName = None
    model: ModelName = None
    timeout: Timeout = None


class ScoreResponse(BaseModel):
    probabilities: list[float] = Field(description="Each text's probability, in input order (calibrated, with one).")
    raw_probabilities: list[float] = Field(description="The model's own probabilities (the same without one).")
    calibration: str | None = Field(None, description="The calibration the probabilities went through.")
    model: str
    usage: Usage
    run_id: str | None
    notes: Notes


class ScoreListRequest(Body):
    """The input of ``score_list``: refs are resolved to text in this server's artifact store."""

    refs: list[str | dict[str, Any]] | str = Field(
        description='Refs "run_id/agent_id", or {"ref": ...} objects, or that array as a JSON string.'
    )
    evaluator: Text = Field(description="validate:<type>, score:<criterion>, or exec:<cmd> (if the server allows it).")
    top_k: FromZero = Field(0, description="How many top-scoring refs are winners; 0 ranks without pruning.")
    max_concurrency: FromOne = Field(
        DEFAULT_MAX_CONCURRENCY, description="Upper bound on parallel evaluator calls."
    )
    model: ModelName = None
    timeout: Timeout = None


class ScoredRef(BaseModel):
    rank: int
    ref: str
    score: float | None
    verdict: str
    issues: list[str]
    reason: str
    pruned: bool


class ScoreListResponse(BaseModel):
    run_id: str
    evaluator: str
    total: int
    top_k: int
    winners: list[str]
    ranked: list[ScoredRef]
    model: str | None = None
    usage: Usage


# --- calibrations --------------------------------------------------------------------------


class CalibrateRequest(Body):
    """The input of ``builtin__calibrate``: labelled rows for one question, to fit and store a calibration."""

    name: SetName = Field(
        description="The name to store the calibration under (a letter or digit, then letters, digits, _, . or -)."
    )
    question: Text | None = Field(
        None,
        description="The question the tool asks (rerank: the query; null when each row has its own query).",
    )
    tool: Literal["filter", "score", "rerank", "classify"] = Field(
        "filter", description="The tool whose probabilities are calibrated."
    )
    rows: list[dict[str, Any]] | SetName = Field(
        description='Labelled rows: [{"item" or "state": <text>, "answer": true/false}] (classify: an option key; '
        f'rerank: optionally a "query" per row), at least {MIN_ROWS} with {MIN_EACH} of each yes/no answer, or the '
        "name of an example set stored on this server."
    )
    state: Any = Field(None, description="filter's context the items are judged against.")
    options: (
        Annotated[list[str], Field(min_length=1, max_length=255)]
        | Annotated[dict[str, str], Field(min_length=1, max_length=255)]
        | None
    ) = Field(None, description="classify's labels, or an object of label to description.")
    none: str | None = Field(None, description="classify's 'none of these' option.")
    true: str | None = Field(None, description="score's: what a yes means.")
    false: str | None = Field(None, description="score's: what a no means.")
    method: Literal["auto", "identity", "platt", "isotonic", "temperature"] = Field(
        "auto",
        description="auto picks by cross-validated log loss (identity, platt or isotonic; classify: identity or "
        "temperature).",
    )
    save: bool = Field(True, description="Store it under name; false only measures.")
    model: ModelName = None
    timeout: Timeout = None


class ReliabilityBin(BaseModel):
    low: float
    high: float
    rows: int
    mean_probability: float
    frequency: float


class Reliability(BaseModel):
    """How far probabilities are from the frequencies they claim: ECE over ten bins, Brier, log loss."""

    rows: int
    ece: float
    brier: float
    log_loss: float
    table: list[ReliabilityBin] = Field(description="One entry per non-empty bin.")


class ProbabilityMap(BaseModel):
    method: str
    parameters: dict[str, Any]


class CalibrationSummary(BaseModel):
    """A stored calibration: what it was fitted for, its map, and reliability before and after."""

    name: str
    tool: str
    model: str = Field(description="The model it was fitted for; the tools refuse it for another.")
    question: str | None
    options: dict[str, str] | None
    data_hash: str = Field(description="SHA-256 of the labelled rows, question and options.")
    created_at: str
    rows: int
    positives: int | None = Field(None, description="Yes/no: how many rows were labelled yes.")
    method: str
    map: ProbabilityMap
    before: Reliability = Field(description="The model's own probabilities on the labelled rows.")
    after: Reliability = Field(description="Out-of-fold calibrated probabilities: no row judges a map fitted on it.")
    cross_validated_log_loss: dict[str, float]
    run_id: str | None


class CalibrateResponse(CalibrationSummary):
    saved: bool
    usage: Usage


class CalibrationList(BaseModel):
    calibrations: list[CalibrationSummary]


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
    pid: int


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
