"""``validate:<type>``: built-in types checked by their parsers, registered types judged by a model.

Built-in types (json, python, yaml, toml) are ground truth: the artifact,
outer code fence stripped, parses or it does not. Any other type is one the
user registered with a name and a description (kept in the artifact store);
a decision model says how likely the artifact is a valid one: VALID at a
probability of 0.5 or more, INVALID below, and the probability is the score.

A parser runs in a worker thread, bounded by what is left of the call's
budget and by :data:`PARSE_SECONDS`: one that has not finished by then is
UNKNOWN (not judged), never VALID. YAML is read by decirank's one guarded
reader (:func:`decirank._yaml.load_yaml`), which stops by itself at that
deadline and refuses a text over its size limit, also as UNKNOWN.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import tomllib
from collections.abc import Callable

import anyio

from ..._yaml import YamlLimit, YamlProblem, load_yaml
from ...decisions.toolcall import ToolCall
from ...errors import InvalidInputError
from ...stores.artifacts import ArtifactStore, RegisteredType, check_type_name
from ...types.questions import DecisionRequest, LikelihoodQuestion
from .base import BoundedEvaluator, Evaluation, Evaluator, Verdict, strip_code_fence

__all__ = [
    "BUILTIN_TYPES",
    "PARSE_SECONDS",
    "VALID_LIKELIHOOD",
    "BuiltinTypeValidator",
    "RegisteredTypeValidator",
    "register_validation_type",
]

VALID_LIKELIHOOD = 0.5
#: Why an artifact nested deeper than its parser can follow is INVALID (the parsers recurse once per level).
TOO_DEEP = "nested too deeply to parse: deeper than the parser can follow"
#: Seconds one artifact's parse may take when the call's budget leaves more (or there is none).
PARSE_SECONDS = 10.0


def _json_problem(text: str, seconds: float) -> str | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"line {error.lineno}, column {error.colno}: {error.msg}"
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:  # an integer longer than Python converts
        return str(error)
    return None


def _python_problem(text: str, seconds: float) -> str | None:
    try:
        ast.parse(text, filename="artifact.py")
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}" if error.lineno else error.msg
    except (ValueError, RecursionError, MemoryError) as error:  # absurd nesting
        return f"cannot be parsed as Python: {error}"
    return None


def _yaml_problem(text: str, seconds: float) -> str | None:
    """Raises :class:`YamlLimit` for a text over the reader's size or time limit: that is not a verdict."""
    try:
        # A file may hold several documents; every one must parse. Only whether it parses is asked, and
        # the documents are thrown away unwalked: no bound on values or nesting but the parser's own.
        load_yaml(text, what_is_wrong="", every_document=True, timeout=seconds, max_values=None, max_nesting=None)
    except YamlLimit:
        raise
    except YamlProblem as problem:
        # "not valid YAML at line 2, column 3: ..." without the lead: the issue says where it broke.
        message = problem.problem.removeprefix(": ").strip()
        if "nested too deeply" in message:
            return TOO_DEEP
        return message.removeprefix("at ")
    return None


def _toml_problem(text: str, seconds: float) -> str | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return str(error)
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:  # an integer longer than Python converts
        return str(error)
    return None


#: Each built-in type's check of a text, within about so many seconds: the problem, or None when it parses.
BUILTIN_TYPES: dict[str, Callable[[str, float], str | None]] = {
    "json": _json_problem,
    "python": _python_problem,
    "yaml": _yaml_problem,
    "toml": _toml_problem,
}


def not_judged(reason: str) -> Evaluation:
    return Evaluation(None, Verdict.UNKNOWN, (reason,), reason)


class BuiltinTypeValidator(BoundedEvaluator):
    needs_model = False

    def __init__(
        self, spec: str, type_name: str, *, deadline: float = math.inf, budget: float | None = None
    ) -> None:
        super().__init__(spec)
        self.type_name = type_name
        self._problem = BUILTIN_TYPES[type_name]
        #: When the call's budget ends (``anyio.current_time()``), and that budget in seconds.
        self.deadline = deadline
        self.budget = budget

    def _shown(self, seconds: float) -> str:
        """The limit as the caller gave it: the whole budget when it is what ran out, not the moment's rest."""
        return f"{self.budget:g}" if self.budget is not None and seconds < PARSE_SECONDS else f"{seconds:g}"

    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        left = self.deadline - anyio.current_time()
        if left <= 0:
            return not_judged(f"not parsed: the call's time budget of {self.budget or 0:g} s was spent")
        seconds = min(left, PARSE_SECONDS)
        body, _ = strip_code_fence(text)
        # A parser holds the event loop for as long as it runs, so it runs in a thread; a thread cannot be
        # stopped, so past its time it is left to finish alone (the YAML reader stops by itself) and the
        # artifact is not judged.
        timed_out = False
        with anyio.move_on_after(seconds) as clock:
            try:
                problem = await anyio.to_thread.run_sync(
                    functools.partial(self._problem, body, seconds), abandon_on_cancel=True
                )
            except YamlLimit as limit:
                if not limit.timed_out:
                    return not_judged(f"not parsed as {self.type_name}: {limit.problem.removeprefix(': ')}")
                timed_out = True
        if clock.cancelled_caught or timed_out:
            whose = "the call's time budget" if left <= PARSE_SECONDS else "the time limit of a parse"
            return not_judged(f"not parsed as {self.type_name} within {self._shown(seconds)} s, {whose}")
        if problem is None:
            return Evaluation(1.0, Verdict.VALID, (), f"parses as {self.type_name}")
        return Evaluation(0.0, Verdict.INVALID, (problem,), f"does not parse as {self.type_name}")


def validity_question(registered: RegisteredType) -> LikelihoodQuestion:
    return LikelihoodQuestion(
        f"The artifact is a valid {registered.name}: {registered.description}",
        true=f"it is a valid {registered.name}",
        false=f"it is not a valid {registered.name}",
    )


class RegisteredTypeValidator(Evaluator):
    needs_model = True

    def __init__(self, spec: str, registered: RegisteredType) -> None:
        super().__init__(spec)
        self.registered = registered
        self.question = validity_question(registered)

    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        assert call is not None, "score_list opens a ToolCall for evaluators that need a model"
        response = await call.ask(DecisionRequest(state=text, questions={"valid": self.question}))
        probability = response.answers["valid"].probability
        reason = f"{probability:.2f} likely a valid {self.registered.name}"
        if probability >= VALID_LIKELIHOOD:
            return Evaluation(probability, Verdict.VALID, (), reason)
        issue = f"probably not a valid {self.registered.name} ({self.registered.description})"
        return Evaluation(probability, Verdict.INVALID, (issue,), reason)


def register_validation_type(name: str, description: str, *, store: ArtifactStore | None = None) -> RegisteredType:
    """Let ``validate:<name>`` judge artifacts against ``description`` with a decision model.

    Registering a name again replaces its description. The names of built-in
    types are refused: their parsers are ground truth.
    """
    name = check_type_name(name)
    if name in BUILTIN_TYPES:
        raise InvalidInputError(
            "name", "a name that is not a built-in type", detail=f"{name!r} is checked by its parser"
        )
    (store or ArtifactStore()).put_type(name, description)
    return RegisteredType(name, description)
