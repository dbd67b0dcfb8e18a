"""Answering one chunk of rows, in a worker: the tools asked through their own code, failures isolated.

A chunk is asked as one tool call (rerank: one per query among its rows), a
child run of the batch's run. When the call fails for a reason that can be
one row's (its input refused, a 422, a missing or invalid answer, a request
too large), the chunk is split in halves and each half asked again, down to
single rows: the rows that still fail are reported with their reason and the
others are answered, so one bad row costs only its own answer. A failure no
row can cause (the model unreachable, a timeout, a refused key, a bad
configuration) stops the batch instead: every row would fail the same way,
and the rows done so far stay done for the rerun. No answer is ever invented.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..errors import (
    AllModelsFailedError,
    DecirankError,
    InvalidAnswerError,
    InvalidInputError,
    LimitExceededError,
    ModelRequestInvalidError,
    RefusalError,
    TooLargeError,
)
from ..stores.runlog import under_parent_run
from ..types.answers import Usage
from .job import Task

__all__ = ["BatchStopped", "ChunkOutcome", "Item", "answer_chunk", "prepare_worker", "row_error", "usage_from_dict"]

#: ``(offset in the chunk, text, query or None)``.
Item = tuple[int, str, "str | None"]

_ROW_ERRORS = (
    InvalidInputError,
    InvalidAnswerError,
    ModelRequestInvalidError,
    TooLargeError,
    RefusalError,
    LimitExceededError,
)


def row_error(error: BaseException) -> bool:
    """Whether ``error`` may be one row's fault (so the row is isolated) rather than the model's or the setup's."""
    if isinstance(error, _ROW_ERRORS):
        return True
    if isinstance(error, AllModelsFailedError):
        return any(row_error(getattr(attempt, "error", None)) for attempt in error.attempts)
    return False


class BatchStopped(DecirankError):
    """The batch stopped: a failure that is not one row's, or a failed row under ``fail_fast``."""

    def __init__(self, message: str, *, error_type: str = "BatchStopped") -> None:
        self.error_type = error_type
        super().__init__(message)


@dataclass
class ChunkOutcome:
    chunk: int
    #: Answer columns by offset in the chunk, for the rows answered.
    answers: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: ``[offset, error type, message]`` for the rows that failed.
    errors: list[list[Any]] = field(default_factory=list)
    #: Usage of the calls that answered, by the model(s) that answered them.
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Set when the batch must stop: ``[error type, message, first offset, last offset]``.
    stop: list[str] | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk": self.chunk,
            "answers": {str(offset): answer for offset, answer in self.answers.items()},
            "errors": self.errors,
            "usage": self.usage,
            "stop": self.stop,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkOutcome:
        return cls(
            chunk=int(data["chunk"]),
            answers={int(offset): answer for offset, answer in data["answers"].items()},
            errors=[list(error) for error in data["errors"]],
            usage=data.get("usage") or {},
            stop=data.get("stop"),
            seconds=float(data.get("seconds") or 0.0),
        )


def _add_usage(outcome: ChunkOutcome, model: str, usage: Usage) -> None:
    key = model or "unknown"
    outcome.usage[key] = (usage_from_dict(outcome.usage.get(key)) + usage).to_dict()


def usage_from_dict(data: dict[str, Any] | None) -> Usage:
    """A :class:`Usage` from its ``to_dict()`` (None is no usage)."""
    if not data:
        return Usage()
    return Usage(
        **{key: data[key] for key in ("input_tokens", "output_tokens", "cached_tokens", "cost", "currency", "calls")}
    )


async def _ask(task: Task, items: list[Item]) -> tuple[list[dict[str, Any]], list[tuple[str, Usage]]]:
    """Answer columns for each item, in order, and each call's (model, usage); raises when a call fails."""
    texts = [text for _, text, _ in items]
    common = {"model": task.model, "timeout": task.timeout, "base_url": task.base_url}
    examples = list(task.examples) or None
    # The driver's calibration, loaded once (see job.py): each tool checks it and records its name and hash.
    calibration = task.calibration
    if task.tool == "filter":
        from ..tools.filter import filter_checked

        result = await filter_checked(
            texts,
            task.question,
            task.state,
            # With a target, the driver's one cut-off for the whole input decides, not a threshold.
            threshold=None if task.cutoff is not None else task.min_confidence,
            calibration=calibration,
            promise=task.cutoff,
            examples=examples,
            **common,
        )
        answers = [
            {"probability": d.probability, "kept": d.kept}
            | ({"raw_probability": d.raw_probability} if calibration is not None else {})
            for d in result.decisions
        ]
        return answers, [(result.model, result.usage)]
    if task.tool == "score":
        from ..tools.score import ascore

        result = await ascore(
            texts,
            task.question,
            true=task.true,
            false=task.false,
            examples=examples,
            calibration=calibration,
            **common,
        )
        raw = result.raw_probabilities or result.probabilities
        answers = [
            {"probability": p} | ({"raw_probability": r} if calibration is not None else {})
            for p, r in zip(result.probabilities, raw, strict=True)
        ]
        return answers, [(result.model, result.usage)]
    if task.tool == "classify":
        from ..tools.classify import aclassify

        result = await aclassify(
            texts, task.question, task.options, examples=examples, calibration=calibration, **common
        )
        return [{"choice": d.choice, "probability": d.probability} for d in result.decisions], [
            (result.model, result.usage)
        ]
    # rerank: one call per query; a document's score is its probability, its rank is set once the group is whole.
    from ..tools.rerank import arerank

    groups: dict[str, list[int]] = {}
    for position, (_, _, query) in enumerate(items):
        groups.setdefault(query or "", []).append(position)
    answers: list[dict[str, Any]] = [{} for _ in items]
    calls = []
    for query, positions in groups.items():
        result = await arerank(query, [texts[p] for p in positions], calibration=calibration, **common)
        for entry in result.results:
            answers[positions[entry.id]] = {"relevance_score": entry.relevance_score, "query": query}
        calls.append((result.model, result.usage))
    return answers, calls


async def _solve(task: Task, items: list[Item], outcome: ChunkOutcome, fail_fast: bool) -> None:
    try:
        answers, calls = await _ask(task, items)
    except Exception as error:
        if not row_error(error):
            # [error type, message, first offset, last offset] of the rows it struck.
            outcome.stop = [type(error).__name__, str(error), items[0][0], items[-1][0]]
            return
        if len(items) == 1:
            outcome.errors.append([items[0][0], type(error).__name__, str(error)])
            if fail_fast:
                outcome.stop = [type(error).__name__, str(error), items[0][0], items[0][0]]
            return
        middle = len(items) // 2
        for half in (items[:middle], items[middle:]):
            await _solve(task, half, outcome, fail_fast)
            if outcome.stop is not None:
                return
        return
    for (offset, _, _), answer in zip(items, answers, strict=True):
        outcome.answers[offset] = answer
    for model, usage in calls:
        _add_usage(outcome, model, usage)


def answer_chunk(task: Task, chunk: int, items: list[Item], fail_fast: bool = False) -> ChunkOutcome:
    """Answer ``items`` (rows of chunk ``chunk``); never raises for a row's failure, reports it."""
    started = time.perf_counter()
    outcome = ChunkOutcome(chunk)

    async def run() -> None:
        with under_parent_run(task.parent_run) if task.parent_run is not None else nullcontext():
            await _solve(task, items, outcome, fail_fast)

    anyio.run(run)
    outcome.answers = dict(sorted(outcome.answers.items()))
    outcome.errors.sort(key=lambda error: error[0])
    outcome.seconds = time.perf_counter() - started
    return outcome


# -- a worker process ---------------------------------------------------------------------------

_TASK: Task | None = None


def _watch_parent(parent: int) -> None:
    """End this worker when the process that started it is gone (killed, say), instead of lingering."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(1)


def prepare_worker(task: Task, cores: list[int] | None = None, parent: int | None = None) -> None:
    """Set a worker up once: its environment, its cores, its model loaded, and a watch on its parent."""
    global _TASK
    # The driver's DECIRANK_* variables, and only those: a Ray worker may hold another job's.
    for name in [name for name in os.environ if name.startswith("DECIRANK_")]:
        if name not in task.environment:
            del os.environ[name]
    os.environ.update(task.environment)
    if cores and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cores)
        except OSError:
            pass
    if parent is not None:
        threading.Thread(target=_watch_parent, args=(parent,), name="decirank-parent-watch", daemon=True).start()
    _TASK = task
    load_model(task)


def load_model(task: Task) -> None:
    """Load every model of the task's role that can be loaded ahead (the embedded one), once per process."""
    from ..decisions.decider import Decider

    try:
        decider = Decider.resolve(task.model, base_url=task.base_url)
    except DecirankError:
        return  # the first chunk reports it
    for backend in decider.chain:
        load = getattr(backend, "load", None)
        if callable(load):
            load()


def worker_chunk(chunk: int, items: list[Item], fail_fast: bool) -> ChunkOutcome:
    """What a worker process runs for each chunk (its task was set by :func:`prepare_worker`)."""
    assert _TASK is not None, "prepare_worker runs first"
    return answer_chunk(_TASK, chunk, items, fail_fast)
