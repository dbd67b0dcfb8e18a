"""Evaluators for score_list: ``exec:<command>``, ``score:<criterion>``, ``validate:<type>``.

:func:`parse_evaluator` turns a directive into an :class:`Evaluator` and
refuses a bad one before any work is done.
"""

from __future__ import annotations

from ...backends import suggest
from ...errors import InvalidInputError
from ...stores.artifacts import ArtifactStore
from .._checks import check_encodable
from .base import Evaluation, Evaluator, Verdict, strip_code_fence
from .exec import DEFAULT_EXEC_TIMEOUT, ExecEvaluator
from .score import CriterionScorer
from .validate import BUILTIN_TYPES, BuiltinTypeValidator, RegisteredTypeValidator, register_validation_type

__all__ = [
    "DEFAULT_EXEC_TIMEOUT",
    "EVALUATOR_FORMS",
    "Evaluation",
    "Evaluator",
    "Verdict",
    "parse_evaluator",
    "register_validation_type",
    "strip_code_fence",
]

EVALUATOR_FORMS = "exec:<command>, score:<criterion> or validate:<type>"
_PREFIXES = ("exec", "score", "validate")


def parse_evaluator(
    spec: object, *, store: ArtifactStore, exec_timeout: float = DEFAULT_EXEC_TIMEOUT, allow_exec: bool = True
) -> Evaluator:
    """The evaluator ``spec`` names; ``store`` holds the registered types of ``validate:``."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError("evaluator", EVALUATOR_FORMS, got=spec)
    # A lone surrogate can be neither run, nor asked about, nor logged: refused here, for every form.
    check_encodable(spec, "evaluator")
    prefix, separator, argument = spec.strip().partition(":")
    argument = argument.strip()
    if not separator or prefix not in _PREFIXES:
        hint = suggest(prefix, _PREFIXES)
        detail = f"unknown evaluator {prefix!r}" + (f"; did you mean '{hint}:'?" if hint else "")
        raise InvalidInputError("evaluator", EVALUATOR_FORMS, detail=detail)
    if not argument:
        what = {"exec": "a command", "score": "a criterion", "validate": "a type"}[prefix]
        raise InvalidInputError("evaluator", f"{prefix}: followed by {what}", got=spec)
    if prefix == "exec":
        if not allow_exec:
            raise InvalidInputError(
                "evaluator",
                "score:<criterion> or validate:<type>",
                detail="exec: runs shell commands and is switched off here; its operator can allow it",
            )
        return ExecEvaluator(spec, argument, timeout=exec_timeout)
    if prefix == "score":
        return CriterionScorer(spec, argument)
    if argument in BUILTIN_TYPES:
        return BuiltinTypeValidator(spec, argument)
    registered = store.get_type(argument)
    if registered is None:
        known = sorted(BUILTIN_TYPES) + [t.name for t in store.types()]
        hint = suggest(argument, known)
        raise InvalidInputError(
            "evaluator",
            "validate:<type> naming a built-in or registered type",
            detail=f"no type {argument!r}{f'; did you mean {hint!r}?' if hint else ''}; known: {', '.join(known)}; "
            "register one with: decirank artifacts types add NAME DESCRIPTION",
        )
    return RegisteredTypeValidator(spec, registered)
