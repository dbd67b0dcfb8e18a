"""The tools by their agent-facing names (``builtin__rank``, ...), with their schemas.

This is the one list of tools that the MCP server and the plan runner both
serve, so a tool's name, its JSON schemas and the way its JSON arguments
become a Python call are written once. Field names and descriptions follow
the tools' documentation (``builtin__rank``, ``score_list``, ``DecisionReranker``).

Arguments arrive as JSON objects: :func:`call_tool` refuses names a tool does
not take and missing required ones, each naming the field, and leaves every
other check to the tool itself, whose errors name the field too.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from .._jsonpath import first_unfit
from ..calibration._maps import LIKELIHOOD_METHODS
from ..decisions.decider import DEFAULT_ROLE
from ..errors import InvalidInputError
from ._checks import check_optional_text
from .calibrate import CALIBRATED_TOOLS, MIN_EACH, MIN_ROWS, acalibrate
from .classify import NONE_KEY, aclassify
from .filter import afilter
from .rank import arank
from .rerank import arerank
from .score import ascore
from .score_list import DEFAULT_MAX_CONCURRENCY, ascore_list

__all__ = ["ToolSpec", "call_tool", "check_arguments", "get_tool", "tool_specs"]


class ToolRunner(Protocol):
    """Runs a tool on checked JSON arguments; ``allow_exec`` is whether ``exec:`` evaluators may run."""

    def __call__(self, arguments: dict[str, Any], *, allow_exec: bool) -> Awaitable[dict[str, Any]]: ...


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    #: False when calling the tool changes stored state (score_list stamps refs).
    read_only: bool
    #: Takes checked JSON arguments, returns the tool's JSON result.
    run: ToolRunner
    #: True when a call may replace what is stored (calibrate overwrites a calibration of its name).
    destructive: bool = False

    @property
    def required(self) -> list[str]:
        return list(self.input_schema.get("required", []))

    @property
    def fields(self) -> list[str]:
        return list(self.input_schema["properties"])


def _object(properties: dict[str, Any], required: list[str], *, closed: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if closed:
        schema["additionalProperties"] = False
    return schema


_MODEL = {"type": "string", "description": "The decision model role; default decider"}
_ANY: dict[str, Any] = {}
_USAGE = {
    "type": "object",
    "description": "Tokens, cost and calls of every model call the tool made",
    "properties": {
        "input_tokens": {"type": "integer"},
        "output_tokens": {"type": "integer"},
        "cached_tokens": {"type": "integer"},
        "cost": {"type": ["number", "null"]},
        "currency": {"type": "string"},
        "calls": {"type": "integer"},
    },
}
_ANSWERED_BY = {"type": "string", "description": "The model(s) that answered"}
_RUN_ID = {"type": ["string", "null"], "description": "This call's run in the run log"}
_CALIBRATION = {
    "type": "string",
    "description": "The name of a stored calibration (builtin__calibrate) fitted for this tool, question and model: "
    "the probabilities are then the calibrated ones",
}
_CALIBRATION_USED = {"type": ["string", "null"], "description": "The calibration the probabilities went through"}
_OPEN_UNIT = {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}


def _tool_result(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A tool's output schema: its own fields, then the model that answered, usage and run id every tool reports."""
    return _object({**properties, "model": _ANSWERED_BY, "usage": _USAGE, "run_id": _RUN_ID}, required, closed=False)


def _model_argument(arguments: dict[str, Any]) -> str:
    return check_optional_text(arguments.get("model"), "model") or DEFAULT_ROLE


async def _run_rank(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await arank(
        arguments["items"],
        arguments["instructions"],
        arguments.get("state"),
        describe=arguments.get("describe"),
        none=arguments.get("none"),
        top_k=arguments.get("top_k"),
        model=_model_argument(arguments),
    )
    return result.to_dict()


async def _run_rerank(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await arerank(
        arguments["query"],
        arguments["documents"],
        top_k=arguments.get("top_k"),
        min_relevance=arguments.get("min_relevance"),
        model=_model_argument(arguments),
        calibration=arguments.get("calibration"),
    )
    return result.to_dict()


async def _run_filter(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await afilter(
        arguments["items"],
        arguments["question"],
        arguments.get("state"),
        min_confidence=arguments.get("min_confidence"),
        describe=arguments.get("describe"),
        model=_model_argument(arguments),
        examples=arguments.get("examples"),
        calibration=arguments.get("calibration"),
        target_recall=arguments.get("target_recall"),
        target_precision=arguments.get("target_precision"),
        confidence=arguments.get("confidence"),
    )
    return result.to_dict()


async def _run_classify(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await aclassify(
        arguments["texts"],
        arguments["question"],
        arguments["options"],
        none=arguments.get("none"),
        examples=arguments.get("examples"),
        model=_model_argument(arguments),
        calibration=arguments.get("calibration"),
        coverage=arguments.get("coverage"),
        confidence=arguments.get("confidence"),
    )
    return result.to_dict()


async def _run_score(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await ascore(
        arguments["texts"],
        arguments["question"],
        true=arguments.get("true"),
        false=arguments.get("false"),
        examples=arguments.get("examples"),
        model=_model_argument(arguments),
        calibration=arguments.get("calibration"),
    )
    return result.to_dict()


async def _run_calibrate(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await acalibrate(
        arguments["rows"],
        arguments.get("question"),
        name=arguments["name"],
        tool=arguments.get("tool", "filter"),
        state=arguments.get("state"),
        options=arguments.get("options"),
        none=arguments.get("none"),
        true=arguments.get("true"),
        false=arguments.get("false"),
        method=arguments.get("method", "auto"),
        model=_model_argument(arguments),
        save=arguments.get("save", True),
    )
    return result.to_dict()


async def _run_score_list(arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
    result = await ascore_list(
        arguments["refs"],
        arguments["evaluator"],
        top_k=arguments.get("top_k", 0),
        max_concurrency=arguments.get("max_concurrency", DEFAULT_MAX_CONCURRENCY),
        model=_model_argument(arguments),
        allow_exec=allow_exec,
    )
    return result.to_dict()


RANK = ToolSpec(
    name="builtin__rank",
    title="Rank a list",
    description=(
        "Ranks a whole list against a question in one decision-model call.\n\n"
        "The items become the options of one choice question, state is the context they're judged against, "
        "and instructions is the question. Each option shows the item's describe field, or the whole item "
        "when describe is absent. items is the list sorted by probability, highest first, and ranked pairs "
        "each item with its probability; both are cut to top_k. Options are shown in a shuffled order seeded "
        "from the items, so the same list ranks the same way on a rerun. none adds a 'nothing fits' option: "
        "its probability comes back as none, and no_fit is true when it beats every item. Lists over 254 "
        "items are ranked in chunks sent together whose best meet in a final choice; items that don't reach "
        "the final follow the finalists with a null probability. Needs a decision model role, decider by "
        "default.\n\n"
        "Use it to rerank search results, candidates or options against a question: one call instead of one "
        "per item, and no LLM. Keep state to what the question needs: the question and its context, not the "
        "items. For an absolute yes or no per item rather than an order, use builtin__filter."
    ),
    input_schema=_object(
        {
            "describe": {
                "type": "string",
                "description": "Dot path into each item to show as the option, e.g. url or meta.date",
            },
            "instructions": {"type": "string", "description": "The choice question"},
            "items": {
                "type": "array",
                "items": _ANY,
                "description": "The list, usually a template like {{E1.results}}",
            },
            "model": _MODEL,
            "none": {"type": "string", "description": "Text of a 'nothing fits' option"},
            "state": {
                "description": 'The context the items are judged against, e.g. {"question": "{{input.question}}"}; '
                "optional"
            },
            "top_k": {"type": "integer", "minimum": 1, "description": "Keep only the best k"},
        },
        ["instructions", "items"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "items": {"type": "array", "items": _ANY, "description": "The items, highest probability first"},
            "no_fit": {"type": "boolean", "description": "True when 'nothing fits' beat every item"},
            "none": {"type": ["number", "null"], "description": "The probability of the 'nothing fits' option"},
            "ranked": {
                "type": "array",
                "description": "Each item with its input index and probability (null: not in the final choice)",
                "items": _object(
                    {"item": _ANY, "index": {"type": "integer"}, "probability": {"type": ["number", "null"]}},
                    ["item", "index", "probability"],
                    closed=False,
                ),
            },
        },
        ["items", "ranked"],
    ),
    read_only=True,
    run=_run_rank,
)

RERANK = ToolSpec(
    name="builtin__rerank",
    title="Rerank documents by relevance",
    description=(
        "Scores each document's relevance to a query with one likelihood question per document, and sorts "
        "by it.\n\n"
        "The query is the state and each document is asked as 'This note bears on the request: <document>'; "
        "its relevance_score is the probability. Documents with equal scores keep their input order. Large "
        "lists are split across parallel calls that share one time budget; a failed call or a missing answer "
        "fails the whole rerank, and no score is ever invented. Scores are probabilities of relevance that run "
        "low: with the local model, min_relevance 0.3 keeps about 80% of relevant passages on TREC DL19, "
        "0.5 only 57%. notes lists documents cut short or not in English. calibration (a builtin__calibrate name "
        "fitted for this query, or for any query) makes relevance scores, and min_relevance, calibrated."
    ),
    input_schema=_object(
        {
            "query": {"type": "string", "description": "The request the documents are scored against"},
            "documents": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"type": "string"},
                        _object({"id": _ANY, "text": {"type": "string"}, "metadata": _ANY}, ["text"], closed=False),
                    ]
                },
                "description": "Strings, or objects {id, text, metadata}; a string's id is its position",
            },
            "top_k": {"type": "integer", "minimum": 0, "description": "Keep only the best k; 0 keeps all"},
            "min_relevance": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Drop documents scored below this; 0.3 suits the local model",
            },
            "calibration": _CALIBRATION,
            "model": _MODEL,
        },
        ["query", "documents"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "results": {
                "type": "array",
                "description": "The documents, most relevant first",
                "items": _object(
                    {
                        "id": _ANY,
                        "document": _ANY,
                        "relevance_score": {"type": "number"},
                        "rank": {"type": "integer"},
                    },
                    ["id", "document", "relevance_score", "rank"],
                    closed=False,
                ),
            },
            "calibration": _CALIBRATION_USED,
        },
        ["results"],
    ),
    read_only=True,
    run=_run_rerank,
)

FILTER = ToolSpec(
    name="builtin__filter",
    title="Filter a list (decide gate)",
    description=(
        "Keeps the items for which a yes/no question is likely true: an absolute decision per item, not an "
        "order.\n\n"
        "Each item is one likelihood question (the question, then the item's describe field or the whole "
        "item) asked about state; items whose probability reaches min_confidence (default 0.5) are kept. "
        "items and dropped keep the input order, and decisions carries every item's probability. An item's "
        "fate does not depend on the other items; to order a list, use builtin__rank. examples (labelled items, "
        "or a stored example set's name) teach a model that learns from them what the question means. calibration "
        "(a builtin__calibrate name) makes probabilities calibrated; with it, target_recall or target_precision "
        "picks the cut-off from the calibration's labelled rows so that the target holds on new items with "
        "confidence (default 0.9), and promise says the cut-off and what the labelled rows showed at it."
    ),
    input_schema=_object(
        {
            "items": {"type": "array", "items": _ANY, "description": "The list, usually a template like {{E1.items}}"},
            "question": {"type": "string", "description": "The yes/no question asked of each item"},
            "state": {"description": "The context the items are judged against; optional"},
            "min_confidence": {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "Keep items at least this likely; default 0.5 (a target picks it instead)",
            },
            "describe": {"type": "string", "description": "Dot path into each item to show, e.g. title or meta.date"},
            "examples": {
                "description": (
                    'Labelled items that teach the question: [{"item": ..., "answer": true|false}] (each item shown '
                    'as items are) or [{"state": "<item text>", "answer": ...}], or the name of a stored example set'
                ),
                "anyOf": [
                    {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                _object({"item": _ANY, "answer": {"type": "boolean"}}, ["item", "answer"], closed=True),
                                _object(
                                    {"state": _ANY, "answer": {"type": "boolean"}}, ["state", "answer"], closed=True
                                ),
                            ]
                        },
                    },
                    {"type": "string"},
                ],
            },
            "calibration": _CALIBRATION,
            "target_recall": {
                **_OPEN_UNIT,
                "description": "Keep at least this share of the yes items, with confidence; the calibration's "
                "labelled rows pick the cut-off (needs calibration)",
            },
            "target_precision": {
                **_OPEN_UNIT,
                "description": "Keep items of which at least this share are yes, with confidence (needs calibration)",
            },
            "confidence": {**_OPEN_UNIT, "description": "How sure a target's promise is; default 0.9"},
            "model": _MODEL,
        },
        ["items", "question"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "items": {"type": "array", "items": _ANY, "description": "The kept items, in input order"},
            "count": {"type": "integer"},
            "dropped": {"type": "array", "items": _ANY, "description": "The dropped items, in input order"},
            "dropped_count": {"type": "integer"},
            "decisions": {
                "type": "array",
                "description": "Every item with its input index, probability (calibrated, with a calibration), "
                "the model's own raw_probability and whether it was kept",
                "items": _object(
                    {
                        "item": _ANY,
                        "index": {"type": "integer"},
                        "probability": {"type": "number"},
                        "raw_probability": {"type": "number"},
                        "kept": {"type": "boolean"},
                    },
                    ["item", "index", "probability", "kept"],
                    closed=False,
                ),
            },
            "min_confidence": {"type": "number"},
            "calibration": _CALIBRATION_USED,
            "promise": {
                "description": "With a target: the cut-off on the model's probability (null keeps all), the target, "
                "confidence, and the recall and precision observed on the calibration's labelled rows",
                "anyOf": [
                    _object(
                        {
                            "threshold": {"type": ["number", "null"]},
                            "target_recall": {"type": "number"},
                            "target_precision": {"type": "number"},
                            "confidence": {"type": "number"},
                            "method": {"type": "string"},
                            "calibration_rows": {"type": "integer"},
                            "observed_recall": {"type": "number"},
                            "observed_precision": {"type": ["number", "null"]},
                            "note": {"type": ["string", "null"]},
                        },
                        ["threshold", "confidence", "calibration_rows", "observed_recall"],
                        closed=False,
                    ),
                    {"type": "null"},
                ],
            },
        },
        ["items", "count", "dropped", "dropped_count"],
    ),
    read_only=True,
    run=_run_filter,
)

_TEXTS = {
    "type": "array",
    "items": _ANY,
    "description": "The texts, each asked about on its own (anything but a string is shown as JSON)",
}


def _text_examples(answer: dict[str, Any], answer_words: str) -> dict[str, Any]:
    """The schema of ``examples`` for a tool whose texts are the states: labelled texts, or a stored set's name."""
    return {
        "description": (
            f'Labelled texts that teach the question: [{{"item": <text>, "answer": {answer_words}}}] (as '
            f'filter and decirank examples add take them) or [{{"state": "<text>", "answer": ...}}], '
            "or the name of a stored example set"
        ),
        "anyOf": [
            {
                "type": "array",
                "items": {
                    "anyOf": [
                        _object({"item": _ANY, "answer": answer}, ["item", "answer"], closed=True),
                        _object({"state": _ANY, "answer": answer}, ["state", "answer"], closed=True),
                    ]
                },
            },
            {"type": "string"},
        ],
    }


CLASSIFY = ToolSpec(
    name="builtin__classify",
    title="Classify texts",
    description=(
        "Picks, for each text, the option a question asks for: one choice question per text.\n\n"
        "Each text is the state of its own choice question over options (a list of labels, or an object of "
        "label to description), so a text's answer never depends on the other texts. none adds a 'none of "
        f"these' option whose key is {NONE_KEY}. decisions carries, per text in input order, the chosen key, its "
        "probability and every option's probability. examples (labelled texts, or a stored example set's name) "
        "teach a model that learns from them what the options mean. calibration (a builtin__calibrate name) "
        "makes probabilities calibrated; with it, coverage gives each text a prediction_set that holds its right "
        "option at that rate on new texts, and none_fits when the set is empty or holds the none option."
    ),
    input_schema=_object(
        {
            "texts": _TEXTS,
            "question": {"type": "string", "description": "The choice question asked of each text"},
            "options": {
                "description": "The labels, or an object of label to description (2 to 255 options)",
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}},
                    {"type": "object", "additionalProperties": {"type": "string"}},
                ],
            },
            "none": {"type": "string", "description": f"Text of a 'none of these' option (key {NONE_KEY})"},
            "examples": _text_examples({"type": "string"}, '"<option key>"'),
            "calibration": _CALIBRATION,
            "coverage": {
                **_OPEN_UNIT,
                "description": "Give each text a prediction set holding its right option for at least this share of "
                "new texts, with confidence (conformal, from the calibration's labelled rows; needs calibration)",
            },
            "confidence": {**_OPEN_UNIT, "description": "How sure coverage's promise is; default 0.9"},
            "model": _MODEL,
        },
        ["texts", "question", "options"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "decisions": {
                "type": "array",
                "description": "One decision per text, in input order",
                "items": _object(
                    {
                        "index": {"type": "integer"},
                        "choice": {"type": "string"},
                        "probability": {"type": "number"},
                        "probabilities": {"type": "object", "additionalProperties": {"type": "number"}},
                        "prediction_set": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "With coverage: the options that hold the right one, most probable first",
                        },
                        "none_fits": {
                            "type": "boolean",
                            "description": "With coverage: the set is empty or holds the 'none of these' option",
                        },
                    },
                    ["index", "choice", "probability", "probabilities"],
                    closed=False,
                ),
            },
            "calibration": _CALIBRATION_USED,
            "coverage": {
                "description": "With coverage: the conformal threshold, the calibration's rows and the mean set size",
                "anyOf": [
                    _object(
                        {
                            "coverage": {"type": "number"},
                            "confidence": {"type": "number"},
                            "threshold": {"type": "number"},
                            "calibration_rows": {"type": "integer"},
                            "method": {"type": "string"},
                            "mean_set_size": {"type": ["number", "null"]},
                        },
                        ["coverage", "threshold", "calibration_rows"],
                        closed=False,
                    ),
                    {"type": "null"},
                ],
            },
        },
        ["decisions"],
    ),
    read_only=True,
    run=_run_classify,
)

SCORE = ToolSpec(
    name="builtin__score",
    title="Score texts with a yes/no question",
    description=(
        "The probability that a yes/no question is true of each text: one likelihood question per text.\n\n"
        "Each text is the state its question is asked about ('Is this review positive?' of every review); "
        "true and false optionally say what each answer means. probabilities are in input order, and a text's "
        "score never depends on the other texts. Unlike builtin__filter, which asks about one state with each "
        "item inside the question, this asks about each text itself. examples (labelled texts, or a stored "
        "example set's name) teach a model that learns from them what the question means. calibration (a "
        "builtin__calibrate name) makes probabilities calibrated; raw_probabilities keeps the model's."
    ),
    input_schema=_object(
        {
            "texts": _TEXTS,
            "question": {"type": "string", "description": "The yes/no question asked of each text"},
            "true": {"type": "string", "description": "What a yes means"},
            "false": {"type": "string", "description": "What a no means"},
            "examples": _text_examples({"type": "boolean"}, "true|false"),
            "calibration": _CALIBRATION,
            "model": _MODEL,
        },
        ["texts", "question"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "probabilities": {
                "type": "array",
                "items": {"type": "number"},
                "description": "Each text's probability, in input order (calibrated, with a calibration)",
            },
            "raw_probabilities": {
                "type": "array",
                "items": {"type": "number"},
                "description": "The model's own probabilities (the same without a calibration)",
            },
            "calibration": _CALIBRATION_USED,
        },
        ["probabilities"],
    ),
    read_only=True,
    run=_run_score,
)

_RELIABILITY = _object(
    {
        "rows": {"type": "integer"},
        "ece": {"type": "number", "description": "Expected calibration error over ten bins"},
        "brier": {"type": "number"},
        "log_loss": {"type": "number"},
        "table": {
            "type": "array",
            "description": "One entry per non-empty bin: its rows, mean probability and frequency of yes",
            "items": _object(
                {
                    "low": {"type": "number"},
                    "high": {"type": "number"},
                    "rows": {"type": "integer"},
                    "mean_probability": {"type": "number"},
                    "frequency": {"type": "number"},
                },
                ["low", "high", "rows", "mean_probability", "frequency"],
                closed=False,
            ),
        },
    },
    ["rows", "ece", "brier", "log_loss", "table"],
    closed=False,
)

CALIBRATE = ToolSpec(
    name="builtin__calibrate",
    title="Calibrate a tool on labelled rows",
    description=(
        "Fits a map from a tool's probabilities to what labelled rows show, and stores it by name for that tool, "
        "question and model.\n\n"
        f"rows are at least {MIN_ROWS} labelled texts for one question, "
        '[{"item" or "state": <text>, "answer": true|false}] (an option key for classify; for rerank a row may '
        "carry its own query, with no question), or a stored example set's name; a yes/no calibration needs "
        f"{MIN_EACH} of each answer, and about 100 rows make a map worth trusting. The tool (filter, score, rerank "
        "or classify) answers every row, then a map is picked by five-fold cross-validated log loss (identity, "
        "platt or isotonic; identity or temperature for classify). before and after give the reliability (ECE, "
        "Brier, log loss, a ten-bin table) of the model's numbers and of out-of-fold calibrated ones. Afterwards "
        "pass calibration=<name> to that tool: builtin__filter can then promise target_recall or target_precision, "
        "and builtin__classify prediction sets at a coverage. A calibration is refused for another tool, question, "
        "option set or model."
    ),
    input_schema=_object(
        {
            "name": {"type": "string", "description": "The name to store it under, e.g. sst2-positive"},
            "question": {
                "type": ["string", "null"],
                "description": "The question the tool asks (rerank: the query; null when each row has its query)",
            },
            "tool": {"enum": list(CALIBRATED_TOOLS), "description": "The tool calibrated; default filter"},
            "rows": {
                "description": "Labelled rows, or the name of a stored example set",
                "anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "string"}],
            },
            "state": {"description": "filter's context the items are judged against; optional"},
            "options": {
                "description": "classify's labels, or an object of label to description",
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}},
                    {"type": "object", "additionalProperties": {"type": "string"}},
                ],
            },
            "none": {"type": "string", "description": "classify's 'none of these' option"},
            "true": {"type": "string", "description": "score's: what a yes means"},
            "false": {"type": "string", "description": "score's: what a no means"},
            "method": {
                "enum": ["auto", *LIKELIHOOD_METHODS, "temperature"],
                "description": "auto (cross-validated, the default) or one map",
            },
            "save": {"type": "boolean", "description": "Store it under name (default true); false only measures"},
            "model": _MODEL,
        },
        ["name", "rows"],
        closed=True,
    ),
    output_schema=_tool_result(
        {
            "name": {"type": "string"},
            "tool": {"type": "string"},
            "question": {"type": ["string", "null"]},
            "options": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
            "data_hash": {"type": "string", "description": "SHA-256 of the labelled rows, question and options"},
            "created_at": {"type": "string"},
            "rows": {"type": "integer"},
            "positives": {"type": "integer", "description": "Yes/no: the rows labelled yes"},
            "method": {"type": "string", "description": "The map chosen"},
            "map": _object({"method": {"type": "string"}, "parameters": {"type": "object"}}, ["method"], closed=False),
            "before": {**_RELIABILITY, "description": "The model's own probabilities on the rows"},
            "after": {**_RELIABILITY, "description": "Out-of-fold calibrated probabilities on the rows"},
            "cross_validated_log_loss": {"type": "object", "additionalProperties": {"type": "number"}},
            "saved": {"type": "boolean"},
        },
        ["name", "tool", "rows", "method", "before", "after", "saved"],
    ),
    # It stores the calibration under its name, replacing any of that name.
    read_only=False,
    run=_run_calibrate,
    destructive=True,
)

_REF = {"type": "string", "description": "run_id/agent_id"}

SCORE_LIST = ToolSpec(
    name="builtin__score_list",
    title="Score and rank stored artifacts",
    description=(
        "Rank a list of existing refs by scoring with an evaluator, returning the top-k winners. Avoids "
        "parameter size limits by resolving artifacts server-side.\n\n"
        "For 'generate N candidates, then pick the best' pipelines where the N candidates already exist as "
        "refs (run_id/agent_id) in the artifact store: refs are resolved to their artifact text server-side, "
        "so callers never pipe artifact text through tool parameters. Evaluators: validate:<type> (a "
        "registered type: built-in json, python, yaml checks, or a user type judged by the decision model), "
        "score:<criterion> (a graded decision-model score) and exec:<shell-cmd> (ground truth: exit status 0 "
        "scores 1.0; {artifact} is the artifact file's quoted path, also in $ARTIFACT). Each ref is stamped "
        "in the store with its score and beam_rank; refs outside the top-k are marked pruned with a reason "
        "pointing at the cut. top_k=0 returns all without pruning. A missing ref is UNKNOWN, not an error."
    ),
    input_schema=_object(
        {
            "refs": {
                "description": (
                    'JSON array of refs: either ["run_id/agent_id", ...] or [{"ref": "run_id/agent_id"}, ...]; '
                    "both forms are accepted, also as a JSON string"
                ),
                "anyOf": [
                    {"type": "array", "items": {"anyOf": [_REF, _object({"ref": _REF}, ["ref"], closed=False)]}},
                    {"type": "string"},
                ],
            },
            "evaluator": {
                "type": "string",
                "description": "Scoring directive: validate:<type>, score:<criterion>, or exec:<cmd>",
            },
            "top_k": {
                "type": "integer",
                "minimum": 0,
                "description": "How many top-scoring refs to surface as winners; 0 means rank-only, no pruning",
            },
            "max_concurrency": {
                "type": "integer",
                "minimum": 1,
                "description": f"Upper bound on parallel evaluator calls (default: {DEFAULT_MAX_CONCURRENCY})",
            },
            "model": {**_MODEL, "description": "The decision model role for score: and validate:; default decider"},
        },
        ["refs", "evaluator"],
        closed=True,
    ),
    output_schema=_object(
        {
            "run_id": {"type": "string", "description": "This scoring run; every stamp carries it"},
            "evaluator": {"type": "string"},
            "total": {"type": "integer", "description": "How many refs were scored"},
            "top_k": {"type": "integer"},
            "winners": {"type": "array", "items": {"type": "string"}, "description": "The winning refs, best first"},
            "ranked": {
                "type": "array",
                "description": "The full per-ref trace, best first",
                "items": _object(
                    {
                        "rank": {"type": "integer"},
                        "ref": {"type": "string"},
                        "score": {"type": ["number", "null"]},
                        "verdict": {"enum": ["VALID", "PARTIAL", "INVALID", "UNKNOWN"]},
                        "issues": {"type": "array", "items": {"type": "string"}},
                        "reason": {"type": "string"},
                        "pruned": {"type": "boolean"},
                    },
                    ["rank", "ref", "score", "verdict", "issues", "reason", "pruned"],
                    closed=False,
                ),
            },
            "model": {
                "type": ["string", "null"],
                "description": "The model(s) that answered, for score: and validate:",
            },
            "usage": _USAGE,
        },
        ["run_id", "evaluator", "total", "top_k", "winners", "ranked"],
        closed=False,
    ),
    # Scoring stamps every ref in the artifact store.
    read_only=False,
    run=_run_score_list,
)

_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (RANK, RERANK, FILTER, CLASSIFY, SCORE, CALIBRATE, SCORE_LIST)
}


def tool_specs() -> list[ToolSpec]:
    return list(_TOOLS.values())


def get_tool(name: Any, field: str = "tool_name") -> ToolSpec:
    spec = _TOOLS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InvalidInputError(field, f"one of {', '.join(_TOOLS)}", got=name)
    return spec


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The arguments as a dict, refusing unknown and missing fields by name, and values JSON cannot carry
    (NaN, Infinity, a lone surrogate, nesting deeper than :data:`~decirank._jsonpath.MAX_NESTING`)."""
    if not isinstance(arguments, dict):
        raise InvalidInputError("arguments", f"an object with {spec.name}'s inputs", got=arguments)
    # Arguments come as JSON (MCP, plans), whose readers take NaN and Infinity: refused here, as over HTTP.
    unfit = first_unfit(arguments)
    if unfit is not None:
        raise InvalidInputError(unfit.dotted(), unfit.expected, detail=unfit.problem)
    for name in arguments:
        if name not in spec.input_schema["properties"]:
            raise InvalidInputError(
                name, f"one of {spec.name}'s inputs: {', '.join(spec.fields)}", detail="unknown input"
            )
    for name in spec.required:
        if name not in arguments:
            raise InvalidInputError(name, "a value", detail=f"{spec.name} requires it")
    return arguments


async def call_tool(
    name: str, arguments: Any, *, name_field: str = "tool_name", allow_exec: bool = True
) -> dict[str, Any]:
    """Run tool ``name`` on JSON ``arguments``; its errors are decirank's typed errors.

    ``name_field`` is what the caller calls the tool's name, for the error when it is unknown.
    ``allow_exec=False`` refuses score_list's ``exec:`` evaluators (shell commands): the
    servers pass it unless their operator allows them.
    """
    spec = get_tool(name, name_field)
    return await spec.run(check_arguments(spec, arguments), allow_exec=allow_exec)
