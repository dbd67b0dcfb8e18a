"""The tools by their agent-facing names (``builtin__rank``, ...), with their schemas.

This is the one list of tools that the MCP server, the plan runner and the
HTTP server serve. Each tool's name, JSON schemas and the way its JSON
arguments become a Python call are read off its definition
(:mod:`decirank.tools._definition`), so nothing here is written per tool.

Arguments arrive as JSON objects: :func:`call_tool` refuses names a tool does
not take and missing required ones, each naming the field, and leaves every
other check to the tool itself, whose errors name the field too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._jsonpath import first_unfit
from ..errors import InvalidInputError
from ._definition import ToolDefinition
from .calibrate import CALIBRATE
from .classify import CLASSIFY
from .filter import FILTER
from .rank import RANK
from .rerank import RERANK
from .score import SCORE
from .score_list import SCORE_LIST

__all__ = ["ToolSpec", "call_tool", "check_arguments", "definitions", "get_tool", "tool_specs"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as agents and plans see it: its name, schemas and hints, all read off its definition."""

    definition: ToolDefinition

    @property
    def name(self) -> str:
        return self.definition.tool_name

    @property
    def title(self) -> str:
        return self.definition.title

    @property
    def description(self) -> str:
        return self.definition.description

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.definition.input_schema()

    @property
    def output_schema(self) -> dict[str, Any]:
        return self.definition.output_schema()

    @property
    def read_only(self) -> bool:
        """False when calling the tool changes stored state (score_list stamps refs)."""
        return self.definition.read_only

    @property
    def destructive(self) -> bool:
        """True when a call may replace what is stored (calibrate overwrites a calibration of its name)."""
        return self.definition.destructive

    @property
    def required(self) -> list[str]:
        return list(self.input_schema.get("required", []))

    @property
    def fields(self) -> list[str]:
        return list(self.input_schema["properties"])

    async def run(self, arguments: dict[str, Any], *, allow_exec: bool) -> dict[str, Any]:
        """The tool on checked JSON arguments; ``allow_exec`` is whether ``exec:`` evaluators may run.

        A null for a parameter whose default is not null (``model``, ``top_k`` of score_list) is
        that default, as JSON clients send null for "not given".
        """
        parameters = {parameter.name: parameter for parameter in self.definition.parameters}
        given = {
            name: value
            for name, value in arguments.items()
            if not (value is None and parameters[name].default is not None)
        }
        fixed = {"allow_exec": allow_exec} if "allow_exec" in parameters else {}
        return await self.definition.run(given, **fixed)


#: Every tool's definition, in the order the surfaces list them.
DEFINITIONS: tuple[ToolDefinition, ...] = (RANK, RERANK, FILTER, CLASSIFY, SCORE, CALIBRATE, SCORE_LIST)
_TOOLS: dict[str, ToolSpec] = {definition.tool_name: ToolSpec(definition) for definition in DEFINITIONS}


def definitions() -> tuple[ToolDefinition, ...]:
    return DEFINITIONS


def tool_specs() -> list[ToolSpec]:
    return list(_TOOLS.values())


def get_tool(name: Any, field: str = "tool_name") -> ToolSpec:
    spec = _TOOLS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InvalidInputError(field, f"one of {', '.join(_TOOLS)}", got=name)
    return spec


def check_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any]:
    """The arguments as a dict, refusing unknown and missing fields by name, and values JSON cannot carry
    (NaN, Infinity, a lone surrogate, nesting deeper than :data:`~decirank._jsonpath.MAX_NESTING`)."""
    if not isinstance(arguments, dict):
        raise InvalidInputError("arguments", f"an object with {spec.name}'s inputs", got=arguments)
    # Arguments come as JSON (MCP, plans), whose readers take NaN and Infinity: refused here, as over HTTP.
    unfit = first_unfit(arguments)
    if unfit is not None:
        raise InvalidInputError(unfit.dotted(), unfit.expected, detail=unfit.problem)
    for name in arguments:
        if name not in spec.input_schema["properties"]:
            raise InvalidInputError(
                name, f"one of {spec.name}'s inputs: {', '.join(spec.fields)}", detail="unknown input"
            )
    for name in spec.required:
        if name not in arguments:
            raise InvalidInputError(name, "a value", detail=f"{spec.name} requires it")
    return arguments


async def call_tool(
    name: str, arguments: Any, *, name_field: str = "tool_name", allow_exec: bool = True
) -> dict[str, Any]:
    """Run tool ``name`` on JSON ``arguments``; its errors are decirank's typed errors.

    ``name_field`` is what the caller calls the tool's name, for the error when it is unknown.
    ``allow_exec=False`` refuses score_list's ``exec:`` evaluators (shell commands): the
    servers pass it unless their operator allows them.
    """
    spec = get_tool(name, name_field)
    return await spec.run(check_arguments(spec, arguments), allow_exec=allow_exec)
