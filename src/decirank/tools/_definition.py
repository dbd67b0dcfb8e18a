"""One definition of each tool, from which every surface is made.

A tool is its async function. Each parameter's name, Python type and default
are the function's own; its help text and bounds are a pydantic ``Field`` in
its annotation; where its JSON type is narrower than its Python one (a stored
calibration's name for a :class:`~decirank.stores.calibrations.Calibration`),
where it is offered (``Offered``), how the command line reads it (``Cli``)
and which parameter it is another name of (``AliasOf``) are small markers beside the Field:

    min_confidence: Annotated[float | None, Field(ge=0, le=1, description="Keep items ...")] = None

:class:`ToolDefinition` reads that signature once. From it come the request
models of the HTTP server, the MCP input schema that plans check too, the
command line's options, the sync twin's signature and the list of
parameters the drift test compares every surface with; the tool's result
model (pydantic) gives the MCP output schema and the HTTP response model.
So a new parameter is one edit to the function, plus what it does.
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, ParamSpec, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.fields import FieldInfo

from .._sync import run_sync

__all__ = [
    "AliasOf",
    "Cli",
    "Offered",
    "Parameter",
    "SURFACES",
    "Surface",
    "ToolDefinition",
    "Wire",
    "plain_type",
    "sync_twin_of",
]

#: The surfaces a tool is offered on. Plans check their steps against the MCP schema, so they are "mcp" here.
Surface = Literal["python", "http", "mcp", "cli"]
SURFACES: tuple[Surface, ...] = ("python", "http", "mcp", "cli")


@dataclass(frozen=True)
class Offered:
    """The surfaces a parameter is left off, each with the reason (the drift test reads them here)."""

    left_off: Mapping[str, str]

    @classmethod
    def python_only(cls, reason: str) -> Offered:
        return cls({"http": reason, "mcp": reason, "cli": reason})

    @classmethod
    def not_on(cls, **reasons: str) -> Offered:
        unknown = set(reasons) - set(SURFACES)
        assert not unknown, f"no such surface: {unknown}"
        return cls(reasons)


@dataclass(frozen=True)
class Wire:
    """The parameter's type in JSON, where the Python type is wider (an object, any iterable)."""

    annotation: Any


@dataclass(frozen=True)
class Cli:
    """How the command line offers a parameter.

    ``flags`` replace the default ``--name-with-dashes``; ``argument`` makes it the command's
    positional argument; ``read`` names how the command line turns the option's text into the
    value (``items``: a file of items; ``json_or_text``; ``examples``; ``options``; ``base_url``),
    which the CLI layer implements, as tools know nothing of files and terminals.
    """

    flags: tuple[str, ...] = ()
    argument: bool = False
    metavar: str | None = None
    read: str | None = None


@dataclass(frozen=True)
class AliasOf:
    """Marks a parameter as another name of ``name``, as other libraries call it (``top_n`` for ``top_k``).

    It is a parameter of its own on every surface, so a caller's habit works everywhere; the tool
    takes whichever is given (:func:`~decirank.tools._checks.either`) and refuses both.
    """

    name: str


@dataclass(frozen=True)
class Parameter:
    """One parameter of a tool, as its definition gives it."""

    name: str
    #: The Python annotation, without its markers and Field.
    annotation: Any
    default: Any
    required: bool
    keyword_only: bool
    field: FieldInfo
    wire: Any
    offered: Offered
    cli: Cli
    #: The parameter this one is another name of, or None.
    alias_of: str | None = None

    @property
    def help(self) -> str:
        return self.field.description or ""

    def offered_on(self, surface: str) -> bool:
        return surface not in self.offered.left_off

    def field_info(self) -> FieldInfo:
        """The pydantic field of a request model: the Field's bounds and help, the signature's default."""
        default = ... if self.required else self.default
        return FieldInfo.merge_field_infos(self.field, default=default)


def _split_annotation(annotation: Any) -> tuple[Any, FieldInfo, dict[type, Any]]:
    """A parameter's type, its Field (help, bounds) and its markers, from ``Annotated[type, Field, markers...]``."""
    markers: dict[type, Any] = {}
    fields: list[FieldInfo] = []
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        kept = []
        for item in metadata:
            if isinstance(item, Offered | Wire | Cli | AliasOf):
                markers[type(item)] = item
            elif isinstance(item, FieldInfo):
                fields.append(item)
            else:
                kept.append(item)
        # Annotated metadata that is neither ours nor a Field (a validator, a constraint) stays on the type.
        annotation = Annotated[(base, *kept)] if kept else base  # type: ignore[misc]
    return annotation, FieldInfo.merge_field_infos(*fields) if fields else FieldInfo(), markers


class ToolDefinition:
    """A tool read from its async function's signature; see the module's docstring.

    ``name`` is the tool's own (``filter``), ``tool_name`` the one agents and plans call it
    (``builtin__filter``); ``title`` and ``description`` are written for agents.
    """

    def __init__(
        self,
        function: Callable[..., Awaitable[Any]],
        *,
        name: str,
        title: str,
        description: str,
        result: type[BaseModel],
        read_only: bool = True,
        destructive: bool = False,
        command: str,
        route: str,
    ) -> None:
        self.function = function
        self.name = name
        self.tool_name = f"builtin__{name}"
        self.title = title
        self.description = description
        self.result = result
        self.read_only = read_only
        self.destructive = destructive
        #: The command and the HTTP path that offer it.
        self.command = command
        self.route = route
        self.parameters = _parameters(function)
        # help() and IDEs show the plain Python types, not the markers that make the surfaces.
        function.__signature__ = inspect.signature(function).replace(  # type: ignore[attr-defined]
            parameters=[
                inspect.Parameter(
                    parameter.name,
                    inspect.Parameter.KEYWORD_ONLY if parameter.keyword_only else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=inspect.Parameter.empty if parameter.required else parameter.default,
                    annotation=plain_type(parameter.annotation),
                )
                for parameter in self.parameters
            ],
            return_annotation=typing.get_type_hints(function).get("return", inspect.Signature.empty),
        )
        self._models: dict[tuple[str, str], type[BaseModel]] = {}

    def __repr__(self) -> str:
        return f"ToolDefinition({self.name!r})"

    def offered(self, surface: str) -> list[Parameter]:
        return [parameter for parameter in self.parameters if parameter.offered_on(surface)]

    def parameter(self, name: str) -> Parameter:
        return next(parameter for parameter in self.parameters if parameter.name == name)

    # --- JSON surfaces ----------------------------------------------------------------------

    def request_model(self, surface: str, *, base: type[BaseModel] | None = None, name: str | None = None) -> type[BaseModel]:
        """The parameters offered on ``surface`` as a pydantic model (``base`` sets its config, e.g. strict).

        An alias is a field of its own, as it is a parameter of its own.
        """
        key = (surface, (base or _Arguments).__name__)
        if key in self._models:
            return self._models[key]
        fields = {parameter.name: (parameter.wire, parameter.field_info()) for parameter in self.offered(surface)}
        model_name = name or f"{_camel(self.name)}{'Arguments' if surface == 'mcp' else 'Request'}"
        model = create_model(  # type: ignore[call-overload]
            model_name, __base__=base or _Arguments, __doc__=f"The input of {self.tool_name}.", **fields
        )
        self._models[key] = model
        return model

    def input_schema(self) -> dict[str, Any]:
        """The MCP input schema: a closed object of the parameters offered there."""
        schema = self.request_model("mcp").model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        schema["additionalProperties"] = False
        schema.setdefault("required", [])
        return _self_contained(schema)

    def output_schema(self) -> dict[str, Any]:
        schema = self.result.model_json_schema()
        schema.pop("title", None)
        return _self_contained(schema)

    async def run(self, arguments: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
        """The tool on checked arguments (by name) plus what the surface fixes (``allow_exec``); its JSON result."""
        result = await self.function(**arguments, **fixed)
        return result.to_dict()


class _Arguments(BaseModel):
    """Arguments as MCP and plans send them: anything the schema allows; the tools check the meaning."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def plain_type(annotation: Any) -> Any:
    """A type without its Annotated metadata (bounds, validators), as a reader of a signature wants it."""
    if get_origin(annotation) is Annotated:
        return plain_type(get_args(annotation)[0])
    args = get_args(annotation)
    if args and get_origin(annotation) in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, [plain_type(arg) for arg in args])
    return annotation


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _self_contained(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its ``$defs`` written in place and without pydantic's ``title`` keys.

    Agents read a tool's schema as one document: a nested object is easier to follow where it
    is used than behind a reference, and a title only repeats the property's name. The result
    models hold no recursive types, so writing references in place ends.
    """
    definitions = schema.pop("$defs", {})

    def resolved(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = resolved(definitions[node["$ref"].rsplit("/", 1)[-1]])
                return {**target, **{key: resolved(value) for key, value in node.items() if key != "$ref"}}
            return {
                key: resolved(value) for key, value in node.items() if not (key == "title" and isinstance(value, str))
            }
        if isinstance(node, list):
            return [resolved(value) for value in node]
        return node

    return resolved(schema)


def _parameters(function: Callable[..., Any]) -> tuple[Parameter, ...]:
    hints = typing.get_type_hints(function, include_extras=True)
    parameters = []
    for parameter in inspect.signature(function).parameters.values():
        annotation, found_field, markers = _split_annotation(hints[parameter.name])
        required = parameter.default is inspect.Parameter.empty
        wire = markers.get(Wire)
        parameters.append(
            Parameter(
                name=parameter.name,
                annotation=annotation,
                default=None if required else parameter.default,
                required=required,
                keyword_only=parameter.kind is inspect.Parameter.KEYWORD_ONLY,
                field=found_field,
                wire=annotation if wire is None else wire.annotation,
                offered=markers.get(Offered, Offered({})),
                cli=markers.get(Cli, Cli()),
                alias_of=markers[AliasOf].name if AliasOf in markers else None,
            )
        )
    return tuple(parameters)


P = ParamSpec("P")
T = TypeVar("T")


def sync_twin_of(coroutine_function: Callable[P, Coroutine[Any, Any, T]], name: str) -> Callable[P, T]:
    """The sync twin of a tool: the same signature and documentation, run on decirank's background loop.

    Written once here, so a tool's parameters are never repeated in its twin.
    """

    @functools.wraps(coroutine_function)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(coroutine_function, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = name
    twin.__doc__ = "\n\n".join(
        [
            inspect.cleandoc(coroutine_function.__doc__ or ""),
            f"Sync twin of :func:`{coroutine_function.__name__}`, which takes the same arguments; use that one "
            "in async code.",
        ]
    )
    return twin
