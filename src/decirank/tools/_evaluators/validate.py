"""``validate:<type>``: built-in types checked by their parsers, registered types judged by a model.

Built-in types (json, python, yaml, toml) are ground truth: the artifact,
outer code fence stripped, parses or it does not. Any other type is one the
user registered with a name and a description (kept in the artifact store);
a decision model says how likely the artifact is a valid one: VALID at a
probability of 0.5 or more, INVALID below, and the probability is the score.
"""

from __future__ import annotations

import ast
import json
import tomllib
from collections.abc import Callable

import anyio

from ...decisions.toolcall import ToolCall
from ...errors import InvalidInputError
from ...stores.artifacts import ArtifactStore, RegisteredType, check_type_name
from ...types.questions import DecisionRequest, LikelihoodQuestion
from .base import Evaluation, Evaluator, Verdict, strip_code_fence

__all__ = [
    "BUILTIN_TYPES",
    "VALID_LIKELIHOOD",
    "BuiltinTypeValidator",
    "RegisteredTypeValidator",
    "register_validation_type",
]

VALID_LIKELIHOOD = 0.5
#: Why an artifact nested deeper than its parser can follow is INVALID (the parsers recurse once per level).
TOO_DEEP = "nested too deeply to parse: deeper than the parser can follow"


def _json_problem(text: str) -> str | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return f"line {error.lineno}, column {error.colno}: {error.msg}"
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:  # an integer longer than Python converts
        return str(error)
    return None


def _python_problem(text: str) -> str | None:
    try:
        ast.parse(text, filename="artifact.py")
    except SyntaxError as error:
        return f"line {error.lineno}: {error.msg}" if error.lineno else error.msg
    except (ValueError, RecursionError, MemoryError) as error:  # absurd nesting
        return f"cannot be parsed as Python: {error}"
    return None


def _yaml_problem(text: str) -> str | None:
    import yaml  # here, not at the top: it is slow to import and only this check needs it

    try:
        # A file may hold several documents; every one must parse.
        for _ in yaml.safe_load_all(text):
            pass
    except yaml.MarkedYAMLError as error:
        problem = ": ".join(part for part in (error.context, error.problem) if part)
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem
    except yaml.YAMLError as error:
        return " ".join(str(error).split())
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:  # a constructor's: an integer longer than Python converts, a bad date
        return " ".join(str(error).split())
    return None


def _toml_problem(text: str) -> str | None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return str(error)
    except RecursionError:
        return TOO_DEEP
    except ValueError as error:  # an integer longer than Python converts
        return str(error)
    return None


#: Each built-in type's check: the problem with a text, or None when it parses.
BUILTIN_TYPES: dict[str, Callable[[str], str | None]] = {
    "json": _json_problem,
    "python": _python_problem,
    "yaml": _yaml_problem,
    "toml": _toml_problem,
}


class BuiltinTypeValidator(Evaluator):
    needs_model = False

    def __init__(self, spec: str, type_name: str) -> None:
        super().__init__(spec)
        self.type_name = type_name
        self._problem = BUILTIN_TYPES[type_name]

    async def evaluate(self, text: str, call: ToolCall | None) -> Evaluation:
        body, _ = strip_code_fence(text)
        # A parser holds the event loop for as long as it runs; a big artifact runs aside.
        problem = await anyio.to_thread.run_sync(self._problem, body)
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
