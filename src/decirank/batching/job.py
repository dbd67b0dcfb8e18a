"""A batch job, checked: which tool, what it asks, what each row shows, and the answer columns.

:class:`Job` is built once in the driver from the caller's options (every bad
option is an :class:`~decirank.errors.InvalidInputError` naming it, before any
work). Its :class:`Task` is the part the workers need: picklable, small, the
same for every worker process or Ray actor. :func:`row_item` turns one input
row into what a worker asks about (its text, and for rerank its query), or a
:class:`RowProblem` saying why the row cannot be asked.

A ``calibration`` is loaded and checked here, once, and its map travels in the
Task (without its labelled rows), as a stored example set's examples do:
the workers never look it up by name. A Ray actor may run on a machine
without the driver's calibration store, and a map stored again under the
same name mid-batch would give the chunks after it other numbers. The
labelled rows stay with the driver, which alone picks a target's cut-off
(:meth:`Job.for_rows`), once for every row of the input.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .._jsonpath import MISSING, resolve_dot_path, to_text
from ..calibration._guarantees import Cutoff
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import check_timeout
from ..errors import InvalidInputError
from ..stores.calibrations import Calibration
from ..tools._calibrated import Target, check_target, cutoff_of, load_calibration
from ..tools._checks import check_encodable, check_instructions, check_optional_text, check_probability_threshold
from ..tools.classify import check_options, choice_examples
from ..tools.filter import DEFAULT_MIN_CONFIDENCE
from ..tools.score import likelihood_examples
from ..types.questions import Example

__all__ = ["ANSWER_COLUMNS", "CALIBRATED_COLUMNS", "TOOLS", "Job", "RowProblem", "Task", "row_item"]

#: The columns each tool adds to every row, in order.
ANSWER_COLUMNS: dict[str, tuple[str, ...]] = {
    "filter": ("probability", "kept"),
    "classify": ("choice", "probability"),
    "rerank": ("relevance_score", "rank"),
    "score": ("probability",),
}
TOOLS = tuple(ANSWER_COLUMNS)
#: The columns of the tools that keep the model's own number beside the calibrated one, with a calibration.
CALIBRATED_COLUMNS: dict[str, tuple[str, ...]] = {
    "filter": ("probability", "raw_probability", "kept"),
    "score": ("probability", "raw_probability"),
}

#: What each tool takes besides the common options, for the errors that name a misplaced one.
_TAKES: dict[str, frozenset[str]] = {
    "filter": frozenset(
        {"question", "state", "min_confidence", "examples", "target_recall", "target_precision", "confidence"}
    ),
    "classify": frozenset({"question", "options", "none", "examples"}),
    "rerank": frozenset({"query", "query_field"}),
    "score": frozenset({"question", "true", "false", "examples"}),
}


class RowProblem(Exception):
    """Why one row cannot be asked; the row goes to the errors file with this reason."""

    def __init__(self, message: str, kind: str = "InvalidRow") -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class Task:
    """What a worker needs to answer the rows of a chunk: the tool and its question, never the rows."""

    tool: str
    model: str
    question: str | None = None
    state: Any = None
    options: dict[str, str] | None = None
    true: str | None = None
    false: str | None = None
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    examples: tuple[Example, ...] = ()
    base_url: str | None = None
    timeout: float | None = None
    #: The calibration's map and what it was fitted for, without its labelled rows (see the module's docstring).
    calibration: Calibration | None = None
    #: filter with a target: the one cut-off the driver chose for every row of the input.
    cutoff: Cutoff | None = None
    #: The batch's run in the run log: every chunk's tool run is its child.
    parent_run: str | None = None
    #: Environment variables the workers must see (``DECIRANK_*``): Ray actors may run elsewhere.
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    tool: str
    task: Task
    #: Exactly one of these picks the text a row shows: a column name, a dot path, or neither (the whole row).
    text: str | None = None
    describe: str | None = None
    #: rerank: one query for every row, or the column holding each row's query.
    query: str | None = None
    query_field: str | None = None
    #: The calibration as stored, its labelled rows included: the driver picks a target's cut-off from them.
    calibration: Calibration | None = None
    #: filter: the recall or precision the cut-off must promise.
    target: Target | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        if self.calibration is not None and self.tool in CALIBRATED_COLUMNS:
            return CALIBRATED_COLUMNS[self.tool]
        return ANSWER_COLUMNS[self.tool]

    def identity(self) -> dict[str, Any]:
        """Everything that decides the answers: a resumed batch must have the same.

        A calibration counts by its data hash and its map: the same rows fitted again with
        another method keep their hash, not their numbers. The cut-off follows from the
        calibration, the target and the input's rows, which are the same or the batch is refused.
        Neither appears when not given, so a batch without them keeps the identity it had before.
        """
        task = asdict(self.task)
        for transient in ("parent_run", "environment", "timeout", "calibration", "cutoff"):
            task.pop(transient)
        task["examples"] = [example.to_dict() for example in self.task.examples]
        identity = {
            "tool": self.tool,
            "task": task,
            "text": self.text,
            "describe": self.describe,
            "query": self.query,
            "query_field": self.query_field,
        }
        if self.calibration is not None:
            identity["calibration"] = {
                "name": self.calibration.name,
                "data_hash": self.calibration.data_hash,
                "model": self.calibration.model,
                "map": self.calibration.map.to_dict(),
            }
        if self.target is not None:
            identity["target"] = self.target.to_dict()
        return identity

    def digest(self) -> str:
        encoded = json.dumps(self.identity(), sort_keys=True, ensure_ascii=True, default=str)
        return hashlib.sha256(encoded.encode()).hexdigest()

    def summary(self) -> dict[str, Any]:
        """The job as the run log keeps it (shortened there)."""
        summary = {key: value for key, value in self.identity()["task"].items() if value not in (None, [], ())}
        for key in ("text", "describe", "query", "query_field"):
            if getattr(self, key) is not None:
                summary[key] = getattr(self, key)
        if self.calibration is not None:
            # As the tools record the map they used: by name and the hash of its labelled rows.
            summary["calibration"] = {"name": self.calibration.name, "data_hash": self.calibration.data_hash}
        if self.target is not None:
            summary.pop("min_confidence")  # the target's cut-off decides, not a threshold
            summary.update(self.target.to_dict())
        return summary

    def for_rows(self, rows: int) -> Job:
        """The job with its target's cut-off chosen for ``rows`` rows: one cut-off that every chunk shares.

        A recall promise depends on how many items it is for; a batch's are all of its input's rows.
        """
        if self.target is None:
            return self
        assert self.calibration is not None
        return replace(self, task=replace(self.task, cutoff=cutoff_of(self.calibration, self.target, rows)))

    @classmethod
    def build(
        cls,
        tool: Any,
        *,
        question: Any = None,
        state: Any = None,
        options: Any = None,
        none: Any = None,
        true: Any = None,
        false: Any = None,
        examples: Any = None,
        min_confidence: Any = None,
        query: Any = None,
        query_field: Any = None,
        text: Any = None,
        describe: Any = None,
        model: Any = DEFAULT_ROLE,
        base_url: Any = None,
        timeout: Any = None,
        calibration: Any = None,
        target_recall: Any = None,
        target_precision: Any = None,
        confidence: Any = None,
    ) -> Job:
        if tool not in ANSWER_COLUMNS:
            raise InvalidInputError("tool", f"one of {', '.join(TOOLS)}", got=tool)
        given = {
            "question": question,
            "state": state,
            "options": options,
            "none": none,
            "true": true,
            "false": false,
            "examples": examples,
            "min_confidence": min_confidence,
            "query": query,
            "query_field": query_field,
            "target_recall": target_recall,
            "target_precision": target_precision,
            "confidence": confidence,
        }
        for name, value in given.items():
            if value is not None and name not in _TAKES[tool]:
                users = [other for other in TOOLS if name in _TAKES[other]]
                raise InvalidInputError(
                    name, f"no {name} for {tool}", detail=f"{name} is for {' and '.join(users)}, not {tool}"
                )
        text = check_optional_text(text, "text")
        describe = check_optional_text(describe, "describe")
        if text is not None and describe is not None:
            raise InvalidInputError("text", "either text (a column) or describe (a dot path), not both")
        if not isinstance(model, str) or not model.strip():
            raise InvalidInputError("model", "a role such as 'decider' or a model name such as 'local'", got=model)
        base_url = check_optional_text(base_url, "base_url")
        timeout = check_timeout(timeout)
        common = {"tool": tool, "model": model.strip(), "base_url": base_url, "timeout": timeout}
        job_fields: dict[str, Any] = {"text": text, "describe": describe}

        if tool == "rerank":
            if (query is None) == (query_field is None):
                raise InvalidInputError(
                    "query", "either query (one for every row) or query_field (a column), one of them"
                )
            if query is not None:
                job_fields["query"] = check_instructions(query, "query")
            else:
                job_fields["query_field"] = check_optional_text(query_field, "query_field")
            # With query_field each row brings its own query: None asks for a calibration for any query.
            found = load_calibration(calibration, tool, job_fields.get("query"))
            return cls(tool, Task(**common, calibration=_without_rows(found)), **job_fields, calibration=found)

        question = check_instructions(question, "question")
        target = None
        if tool == "filter":
            threshold = check_probability_threshold(min_confidence, "min_confidence")
            found = load_calibration(calibration, tool, question)
            target = check_target(found, target_recall, target_precision, confidence, threshold)
            task = Task(
                **common,
                question=question,
                state={} if state is None else check_encodable(state, "state"),
                min_confidence=DEFAULT_MIN_CONFIDENCE if threshold is None else threshold,
                examples=_filter_examples(examples, text, describe),
                calibration=_without_rows(found),
            )
        elif tool == "classify":
            if options is None:
                raise InvalidInputError(
                    "options", "the labels to choose from: a list, or an object of label to description"
                )
            checked = check_options(options, check_optional_text(none, "none"))
            found = load_calibration(calibration, tool, question, checked)
            task = Task(
                **common,
                question=question,
                options=checked,
                examples=choice_examples(examples, checked),
                calibration=_without_rows(found),
            )
        else:
            found = load_calibration(calibration, tool, question)
            task = Task(
                **common,
                question=question,
                true=check_optional_text(true, "true"),
                false=check_optional_text(false, "false"),
                examples=likelihood_examples(examples),
                calibration=_without_rows(found),
            )
        return cls(tool, task, **job_fields, calibration=found, target=target)

    def with_run(self, parent_run: str | None, environment: Mapping[str, str]) -> Job:
        return replace(self, task=replace(self.task, parent_run=parent_run, environment=dict(environment)))


def _without_rows(calibration: Calibration | None) -> Calibration | None:
    """What a worker needs of a calibration: its map and what it was fitted for, not its labelled rows' scores."""
    return None if calibration is None else replace(calibration, scores=[], labels=[])


def _filter_examples(examples: Any, text: str | None, describe: str | None) -> tuple[Example, ...]:
    """filter's examples with each ``item`` shown as rows are (its text column or dot path)."""
    from ..stores.examples import resolve_examples
    from ..tools.filter import item_examples

    examples = resolve_examples(examples, "examples")
    if examples is None:
        return ()
    if text is None or isinstance(examples, str | bytes | Mapping) or not isinstance(examples, Sequence):
        return item_examples(examples, describe)
    shown = []
    for position, example in enumerate(examples):
        if isinstance(example, Mapping) and set(example) == {"item", "answer"}:
            try:
                example = {"state": row_text(example["item"], text, None), "answer": example["answer"]}
            except RowProblem as problem:
                raise InvalidInputError(
                    f"examples.{position}.item", f"a row with the column {text!r}", detail=str(problem)
                ) from None
        shown.append(example)
    return item_examples(shown, None)


def _shown(value: Any, what: str) -> str:
    if value is MISSING or value is None:
        raise RowProblem(f"the row has no {what}", "MissingField")
    if isinstance(value, float) and not math.isfinite(value):
        raise RowProblem(f"{what} is {value}, not text", "InvalidRow")
    shown = to_text(value)
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:
        raise RowProblem(f"{what} is not UTF-8 text (it holds a lone surrogate)", "InvalidRow") from None
    return shown


def row_text(row: Any, text: str | None, describe: str | None) -> str:
    """What the model is shown of ``row``: a column, a dot path, or the whole row as canonical JSON."""
    if text is not None:
        value = row.get(text, MISSING) if isinstance(row, Mapping) else MISSING
        return _shown(value, f"column {text!r}")
    if describe is not None:
        return _shown(resolve_dot_path(row, describe), f"{describe!r}")
    return _shown(row, "row")


def row_item(job: Job, row: Any) -> tuple[str, str | None]:
    """``(text, query)`` for one row (query only for rerank); :class:`RowProblem` if it cannot be asked."""
    text = row_text(row, job.text, job.describe)
    if job.tool != "rerank":
        return text, None
    if job.query is not None:
        return text, job.query
    value = row.get(job.query_field, MISSING) if isinstance(row, Mapping) else MISSING
    query = _shown(value, f"query column {job.query_field!r}")
    if not query.strip():
        raise RowProblem(f"query column {job.query_field!r} is empty", "InvalidRow")
    return text, query
