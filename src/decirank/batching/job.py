"""A batch job, checked: which tool, what it asks, what each row shows, and the answer columns.

:class:`Job` is built once in the driver from the caller's options (every bad
option is an :class:`~decirank.errors.InvalidInputError` naming it, before any
work). Its :class:`Task` is the part the workers need: picklable, small, the
same for every worker process or Ray actor. :func:`row_item` turns one input
row into what a worker asks about (its text, and for rerank its query), or a
:class:`RowProblem` saying why the row cannot be asked.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .._jsonpath import MISSING, resolve_dot_path, to_text
from ..decisions.decider import DEFAULT_ROLE
from ..decisions.toolcall import check_timeout
from ..errors import InvalidInputError
from ..tools._checks import check_encodable, check_instructions, check_optional_text, check_probability_threshold
from ..tools.classify import check_options, choice_examples
from ..tools.filter import DEFAULT_MIN_CONFIDENCE
from ..tools.score import likelihood_examples
from ..types.questions import Example

__all__ = ["ANSWER_COLUMNS", "TOOLS", "Job", "RowProblem", "Task", "row_item"]

#: The columns each tool adds to every row, in order.
ANSWER_COLUMNS: dict[str, tuple[str, ...]] = {
    "filter": ("probability", "kept"),
    "classify": ("choice", "probability"),
    "rerank": ("relevance_score", "rank"),
    "score": ("probability",),
}
TOOLS = tuple(ANSWER_COLUMNS)

#: What each tool takes besides the common options, for the errors that name a misplaced one.
_TAKES: dict[str, frozenset[str]] = {
    "filter": frozenset({"question", "state", "min_confidence", "examples"}),
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

    @property
    def columns(self) -> tuple[str, ...]:
        return ANSWER_COLUMNS[self.tool]

    def identity(self) -> dict[str, Any]:
        """Everything that decides the answers: a resumed batch must have the same."""
        task = asdict(self.task)
        for transient in ("parent_run", "environment", "timeout"):
            task.pop(transient)
        task["examples"] = [example.to_dict() for example in self.task.examples]
        return {
            "tool": self.tool,
            "task": task,
            "text": self.text,
            "describe": self.describe,
            "query": self.query,
            "query_field": self.query_field,
        }

    def digest(self) -> str:
        encoded = json.dumps(self.identity(), sort_keys=True, ensure_ascii=True, default=str)
        return hashlib.sha256(encoded.encode()).hexdigest()

    def summary(self) -> dict[str, Any]:
        """The job as the run log keeps it (shortened there)."""
        summary = {key: value for key, value in self.identity()["task"].items() if value not in (None, [], ())}
        for key in ("text", "describe", "query", "query_field"):
            if getattr(self, key) is not None:
                summary[key] = getattr(self, key)
        return summary

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
            return cls(tool, Task(**common), **job_fields)

        question = check_instructions(question, "question")
        if tool == "filter":
            threshold = check_probability_threshold(min_confidence, "min_confidence")
            task = Task(
                **common,
                question=question,
                state={} if state is None else check_encodable(state, "state"),
                min_confidence=DEFAULT_MIN_CONFIDENCE if threshold is None else threshold,
                examples=_filter_examples(examples, text, describe),
            )
        elif tool == "classify":
            if options is None:
                raise InvalidInputError(
                    "options", "the labels to choose from: a list, or an object of label to description"
                )
            checked = check_options(options, check_optional_text(none, "none"))
            task = Task(**common, question=question, options=checked, examples=choice_examples(examples, checked))
        else:
            task = Task(
                **common,
                question=question,
                true=check_optional_text(true, "true"),
                false=check_optional_text(false, "false"),
                examples=likelihood_examples(examples),
            )
        return cls(tool, task, **job_fields)

    def with_run(self, parent_run: str | None, environment: Mapping[str, str]) -> Job:
        return replace(self, task=replace(self.task, parent_run=parent_run, environment=dict(environment)))


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
