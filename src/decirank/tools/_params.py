"""The parameter types the tools share, each with its JSON shape and help written once.

A tool's signature uses these (see :mod:`decirank.tools._definition`), so
``model``, ``timeout``, ``calibration``, ``examples``, ... read and check the
same way on every tool and every surface. Bounds live inside the types, so a
union with None keeps them in the JSON schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from ..stores.calibrations import Calibration
from ._definition import Cli, Offered, Wire

__all__ = [
    "ChoiceExamples",
    "ItemExamples",
    "LikelihoodExamples",
    "ApiKey",
    "BaseUrl",
    "CalibrationParam",
    "FromOne",
    "FromZero",
    "ModelParam",
    "NON_BLANK",
    "OpenUnit",
    "SetName",
    "ShowProgress",
    "Text",
    "TextsParam",
    "Timeout",
    "Unit",
    "Whole",
    "examples_param",
]

#: A character other than those Python's ``str.strip()`` removes: text the tools refuse as blank has none.
NON_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
#: Text that must not be blank. The tools refuse blank text themselves, naming the field; the
#: schema says so too, so that a client generated from it never sends what the tools refuse.
Text = Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": NON_BLANK})]


def _whole_number(value: Any) -> Any:
    """A float with no fractional part as the integer it is: JSON Schema's ``integer`` includes ``2.0``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer: strict where a server asks for strict (no ``true``, no ``"5"``), but ``5.0`` is the integer 5.
Whole = Annotated[int, BeforeValidator(_whole_number)]
FromZero = Annotated[int, Field(ge=0), BeforeValidator(_whole_number)]
FromOne = Annotated[int, Field(ge=1), BeforeValidator(_whole_number)]
#: A probability threshold (0 to 1), and a level strictly between 0 and 1 (a target, a confidence).
Unit = Annotated[float, Field(ge=0, le=1)]
OpenUnit = Annotated[float, Field(gt=0, lt=1)]
#: A stored set's or calibration's name: not blank.
SetName = Annotated[str, Field(json_schema_extra={"minLength": 1, "pattern": NON_BLANK})]

#: Any iterable on the Python side (a list, a tuple, a generator, a numpy array, a pandas Series); a list in JSON.
ItemList = Annotated[Iterable[Any], Wire(list[Any])]

ModelParam = Annotated[
    str | None,
    Field(description="A role (decider) or a provider:model name; default: the decider role."),
    Cli(flags=("--model", "-m")),
]
Timeout = Annotated[
    float | None,
    Field(gt=0, description="Time budget in seconds for the whole call."),
    Offered.not_on(mcp="an agent's call runs under the MCP server's own budget"),
]
BaseUrl = Annotated[
    str | None,
    Field(description="Base URL for an HTTP backend, e.g. http://127.0.0.1:8000."),
    Offered.not_on(
        http="a server never lets a client point it at another server",
        mcp="an agent never points the server at another server",
    ),
    Cli(read="base_url"),
]
ApiKey = Annotated[
    str | None,
    Field(description="The key of a hosted model (else its environment variable or stored key)."),
    Offered.not_on(
        http="a server answers with its own keys",
        mcp="an agent never hands the server a key",
        cli="a key on a command line is seen by every process: the environment or decirank keys give it",
    ),
]
ShowProgress = Annotated[
    bool,
    Field(description="Draw a bar on stderr, when it is a terminal, as the model calls finish."),
    Offered.python_only("the command line draws one on a terminal by itself; a server or agent has no terminal"),
]
CalibrationParam = Annotated[
    str | Calibration | None,
    Wire(SetName | None),
    Field(
        description="The name of a stored calibration (calibrate) fitted for this tool, question and model: the "
        "probabilities are then the calibrated ones."
    ),
    Cli(metavar="NAME"),
]
ConfidenceParam = Annotated[
    OpenUnit | None, Field(description="How sure a target's promise is; default 0.9.")
]
DescribeParam = Annotated[
    Text | None,
    Field(description="Dot path into each item to show, e.g. title or meta.date (the whole item otherwise)."),
    Cli(flags=("--describe", "-d")),
]
StateParam = Annotated[
    Any,
    Field(description='The context the items are judged against, e.g. {"question": "..."}; optional.'),
    Cli(flags=("--state", "-s"), read="json_or_text"),
]


TextsParam = Annotated[
    ItemList,
    Field(description="The texts, each asked about on its own (anything but a string is shown as JSON)."),
    Cli(argument=True, read="items", metavar="TEXTS"),
]


def examples_param(answer: str, what: str = "texts") -> Any:
    """``examples``: labelled texts (or items) whose answer is ``answer``, or a stored set's name."""
    return Annotated[
        Sequence[Any] | str | None,
        Wire(list[Mapping[str, Any]] | SetName | None),
        Field(
            description=f'Labelled {what} that teach the question: [{{"item": ..., "answer": {answer}}}] or '
            f'[{{"state": <text>, "answer": {answer}}}], or the name of a stored example set.'
        ),
        Cli(metavar="FILE|NAME", read="examples"),
    ]


#: score's and filter's examples answer true or false; classify's an option key.
LikelihoodExamples = examples_param("true|false")
ItemExamples = examples_param("true|false", "items")
ChoiceExamples = examples_param('"<option key>"')
