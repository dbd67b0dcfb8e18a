"""rerank (``DecisionReranker``): one likelihood question per document.

The query is the state; each document is asked as ``This note bears on the
request: <text>``; its relevance score is the probability. Documents are
split across concurrent calls that share one time budget, and any failed call
or missing answer fails the whole rerank: no score is ever invented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .._progress import progress_bar
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import ToolCall
from ..errors import InvalidInputError
from ..types.answers import Usage
from ._calibrated import calibrated, check_answered, check_model, load_calibration
from .._jsonpath import canonical_json
from ._checks import (
    check_instructions,
    check_items,
    check_no_blank,
    check_optional_text,
    check_probability_threshold,
    check_top_k,
    either,
)
from ._definition import AliasOf, Cli, Offered, ToolDefinition, Wire, sync_twin_of
from ._likelihoods import Likelihoods, TextNote, ask_likelihoods, check_per_call, questions_per_call
from ._outputs import Notes, Rows, ToolOutput
from ._params import (
    ApiKey,
    BaseUrl,
    CalibrationParam,
    DescribeParam,
    FromOne,
    FromZero,
    ItemList,
    ModelParam,
    ShowProgress,
    Text,
    Unit,
)
from .rank import item_text

__all__ = [
    "DEFAULT_TIMEOUT",
    "PER_DOCUMENT_TIMEOUT",
    "QUESTION_PREFIX",
    "RERANK",
    "AutoTimeout",
    "RerankOutput",
    "RerankResult",
    "RerankedDocument",
    "arerank",
    "default_budget",
    "rerank",
]

QUESTION_PREFIX = "This note bears on the request: "
#: The default budget's fixed part, in seconds, and what each document adds to it.
DEFAULT_TIMEOUT = 15.0
PER_DOCUMENT_TIMEOUT = 0.02
#: The most a default budget grows to: a caller who needs longer says so with ``timeout``.
MAX_DEFAULT_TIMEOUT = 300.0

#: ``timeout="auto"``: a budget that grows with the number of documents.
AutoTimeout = Literal["auto"]


def default_budget(documents: int, base: float = DEFAULT_TIMEOUT) -> float:
    """Seconds for a rerank of ``documents`` documents when the caller sets none: ``base`` plus 20 ms each,
    at most :data:`MAX_DEFAULT_TIMEOUT` (or ``base``, if that is more).

    A fixed budget fits a hundred documents and not five thousand; 20 ms a document is
    about ten times what the local model takes on one loaded core. The ceiling keeps one huge
    list from holding a server's worker for as long as its size would buy.
    """
    return max(base, min(base + PER_DOCUMENT_TIMEOUT * documents, MAX_DEFAULT_TIMEOUT))


def resolve_timeout(timeout: float | AutoTimeout | None, documents: int) -> float | None:
    """The budget a rerank runs under: ``timeout`` itself, or :func:`default_budget` for ``"auto"``."""
    return default_budget(documents) if timeout == "auto" else timeout


@dataclass(frozen=True)
class RerankedDocument:
    #: The document's id: its own ``id``, else its position in the input.
    id: Any
    #: The document as it was given (a string, or an object with ``text``); None with ``return_documents=False``.
    document: Any
    relevance_score: float
    #: 1 for the most relevant document.
    rank: int
    #: The document's position in the input, whatever its id (Cohere's ``index``).
    index: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "id": self.id,
            "document": self.document,
            "relevance_score": self.relevance_score,
            "rank": self.rank,
        }


@dataclass(frozen=True)
class RerankResult(Rows[RerankedDocument]):
    """A sequence of its ``results``; ``to_dict()`` gives the tool's JSON shape."""

    rows = "results"
    results: list[RerankedDocument]
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    run_id: str | None = None
    #: The model's notes on how it read documents (``index``: the input position): a document
    #: cut short (``"cut"``), or one that does not look English (``"non_english"``).
    notes: list[TextNote] = field(default_factory=list)
    #: The calibration the relevance scores went through, by name, or None.
    calibration: str | None = None

    def top_k(self, k: int) -> list[RerankedDocument]:
        """The best ``k`` results, most relevant first (fewer when there are fewer)."""
        return self.results[: check_top_k(k, allow_zero=False, field="k")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "results": [result.to_dict() for result in self.results],
            "model": self.model,
            "usage": self.usage.to_dict(),
            "run_id": self.run_id,
            "notes": [note.to_dict() for note in self.notes],
            "calibration": self.calibration,
        }


class RerankedDocumentOut(BaseModel):
    index: int = Field(description="The document's position in the input.")
    id: Any = Field(description="The document's own id, else its position in the input.")
    document: Any = Field(description="The document as it was given; null with return_documents false.")
    relevance_score: float
    rank: int = Field(description="1 for the most relevant document.")


class RerankOutput(ToolOutput):
    """The result of rerank: the documents, most relevant first."""

    results: list[RerankedDocumentOut] = Field(description="The documents, most relevant first.")
    notes: Notes
    calibration: str | None = Field(None, description="The calibration the relevance scores went through.")


@dataclass(frozen=True)
class _Document:
    id: Any
    text: str
    original: Any
    index: int


def check_documents(documents: Any, describe: str | None = None) -> list[_Document]:
    """Strings, or objects ``{id?, text, metadata?}`` (``describe``: the dot path of the text instead of
    ``text``); a string's id is its position, and no two documents may share an id."""
    checked = []
    seen: dict[str, int] = {}
    for index, document in enumerate(check_items(documents, "documents")):
        if isinstance(document, str):
            checked.append(_Document(index, document, document, index))
        elif isinstance(document, dict) and describe is not None:
            text = item_text(document, describe)
            if text is None:
                raise InvalidInputError(f"documents.{index}", f"an object with the describe path {describe!r}")
            checked.append(_Document(document.get("id", index), text, document, index))
        elif isinstance(document, dict) and isinstance(document.get("text"), str):
            checked.append(_Document(document.get("id", index), document["text"], document, index))
        else:
            expected = "a string or an object with a string 'text'" if describe is None else "a string or an object"
            raise InvalidInputError(f"documents.{index}", expected, got=document)
        # Results are matched back to documents by id, so two documents of one id would be one result.
        key = canonical_json(checked[-1].id)
        if key in seen:
            raise InvalidInputError(
                f"documents.{index}.id",
                "an id no other document has",
                detail=f"documents.{seen[key]} has the id {key} too",
            )
        seen[key] = index
    check_no_blank([document.text for document in checked], "documents")
    return checked


def order_results(
    documents: Sequence[_Document],
    scores: Sequence[float],
    *,
    top_k: int | None,
    min_relevance: float | None,
    return_documents: bool = True,
) -> list[RerankedDocument]:
    """Highest score first, ties in input order; then the threshold, then ``top_k``."""
    order = sorted(range(len(documents)), key=lambda i: (-scores[i], i))
    results = [
        RerankedDocument(
            documents[i].id, documents[i].original if return_documents else None, scores[i], rank, documents[i].index
        )
        for rank, i in enumerate(order, start=1)
    ]
    if min_relevance is not None:
        results = [result for result in results if result.relevance_score >= min_relevance]
    return results[:top_k] if top_k is not None else results


async def arerank(
    query: Annotated[Text, Field(description="The request the documents are scored against."), Cli(flags=("--query", "-q"))],
    documents: Annotated[
        ItemList,
        Wire(list[str | dict[str, Any]]),
        Field(description='Strings, or objects {id, text, metadata}; a string\'s id is its position.'),
        Cli(argument=True, read="items", metavar="DOCUMENTS"),
    ],
    *,
    top_k: Annotated[
        FromZero | None,
        Field(description="Keep only the best k; 0 or none keeps all."),
        Cli(flags=("--top-k", "-k")),
        Offered.not_on(http="Cohere's rerank request, which /v1/rerank speaks, calls it top_n"),
    ] = None,
    top_n: Annotated[
        FromZero | None, AliasOf("top_k"), Field(description="Another name of top_k, as Cohere's rerank calls it.")
    ] = None,
    return_documents: Annotated[
        bool,
        Field(description="Give each result its document; false gives index, id and score alone."),
        Offered.not_on(cli="the command line shows each document's text in its table or JSON"),
    ] = True,
    describe: Annotated[
        DescribeParam,
        Offered.not_on(http="Cohere's rerank request, which /v1/rerank speaks, names the fields to read rank_fields"),
    ] = None,
    min_relevance: Annotated[
        Unit | None,
        Field(description="Drop documents scored below this (calibrated, with a calibration)."),
    ] = None,
    model: ModelParam = DEFAULT_ROLE,
    timeout: Annotated[
        float | AutoTimeout | None,
        Wire(float | None),
        Field(
            gt=0,
            description="Time budget in seconds for the whole rerank (default: 15 s plus 20 ms per document, at most "
            "300 s).",
        ),
        Offered.not_on(mcp="an agent's call runs under the MCP server's own budget"),
    ] = "auto",
    max_documents_per_call: Annotated[
        FromOne | None,
        Field(description="Documents per model call when the model declares no limit."),
        Cli(flags=("--per-call",)),
    ] = None,
    base_url: BaseUrl = None,
    api_key: ApiKey = None,
    show_progress: ShowProgress = False,
    calibration: CalibrationParam = None,
) -> RerankResult:
    """Score each document's relevance to ``query`` and sort by it.

    ``documents`` is any iterable of strings or objects ``{id?, text, metadata?}`` (``describe``: a
    dot path to the text, e.g. ``body``); each result carries the document's ``index`` (its input
    position) and ``id`` (its own, else the index), and no two documents may share an id.
    ``top_k`` (or Cohere's ``top_n``) keeps the best k, 0 or None all; ``return_documents=False``
    leaves each result's document out. Scores are probabilities of relevance, and they run low and
    differ between models and domains, so no fixed cut-off suits every list: for "the best few" use
    ``top_k``; for "all that are relevant", fit a calibration on labelled rows of your own
    (:func:`~decirank.calibrate` with ``tool="rerank"``) and pass ``calibration``, which makes
    scores, and ``min_relevance``, calibrated. The result's ``notes`` say which documents were cut
    short or do not look English. All calls share the one ``timeout`` budget: by default
    (``"auto"``) 15 s plus 20 ms per document, at most 300 s; ``None`` sets no limit. ``show_progress`` draws a bar
    on stderr, when it is a terminal, as the model calls finish.
    """
    query = check_instructions(query, "query")
    describe = check_optional_text(describe, "describe")
    checked = check_documents(documents, describe)
    top_k = check_top_k(either(top_k, top_n, "top_k", "top_n"), allow_zero=True)
    min_relevance = check_probability_threshold(min_relevance, "min_relevance")
    requested_per_call = check_per_call(max_documents_per_call, "max_documents_per_call")
    inputs = {
        "query": query,
        "documents": [document.original for document in checked],
        "top_k": top_k,
        "min_relevance": min_relevance,
    }
    map_used = load_calibration(calibration, "rerank", query)
    if map_used is not None:
        inputs["calibration"] = {"name": map_used.name, "data_hash": map_used.data_hash}
    async with ToolCall(
        "rerank",
        model=model,
        timeout=resolve_timeout(timeout, len(checked)),
        backend_options={"base_url": base_url, "api_key": api_key},
        inputs=inputs,
    ) as call:
        check_model(map_used, call)
        per_call = questions_per_call(call, requested_per_call)
        texts = [QUESTION_PREFIX + document.text for document in checked]
        with progress_bar("rerank", len(texts), enabled=show_progress and bool(checked)) as advance:
            asked = await ask_likelihoods(call, query, texts, per_call, on_answered=advance) if checked else None
        answered = asked or Likelihoods([], [])
        check_answered(map_used, call)
        scores = calibrated(map_used, answered.probabilities)
        results = order_results(
            checked, scores, top_k=top_k, min_relevance=min_relevance, return_documents=return_documents is not False
        )
        notes = [note.to_dict() for note in answered.notes]
        name = None if map_used is None else map_used.name
        call.record_outputs({"results": [result.to_dict() for result in results], "notes": notes, "calibration": name})
        return RerankResult(results, call.answered_by, call.usage, call.run_id, answered.notes, name)


rerank = sync_twin_of(arerank, "rerank")

RERANK = ToolDefinition(
    arerank,
    name="rerank",
    title="Rerank documents by relevance",
    description=(
        "Scores each document's relevance to a query with one likelihood question per document, and sorts "
        "by it.\n\n"
        "Each document's relevance_score is the probability that it bears on the query. Documents with equal "
        "scores keep their input order. Large lists are split across parallel calls that share one time budget; "
        "a failed call or a missing answer fails the whole rerank, and no score is ever invented. Scores are "
        "probabilities of relevance and run low: keep the best few with top_k rather than a fixed cut-off, or "
        "calibrate (builtin__calibrate) and pass calibration to make relevance scores, and min_relevance, "
        "calibrated. notes lists documents cut short or not in English."
    ),
    result=RerankOutput,
    command="rerank",
    route="/v1/rerank",
)
