"""Every surface offers each tool's parameters and result fields as the tool's one definition gives them.

A parameter a surface leaves out says so, with the reason, in its definition (``Offered``); the
only other differences are the surfaces' own options, listed here with theirs. So a parameter
added to a tool and missing from a surface, or a result field a schema forgot, fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import typer

import decirank
from decirank.cli import app
from decirank.server import create_app
from decirank.tools._definition import SURFACES
from decirank.tools.registry import definitions, get_tool

DEFINITIONS = {definition.name: definition for definition in definitions()}
SRC = Path(decirank.__file__).parent

#: Options a command line adds to a tool's own parameters, and why.
CLI_OWN = {
    "as_json": "--json prints the result as JSON instead of a table",
    "input_format": "--format says how to read the items file when its name does not",
    "help": "-h/--help",
}


#: Tools whose HTTP route speaks another service's shape, so that its clients work unchanged, and what that
#: shape adds to the tool's parameters; their responses are that service's, not the tool's result.
HTTP_SHAPES = {"rerank": {"rank_fields", "max_chunks_per_doc"}}


@pytest.fixture(scope="module")
def openapi():
    return create_app("lexical").openapi()


def _resolve(document, schema):
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


@pytest.mark.parametrize("name", DEFINITIONS)
def test_python_takes_exactly_the_definitions_parameters(name):
    """The async tool, its sync twin and the client's method all take the definition's parameters."""
    definition = DEFINITIONS[name]
    expected = [parameter.name for parameter in definition.parameters]
    twin = getattr(decirank, name)
    assert list(inspect.signature(definition.function).parameters) == expected
    assert list(inspect.signature(twin).parameters) == expected
    assert list(inspect.signature(getattr(decirank.Client(), name)).parameters) == expected
    assert twin.__doc__ and definition.function.__doc__.split("\n")[0] in twin.__doc__


@pytest.mark.parametrize("name", DEFINITIONS)
def test_every_left_out_parameter_says_why(name):
    for parameter in DEFINITIONS[name].parameters:
        for surface, reason in parameter.offered.left_off.items():
            assert surface in SURFACES and len(reason) > 20, (parameter.name, surface)


@pytest.mark.parametrize("name", DEFINITIONS)
def test_mcp_offers_the_definitions_parameters_and_result(name):
    definition = DEFINITIONS[name]
    spec = get_tool(definition.tool_name)
    assert set(spec.input_schema["properties"]) == {p.name for p in definition.offered("mcp")}
    assert set(spec.output_schema["properties"]) == set(definition.result.model_fields)


@pytest.mark.parametrize("name", DEFINITIONS)
def test_http_offers_the_definitions_parameters_and_result(name, openapi):
    definition = DEFINITIONS[name]
    operation = openapi["paths"][definition.route]["post"]
    request = _resolve(openapi, operation["requestBody"]["content"]["application/json"]["schema"])
    own = HTTP_SHAPES.get(name, set())
    assert set(request["properties"]) - own == {p.name for p in definition.offered("http")}
    if name not in HTTP_SHAPES:
        response = _resolve(openapi, operation["responses"]["200"]["content"]["application/json"]["schema"])
        assert set(response["properties"]) == set(definition.result.model_fields)


@pytest.mark.parametrize("name", DEFINITIONS)
def test_the_command_line_offers_the_definitions_parameters(name):
    definition = DEFINITIONS[name]
    tool_command = typer.main.get_command(app).commands[definition.command]  # type: ignore[attr-defined]
    offered = {param.name for param in tool_command.params} - set(CLI_OWN)
    assert offered == {p.name for p in definition.offered("cli")}


@pytest.mark.parametrize("name", ["rank", "rerank", "filter", "classify", "score"])
def test_a_real_result_has_exactly_the_fields_of_the_result_model(name):
    """to_dict() of a real call (the lexical model) gives the result model's fields, and validates against it."""
    definition = DEFINITIONS[name]
    calls = {
        "rank": lambda: decirank.rank(["a cat", "a car"], "Which purrs?", model="lexical"),
        "rerank": lambda: decirank.rerank("cat", ["a cat", "a car"], model="lexical"),
        "filter": lambda: decirank.filter(["a cat", "a car"], "Is it a pet?", model="lexical"),
        "classify": lambda: decirank.classify(["a cat"], "Which?", ["pet", "vehicle"], model="lexical"),
        "score": lambda: decirank.score(["a cat"], "Is it a pet?", model="lexical"),
    }
    data = calls[name]().to_dict()
    assert set(data) == set(definition.result.model_fields)
    definition.result.model_validate(data)


def test_no_tool_or_surface_imports_a_backends_private_module():
    """Tools and surfaces ask a backend what it can do; none reaches into backends/local/_*.py or the like."""
    private = re.compile(r"(from|import)\s+[.\w]*backends(\.\w+)*\._\w+")
    offenders = []
    for folder in ("tools", "cli", "server", "mcp", "plans"):
        for path in (SRC / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if private.search(line) or re.search(r"provider\s*==\s*['\"]local['\"]", line):
                    offenders.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert offenders == []
