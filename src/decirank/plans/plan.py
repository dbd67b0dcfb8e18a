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

import yaml

from .._jsonpath import MAX_NESTING
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


#: The most nodes a plan may hold once its aliases are expanded. Aliases share what they name,
#: so a kilobyte of them can stand for billions of nodes, which anything that walks the plan
#: (checks, templates, JSON) would visit one by one.
MAX_EXPANDED_NODES = 100_000


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """How many nodes ``root`` holds with every alias expanded, and how deep they nest (capped
    just past the limits: a node that holds itself is over them)."""
    sizes: dict[int, tuple[int, int]] = {}
    over = (MAX_EXPANDED_NODES + 1, MAX_NESTING + 1)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = (1, 0)
            continue
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
        if children_done:
            measured = [sizes.get(id(child), over) for child in children]
            total = 1 + sum(size for size, _ in measured)
            depth = 1 + max((depth for _, depth in measured), default=0)
            sizes[id(node)] = (min(total, over[0]), min(depth, over[1]))
            continue
        if id(node) in sizes:
            continue
        sizes[id(node)] = over  # until measured: a node met again inside itself is over every limit
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _parse_yaml(text: str, what_is_wrong: str) -> Any:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        size, depth = _expanded_size(root)
        if size > MAX_EXPANDED_NODES:
            raise InvalidPlanError(
                "plan", f"expected at most {MAX_EXPANDED_NODES} values with its aliases expanded; it holds more"
            )
        if depth > MAX_NESTING:
            raise InvalidPlanError("plan", f"expected at most {MAX_NESTING} levels of nesting; it nests deeper")
        return loader.construct_document(root)
    except yaml.YAMLError as error:
        raise InvalidPlanError("plan", f"{what_is_wrong}{yaml_problem(error)}") from None
    except RecursionError:
        raise InvalidPlanError("plan", f"{what_is_wrong}: nested too deeply to read") from None
    finally:
        loader.dispose()


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what PyYAML found wrong, on one line: `` at line 3: found unexpected end of stream``."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    return f"{where}: {problem}"
