"""A plan: steps ``- id / tool_name / input``, checked whole before any step runs.

    - id: E1
      tool_name: builtin__rank
      input:
        state: "{{input.state}}"
        items: "{{input.items}}"
        instructions: "{{input.instructions}}"

A plan is that list of steps, or a mapping whose ``steps`` holds it. Loading
refuses, naming the field, what would otherwise fail halfway through a paid
run: a step without an id or a tool, a duplicate id, an unknown tool, an
input the tool does not take or a required one left out, and a tag naming a
step that does not run before it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._yaml import YamlProblem, load_yaml, yaml_problem
from ..errors import InvalidInputError
from ..tools.registry import check_arguments, get_tool
from .errors import InvalidPlanError, TemplateError
from .templates import INPUT_ROOT, find_refs

__all__ = ["Plan", "PlanSource", "PlanStep", "load_plan", "yaml_problem"]

STEP_KEYS = ("id", "tool_name", "input")
# Ids are template roots, so they cannot hold the dot that separates path parts.
_STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class PlanStep:
    id: str
    tool_name: str
    #: The tool's input, templates unresolved.
    input: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tool_name": self.tool_name, "input": self.input}


@dataclass(frozen=True)
class Plan:
    steps: tuple[PlanStep, ...]

    @classmethod
    def from_data(cls, data: Any) -> Plan:
        """A plan from parsed YAML or JSON: a list of steps, or ``{"steps": [...]}``."""
        if isinstance(data, Mapping):
            unknown = [key for key in data if key != "steps"]
            if unknown or "steps" not in data:
                raise InvalidPlanError("plan", "expected a list of steps, or a mapping with only 'steps'")
            data = data["steps"]
        if isinstance(data, str | bytes) or not isinstance(data, Sequence):
            raise InvalidPlanError("steps", f"expected a list of steps, got {type(data).__name__}")
        if not data:
            raise InvalidPlanError("steps", "a plan needs at least one step")
        steps: list[PlanStep] = []
        for index, raw in enumerate(data):
            steps.append(_check_step(raw, index, steps))
        return cls(tuple(steps))

    @property
    def step_ids(self) -> list[str]:
        return [step.id for step in self.steps]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [step.to_dict() for step in self.steps]}


def _check_step(raw: Any, index: int, earlier: Sequence[PlanStep]) -> PlanStep:
    where = f"steps.{index}"
    if not isinstance(raw, Mapping):
        raise InvalidPlanError(where, f"expected a step with {', '.join(STEP_KEYS)}, got {type(raw).__name__}")
    step_id = raw.get("id")
    if step_id is None:
        raise InvalidPlanError(f"{where}.id", "every step needs an id, such as E1")
    if not isinstance(step_id, str) or not _STEP_ID.fullmatch(step_id) or step_id == INPUT_ROOT:
        raise InvalidPlanError(
            f"{where}.id", f"expected a name of letters, digits, '_' or '-' other than {INPUT_ROOT!r}, got {step_id!r}"
        )
    for position, other in enumerate(earlier):
        if other.id == step_id:
            raise InvalidPlanError(f"{where}.id", f"{step_id!r} is already the id of step {position}", step=step_id)
    where = f"steps.{step_id}"
    unknown = [str(key) for key in raw if key not in STEP_KEYS]
    if unknown:
        raise InvalidPlanError(where, f"unknown key {unknown[0]!r}; a step has {', '.join(STEP_KEYS)}", step=step_id)
    tool_name = raw.get("tool_name")
    if tool_name is None:
        raise InvalidPlanError(
            f"{where}.tool_name", "every step needs a tool_name, such as builtin__rank", step=step_id
        )
    try:
        spec = get_tool(tool_name)
    except InvalidInputError as error:
        raise InvalidPlanError(
            f"{where}.tool_name", f"expected {error.expected}, got {tool_name!r}", step=step_id
        ) from None
    tool_input = raw.get("input", {})
    if not isinstance(tool_input, Mapping):
        raise InvalidPlanError(f"{where}.input", f"expected a mapping of {tool_name}'s inputs", step=step_id)
    try:
        check_arguments(spec, dict(tool_input))
    except InvalidInputError as error:
        detail = str(error).removeprefix(f"{error.field}: ")
        raise InvalidPlanError(f"{where}.input.{error.field}", detail, step=step_id) from None
    _check_refs(tool_input, step_id, [step.id for step in earlier])
    return PlanStep(step_id, tool_name, dict(tool_input))


def _check_refs(tool_input: Mapping[str, Any], step_id: str, earlier_ids: Sequence[str]) -> None:
    """Every tag's root must be the input or a step that runs before this one."""
    for field, ref in find_refs(tool_input, f"steps.{step_id}.input", step_id):
        if ref.root == INPUT_ROOT or ref.root in earlier_ids:
            continue
        if ref.root == step_id:
            problem = f"{ref.tag} refers to its own step; a step can use the input and earlier steps"
        else:
            known = ", ".join([INPUT_ROOT, *earlier_ids])
            problem = f"{ref.tag} names no earlier step (it can use: {known})"
        raise TemplateError(field, problem, step=step_id)


PlanSource = Plan | Sequence[Any] | Mapping[str, Any] | str | os.PathLike[str]


def load_plan(source: PlanSource) -> Plan:
    """A checked :class:`Plan` from a ``Plan``, parsed data, YAML text, or a path to a YAML file.

    A ``str`` is YAML text; pass a :class:`pathlib.Path` to read a file.
    """
    if isinstance(source, Plan):
        return source
    if isinstance(source, os.PathLike):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidPlanError("plan", f"cannot read {str(path)!r}: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise InvalidPlanError("plan", f"{str(path)!r} is not UTF-8 text (byte {error.start})") from None
        return Plan.from_data(_parse_yaml(text, f"{str(path)!r} is not valid YAML"))
    if isinstance(source, str):
        return Plan.from_data(_parse_yaml(source, "not valid YAML"))
    return Plan.from_data(source)


def _parse_yaml(text: str, what_is_wrong: str) -> Any:
    try:
        return load_yaml(text, what_is_wrong=what_is_wrong)
    except YamlProblem as problem:
        raise InvalidPlanError("plan", problem.problem) from None
