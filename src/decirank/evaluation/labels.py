"""Measure a decision model on labelled texts: a choice among the labels, or a yes/no per text.

Data is ``{"text", "label"}`` per row (JSON Lines). Each scored row is one
:class:`~decirank.types.questions.DecisionRequest` whose state is the row's text:

- ``choice``: one :class:`ChoiceQuestion` over the labels (keys are the label
  names, descriptions the label in words, or from an options file). ``none``
  adds a "none of these" option (key ``none``); ``hold_out`` drops labels from
  the options, so that their rows are out of scope and belong on ``none``, as
  do the rows of every label the options lack.
- ``noul``: one :class:`LikelihoodQuestion`. A question with ``{label}`` is
  topical: half the rows are asked about their own label and half about another
  one (truth: whether it is their own). Any other question is binary: truth is
  ``label == positive``.

``examples`` rows per label become :class:`Example` s attached to every question
and are not scored; ``limit`` scores a seeded sample. Every random draw comes
from ``seed``, so a run is repeatable. Models are asked through their
:class:`~decirank.decisions.decider.Decider` (no decision cache, no run log),
several rows at once; a failed call fails the whole evaluation.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._jsonpath import JsonProblem, loads_json
from .._sync import run_sync
from ..decisions.decider import DEFAULT_ROLE, Decider
from ..decisions.toolcall import gather
from ..errors import DecirankError, DecisionError, InvalidInputError
from ..types.answers import ChoiceAnswer, LikelihoodAnswer, Usage
from ..types.questions import ChoiceQuestion, DecisionRequest, Example, LikelihoodQuestion
from .trec import calibration

__all__ = [
    "CHOICE_QUESTION",
    "NONE_KEY",
    "NOUL_QUESTION",
    "LabelReport",
    "LabelTask",
    "LabelledText",
    "ModelScore",
    "aevaluate_labels",
    "aevaluate_task",
    "build_task",
    "choice_metrics",
    "evaluate_labels",
    "evaluate_task",
    "label_words",
    "likelihood_metrics",
    "load_labelled",
    "load_options",
]

CHOICE_QUESTION = "Which label fits the text best?"
NOUL_QUESTION = "Is this text about {label}?"
LABEL_PLACEHOLDER = "{label}"
NONE_KEY = "none"
QUESTION_ID = "answer"
DEFAULT_CONCURRENCY = 8
THRESHOLD = 0.5
TYPES = ("choice", "noul")


@dataclass(frozen=True)
class LabelledText:
    text: str
    label: str
    #: Where the row came from (a line of the data file), for error messages.
    line: int | None = None


@dataclass(frozen=True)
class Case:
    """One scored row: the request asked about it and the right answer."""

    row: LabelledText
    request: DecisionRequest
    #: An option key (choice) or True/False (noul).
    truth: str | bool


@dataclass
class LabelTask:
    """The questions of one evaluation, built from the rows by :func:`build_task`."""

    type: str
    question: str
    cases: list[Case]
    labels: list[str]
    rows: int
    #: The choice's options (key -> description), ``none`` included.
    options: dict[str, str] | None = None
    held_out: list[str] = field(default_factory=list)
    positive: str | None = None
    topical: bool = False
    examples_per_label: int = 0
    examples_per_question: int = 0
    seed: int = 0

    @property
    def out_of_scope(self) -> int:
        return sum(1 for case in self.cases if self.type == "choice" and case.truth == NONE_KEY)


@dataclass
class ModelScore:
    """How one model did on the task's rows."""

    model: str
    answered_by: str
    rows: int
    accuracy: float
    macro_f1: float
    auroc: float | None
    brier: float
    ece: float
    oos_recall: float | None
    in_scope_accuracy: float | None
    seconds: float
    usage: Usage = field(default_factory=Usage)

    @property
    def seconds_per_row(self) -> float:
        return self.seconds / self.rows if self.rows else 0.0

    def to_dict(self) -> dict[str, Any]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "model": self.model,
            "answered_by": self.answered_by,
            "rows": self.rows,
            "accuracy": rounded(self.accuracy),
            "macro_f1": rounded(self.macro_f1),
            "auroc": rounded(self.auroc),
            "brier": rounded(self.brier),
            "ece": rounded(self.ece),
            "oos_recall": rounded(self.oos_recall),
            "in_scope_accuracy": rounded(self.in_scope_accuracy),
            "seconds_per_row": round(self.seconds_per_row, 5),
            "usage": self.usage.to_dict(),
        }


@dataclass
class LabelReport:
    task: LabelTask
    models: list[ModelScore]
    concurrency: int = DEFAULT_CONCURRENCY

    def to_dict(self) -> dict[str, Any]:
        task = self.task
        return {
            "type": task.type,
            "question": task.question,
            "topical": task.topical if task.type == "noul" else None,
            "positive": task.positive,
            "rows": task.rows,
            "scored_rows": len(task.cases),
            "labels": len(task.labels),
            "options": None if task.options is None else len(task.options),
            "held_out": task.held_out,
            "out_of_scope_rows": task.out_of_scope if task.type == "choice" else None,
            "examples_per_label": task.examples_per_label,
            "examples_per_question": task.examples_per_question,
            "seed": task.seed,
            "concurrency": self.concurrency,
            "models": [score.to_dict() for score in self.models],
        }


# --- reading ---------------------------------------------------------------------------------


def _label(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def check_rows(rows: Iterable[Any]) -> list[LabelledText]:
    """Rows as :class:`LabelledText`; ``{"text", "label"}`` mappings and ``(text, label)`` pairs are accepted."""
    checked: list[LabelledText] = []
    for number, row in enumerate(rows, start=1):
        if isinstance(row, LabelledText):
            checked.append(row)
            continue
        if isinstance(row, Mapping):
            text, label = row.get("text"), _label(row.get("label"))
        elif isinstance(row, list | tuple) and len(row) == 2:
            text, label = row[0], _label(row[1])
        else:
            raise InvalidInputError(f"rows.{number}", 'an object {"text": ..., "label": ...}', got=row)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError(f"rows.{number}.text", "a non-empty string", got=text)
        if label is None:
            raise InvalidInputError(f"rows.{number}.label", "a non-empty string (or an integer)", got=row)
        checked.append(LabelledText(text, label, number))
    if not checked:
        raise InvalidInputError("rows", "at least one labelled row")
    return checked


def _read(path: str | Path, field: str, expected: str) -> str:
    """The UTF-8 text of a regular file (a named pipe or a device could block or never end)."""
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "does not exist"
        raise InvalidInputError(field, expected, detail=f"{str(path)!r} {what}")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        detail = f"cannot read {str(path)!r}: {error.strerror or error}"
        raise InvalidInputError(field, expected, detail=detail) from None
    except UnicodeDecodeError as error:
        raise InvalidInputError(field, "UTF-8 text", detail=f"{str(path)!r}: byte {error.start} is not UTF-8") from None


def load_labelled(path: str | Path) -> list[LabelledText]:
    """The rows of a JSON Lines file of ``{"text", "label"}``; a bad line is an error naming it."""
    lines = _read(path, "data", 'a JSON Lines file of {"text", "label"}').splitlines()
    rows: list[LabelledText] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = loads_json(line)
        except JsonProblem as problem:
            problem.line = number
            raise InvalidInputError("data", "JSON Lines", detail=f"{problem.where()}{problem.problem}") from None
        text = value.get("text") if isinstance(value, dict) else None
        label = _label(value.get("label")) if isinstance(value, dict) else None
        if not isinstance(text, str) or not text.strip() or label is None:
            raise InvalidInputError(
                "data", 'a non-empty "text" and "label" on every line', detail=f"line {number}: {line[:80]!r}"
            )
        rows.append(LabelledText(text, label, number))
    if not rows:
        raise InvalidInputError("data", "at least one labelled row", detail=f"{str(path)!r} has none")
    return rows


def load_options(path: str | Path) -> dict[str, str]:
    """An options file: a JSON list of labels, or an object of label -> description."""
    expected = "a JSON list of labels or an object of label -> description"
    text = _read(path, "options", expected)
    try:
        value = loads_json(text)
    except JsonProblem as problem:
        detail = f"{problem.where()}{problem.problem}"
        raise InvalidInputError("options", "JSON" if problem.syntax else expected, detail=detail) from None
    return check_options(value)


def check_options(value: Any) -> dict[str, str]:
    expected = "a JSON list of labels or an object of label -> description"
    if isinstance(value, Mapping):
        options = {}
        for key, description in value.items():
            if not isinstance(description, str) or not description.strip():
                raise InvalidInputError(f"options.{key}", "a non-empty description", got=description)
            options[str(key)] = description
    elif isinstance(value, list):
        labels = [_label(label) for label in value]
        if None in labels:
            raise InvalidInputError("options", expected, got=value)
        options = {label: label_words(label) for label in labels if label is not None}
    else:
        raise InvalidInputError("options", expected, got=value)
    if not options:
        raise InvalidInputError("options", "at least one label", got=value)
    return options


def label_words(label: str) -> str:
    """A label as words: ``card_arrival`` -> ``card arrival``."""
    return " ".join(label.replace("_", " ").split()) or label


# --- building the questions ---------------------------------------------------------------------


def _rng(seed: int, purpose: str) -> random.Random:
    # A string seed is hashed with SHA-512, so the draws do not depend on PYTHONHASHSEED.
    return random.Random(f"{seed}/{purpose}")


def _by_label(rows: Sequence[LabelledText]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(row.label, []).append(index)
    return groups


def _take_examples(
    groups: Mapping[str, list[int]], labels: Iterable[str], per_label: int, seed: int
) -> dict[str, list[int]]:
    """``per_label`` row indices of each of ``labels``, drawn with the seed."""
    taken: dict[str, list[int]] = {}
    if per_label <= 0:
        return taken
    rng = _rng(seed, "examples")
    for label in sorted(labels):
        indices = groups.get(label, [])
        if per_label > len(indices):
            raise InvalidInputError(
                "examples",
                f"at most {len(indices)} examples per label",
                detail=f"label {label!r} has {len(indices)} rows",
            )
        taken[label] = sorted(rng.sample(indices, per_label))
    return taken


def _check_count(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(name, f"an integer of at least {minimum}", got=value)
    return value


def _refuse(name: str, value: Any, kind: str) -> None:
    if value is not None and value != 0:
        raise InvalidInputError(name, f"nothing with {kind}", got=value)


def build_task(
    rows: Iterable[Any],
    *,
    type: str = "choice",
    question: str | None = None,
    options: Mapping[str, str] | Sequence[str] | None = None,
    none: str | None = None,
    hold_out: int = 0,
    positive: str | None = None,
    true: str | None = None,
    false: str | None = None,
    examples: int = 0,
    limit: int | None = None,
    seed: int = 0,
) -> LabelTask:
    """The requests of one evaluation and their right answers; see the module's docstring."""
    rows = check_rows(rows)
    if type not in TYPES:
        raise InvalidInputError("type", "choice or noul", got=type)
    examples = _check_count(examples, "examples")
    hold_out = _check_count(hold_out, "hold_out")
    seed = _check_count(seed, "seed")
    if limit is not None:
        limit = _check_count(limit, "limit", 1)
    if question is not None and (not isinstance(question, str) or not question.strip()):
        raise InvalidInputError("question", "a non-empty string", got=question)
    groups = _by_label(rows)
    labels = sorted(groups)
    if options is not None:
        options = check_options(list(options) if isinstance(options, tuple) else options)
        unknown = [label for label in options if label not in groups]
        # A choice may offer options no row has (every row of another domain is out of scope);
        # a yes/no question about a label the data never uses could never be true.
        if unknown and type != "choice":
            raise InvalidInputError(
                "options", "labels that occur in the data", detail=f"unknown label {unknown[0]!r}"
            )
    if type == "choice":
        for name, value in (("positive", positive), ("true", true), ("false", false)):
            _refuse(name, value, "--type choice")
        question = question or CHOICE_QUESTION
        return _choice_task(rows, groups, labels, question, options, none, hold_out, examples, limit, seed)
    for name, value in (("none", none), ("hold_out", hold_out)):
        _refuse(name, value, "--type noul")
    question = question or NOUL_QUESTION
    words = {label: label_words(label) for label in labels} | dict(options or {})
    if LABEL_PLACEHOLDER in question:
        if positive is not None:
            raise InvalidInputError("positive", "nothing with a question about {label}", got=positive)
        return _topical_task(rows, groups, labels, question, words, true, false, examples, limit, seed)
    return _binary_task(rows, groups, labels, question, positive, true, false, examples, limit, seed)


def _scored(
    rows: Sequence[LabelledText], example_rows: Mapping[str, list[int]], limit: int | None, seed: int
) -> list[int]:
    """The indices of the rows left to score once the examples are taken, sampled down to ``limit``."""
    taken = {index for indices in example_rows.values() for index in indices}
    indices = [index for index in range(len(rows)) if index not in taken]
    if limit is not None and limit < len(indices):
        indices = sorted(_rng(seed, "limit").sample(indices, limit))
    if not indices:
        raise InvalidInputError("examples", "fewer examples than rows, so that some rows are left to score")
    return indices


def _choice_task(rows, groups, labels, question, options, none, hold_out, examples, limit, seed) -> LabelTask:
    options = dict(options) if options is not None else {label: label_words(label) for label in labels}
    held_out: list[str] = []
    if hold_out:
        if hold_out >= len(options):
            raise InvalidInputError("hold_out", f"fewer labels than the {len(options)} options", got=hold_out)
        held_out = sorted(_rng(seed, "hold-out").sample(sorted(options), hold_out))
        options = {key: text for key, text in options.items() if key not in held_out}
    out_of_scope = [label for label in labels if label not in options]
    if none is not None:
        if not isinstance(none, str) or not none.strip():
            raise InvalidInputError("none", "a non-empty description of 'none of these'", got=none)
        if NONE_KEY in groups:
            raise InvalidInputError("none", f"data without a label called {NONE_KEY!r}, the key of 'none of these'")
        options[NONE_KEY] = none
    elif out_of_scope:
        raise InvalidInputError(
            "none",
            "a 'none of these' option (--none TEXT) for rows whose label is not an option",
            detail=f"{len(out_of_scope)} labels are not options, e.g. {out_of_scope[0]!r}",
        )
    if len(options) < 2:
        raise InvalidInputError("options", "at least 2 options", got=len(options))
    # Examples come from the labels that are options: a held-out label stays unseen, as out-of-scope text is.
    example_rows = _take_examples(groups, [label for label in options if label in groups], examples, seed)
    shown = [Example(rows[index].text, label) for label in sorted(example_rows) for index in example_rows[label]]
    choice = ChoiceQuestion(question, options, tuple(shown))
    cases = [
        Case(
            rows[index],
            DecisionRequest(rows[index].text, {QUESTION_ID: choice}),
            rows[index].label if rows[index].label in options else NONE_KEY,
        )
        for index in _scored(rows, example_rows, limit, seed)
    ]
    return LabelTask(
        "choice", question, cases, labels, len(rows), options=options, held_out=held_out,
        examples_per_label=examples, examples_per_question=len(shown), seed=seed,
    )


def _fill(text: str | None, words: str) -> str | None:
    return None if text is None else text.replace(LABEL_PLACEHOLDER, words)


def _topical_task(rows, groups, labels, question, words, true, false, examples, limit, seed) -> LabelTask:
    if len(labels) < 2:
        raise InvalidInputError("data", "at least 2 labels for a question about {label}", got=len(labels))
    example_rows = _take_examples(groups, labels, examples, seed)
    questions: dict[str, LikelihoodQuestion] = {}
    for label in labels:
        shown: list[Example] = []
        if examples:
            # Pairs, as the scored rows are: one of the label's own rows (true), one of another label's (false).
            rng = _rng(seed, f"examples/{label}")
            others = [index for other in labels if other != label for index in example_rows[other]]
            for own, other in zip(example_rows[label], rng.sample(others, examples), strict=True):
                shown += [Example(rows[own].text, True), Example(rows[other].text, False)]
        questions[label] = LikelihoodQuestion(
            _fill(question, words[label]), _fill(true, words[label]), _fill(false, words[label]), tuple(shown)
        )
    scored = _scored(rows, example_rows, limit, seed)
    rng = _rng(seed, "topical")
    own = set(rng.sample(range(len(scored)), (len(scored) + 1) // 2))
    cases = []
    for position, index in enumerate(scored):
        row = rows[index]
        asked = row.label if position in own else rng.choice([label for label in labels if label != row.label])
        cases.append(Case(row, DecisionRequest(row.text, {QUESTION_ID: questions[asked]}), asked == row.label))
    return LabelTask(
        "noul", question, cases, labels, len(rows), topical=True,
        examples_per_label=examples, examples_per_question=2 * examples, seed=seed,
    )


def _binary_task(rows, groups, labels, question, positive, true, false, examples, limit, seed) -> LabelTask:
    if positive is None:
        if len(labels) != 2:
            raise InvalidInputError(
                "positive", "the label that makes the answer true (--positive), or a question about {label}",
                detail=f"the data has {len(labels)} labels, not 2",
            )
        positive = labels[1]
    elif positive not in groups:
        raise InvalidInputError("positive", f"one of the labels ({', '.join(labels[:10])})", got=positive)
    example_rows = _take_examples(groups, labels, examples, seed)
    # Interleaved across labels, so that no answer comes in one long run.
    shown = [
        Example(rows[index].text, label == positive)
        for batch in zip(*(example_rows[label] for label in labels))
        for label, index in zip(labels, batch, strict=True)
    ] if examples else []
    likelihood = LikelihoodQuestion(question, true, false, tuple(shown))
    cases = [
        Case(rows[index], DecisionRequest(rows[index].text, {QUESTION_ID: likelihood}), rows[index].label == positive)
        for index in _scored(rows, example_rows, limit, seed)
    ]
    return LabelTask(
        "noul", question, cases, labels, len(rows), positive=positive,
        examples_per_label=examples, examples_per_question=len(shown), seed=seed,
    )


# --- metrics ----------------------------------------------------------------------------------


def _auroc(truths: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve; None when only one class occurs."""
    if len(set(truths)) < 2:
        return None
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(truths, scores))


def choice_metrics(
    truths: Sequence[str], distributions: Sequence[Mapping[str, float]], *, none: str | None = NONE_KEY
) -> dict[str, float | None]:
    """Accuracy, macro-F1, AUROC, multiclass Brier, ECE, and out-of-scope recall and in-scope accuracy.

    The prediction is the most probable key (the first listed on a tie). AUROC is
    out-of-scope detection by the ``none`` probability when some truths are ``none``,
    else the top probability as a score of being right. ECE is of the top
    probability against being right, in 10 equal-width bins.
    """
    from sklearn.metrics import accuracy_score, f1_score

    predictions = [max(d, key=d.__getitem__) for d in distributions]
    tops = [d[p] for d, p in zip(distributions, predictions, strict=True)]
    correct = [p == t for p, t in zip(predictions, truths, strict=True)]
    brier = math.fsum(
        math.fsum((p - float(key == truth)) ** 2 for key, p in d.items())
        for d, truth in zip(distributions, truths, strict=True)
    ) / len(truths)
    out_of_scope = [none is not None and truth == none for truth in truths]
    metrics: dict[str, float | None] = {
        "accuracy": float(accuracy_score(truths, predictions)),
        "macro_f1": float(f1_score(truths, predictions, average="macro", zero_division=0)),
        "brier": brier,
        "ece": calibration(zip(tops, correct, strict=True))[1],
        "oos_recall": None,
        "in_scope_accuracy": None,
    }
    if any(out_of_scope):
        metrics["auroc"] = _auroc(out_of_scope, [d.get(none, 0.0) for d in distributions])
        oos = [c for c, o in zip(correct, out_of_scope, strict=True) if o]
        in_scope = [c for c, o in zip(correct, out_of_scope, strict=True) if not o]
        metrics["oos_recall"] = sum(oos) / len(oos)
        metrics["in_scope_accuracy"] = sum(in_scope) / len(in_scope) if in_scope else None
    else:
        metrics["auroc"] = _auroc(correct, tops)
    return metrics


def likelihood_metrics(truths: Sequence[bool], probabilities: Sequence[float]) -> dict[str, float | None]:
    """Accuracy and macro-F1 at 0.5, AUROC, Brier and ECE (10 equal-width bins) of probabilities against truths."""
    from sklearn.metrics import accuracy_score, brier_score_loss, f1_score

    truths = [bool(t) for t in truths]
    predictions = [p >= THRESHOLD for p in probabilities]
    return {
        "accuracy": float(accuracy_score(truths, predictions)),
        "macro_f1": float(f1_score(truths, predictions, average="macro", labels=[False, True], zero_division=0)),
        "auroc": _auroc(truths, probabilities),
        "brier": float(brier_score_loss(truths, probabilities, pos_label=True)),
        "ece": calibration(zip(probabilities, truths, strict=True))[1],
        "oos_recall": None,
        "in_scope_accuracy": None,
    }


# --- running ----------------------------------------------------------------------------------


def _check_models(models: str | Sequence[str]) -> list[str]:
    names = [models] if isinstance(models, str) else list(models)
    if not names:
        raise InvalidInputError("models", "at least one role or model name")
    return names


async def _answer_rows(
    name: str, decider: Decider, cases: Sequence[Case], concurrency: int, on_row: Callable[[], None] | None
) -> tuple[list[Any], list[str], Usage]:
    answers: list[Any] = [None] * len(cases)
    answered_by: list[str] = []
    usage = Usage()
    pending = iter(range(len(cases)))

    async def worker() -> None:
        nonlocal usage
        for index in pending:  # one iterator shared by the workers: each row is taken once
            case = cases[index]
            try:
                response = await decider.decide(case.request)
            except DecirankError as error:
                where = f"line {case.row.line}" if case.row.line is not None else "a row"
                raise DecisionError(f"{name} failed on {where}: {error}") from error
            answers[index] = response.answers[QUESTION_ID]
            usage = usage + response.usage
            if response.model not in answered_by:
                answered_by.append(response.model)
            if on_row is not None:
                on_row()

    await gather([worker for _ in range(min(concurrency, len(cases)))])
    return answers, answered_by, usage


async def aevaluate_task(
    task: LabelTask,
    models: str | Sequence[str] = (DEFAULT_ROLE,),
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_row: Callable[[], None] | None = None,
) -> LabelReport:
    """Ask every model every case of ``task`` and score the answers; ``on_row`` is called after each answer."""
    names = _check_models(models)
    concurrency = _check_count(concurrency, "concurrency", 1)
    # Every name is resolved first, so an unknown model fails before any work is done.
    deciders = [Decider.resolve(name) for name in names]
    scores = []
    for name, decider in zip(names, deciders, strict=True):
        started = time.perf_counter()
        answers, answered_by, usage = await _answer_rows(name, decider, task.cases, concurrency, on_row)
        seconds = time.perf_counter() - started
        truths = [case.truth for case in task.cases]
        if task.type == "choice":
            assert all(isinstance(answer, ChoiceAnswer) for answer in answers)
            none = NONE_KEY if task.options and NONE_KEY in task.options else None
            metrics = choice_metrics(truths, [answer.probabilities for answer in answers], none=none)
        else:
            assert all(isinstance(answer, LikelihoodAnswer) for answer in answers)
            metrics = likelihood_metrics(truths, [answer.probability for answer in answers])
        scores.append(
            ModelScore(name, ", ".join(answered_by), len(task.cases), seconds=seconds, usage=usage, **metrics)
        )
    return LabelReport(task, scores, concurrency)


def evaluate_task(
    task: LabelTask,
    models: str | Sequence[str] = (DEFAULT_ROLE,),
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_row: Callable[[], None] | None = None,
) -> LabelReport:
    """The sync twin of :func:`aevaluate_task`."""
    return run_sync(aevaluate_task, task, models, concurrency=concurrency, on_row=on_row)


async def aevaluate_labels(
    rows: Iterable[Any],
    models: str | Sequence[str] = (DEFAULT_ROLE,),
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_row: Callable[[], None] | None = None,
    **task_options: Any,
) -> LabelReport:
    """Build the task from ``rows`` (:func:`build_task`'s keyword arguments) and measure ``models`` on it."""
    task = build_task(rows, **task_options)
    return await aevaluate_task(task, models, concurrency=concurrency, on_row=on_row)


def evaluate_labels(
    rows: Iterable[Any],
    models: str | Sequence[str] = (DEFAULT_ROLE,),
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_row: Callable[[], None] | None = None,
    **task_options: Any,
) -> LabelReport:
    """The sync twin of :func:`aevaluate_labels`::

        rows = load_labelled("banking77.jsonl")
        report = evaluate_labels(rows, ["local", "lexical"], none="none of these", hold_out=5)
        report.to_dict()["models"][0]["accuracy"]
    """
    task = build_task(rows, **task_options)
    return evaluate_task(task, models, concurrency=concurrency, on_row=on_row)
