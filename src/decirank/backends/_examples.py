"""Labelled examples as text, for the hosted formats, which have no field for them.

A hosted decision model reads a question's instructions, so a question's
examples are appended to them in one deterministic block::

    <instructions>

    Labelled examples:
    - <state as compact JSON> -> <answer as JSON>
    - ...

Each example is one line: the state as compact canonical JSON (sorted keys,
no spaces, unicode kept, so a string is quoted and its newlines escaped) and
the answer as JSON (``true``/``false`` for a yes/no question, the option key
as a JSON string for a choice), in the question's own order.

Because the block is exact, a server can read it back:
:func:`split_examples_block` lifts a well-formed trailing block out of the
instructions again (``decirank serve`` does, so a question sent by one
decirank to another keeps its examples as examples).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from .._jsonpath import canonical_json
from ..errors import InvalidInputError
from ..types.questions import Example

__all__ = [
    "EXAMPLES_HEADING",
    "decode_with_examples",
    "examples_block",
    "lift_examples",
    "split_examples_block",
    "with_examples",
]

Q = TypeVar("Q")

EXAMPLES_HEADING = "Labelled examples:"
_SEPARATOR = f"\n\n{EXAMPLES_HEADING}\n"
_ARROW = " -> "
_DECODER = json.JSONDecoder()


def examples_block(examples: tuple[Example, ...]) -> str:
    """The block appended to instructions for ``examples``; empty for none."""
    if not examples:
        return ""
    lines = [f"- {canonical_json(example.state)}{_ARROW}{canonical_json(example.answer)}" for example in examples]
    return _SEPARATOR + "\n".join(lines)


def with_examples(instructions: str, examples: tuple[Example, ...]) -> str:
    """``instructions`` followed by the block of ``examples`` (unchanged without examples)."""
    return instructions + examples_block(examples)


def _parse_line(line: str) -> Example | None:
    if not line.startswith("- "):
        return None
    try:
        state, end = _DECODER.raw_decode(line, 2)
    except ValueError:
        return None
    if not line.startswith(_ARROW, end):
        return None
    try:
        answer: Any = json.loads(line[end + len(_ARROW) :])
    except ValueError:
        return None
    if not isinstance(answer, bool | str):
        return None
    return Example(state, answer)


def split_examples_block(instructions: str) -> tuple[str, list[dict[str, Any]] | None]:
    """``(instructions without the block, its examples)`` when they end in a well-formed block.

    Anything else, including a block with one line that does not parse, is left as it is:
    ``(instructions, None)``.
    """
    at = instructions.rfind(_SEPARATOR)
    if at < 0:
        return instructions, None
    examples = []
    for line in instructions[at + len(_SEPARATOR) :].split("\n"):
        example = _parse_line(line)
        if example is None:
            return instructions, None
        examples.append(example.to_dict())
    return instructions[:at], examples or None


def decode_with_examples(instructions: Any, examples: Any, build: Callable[[Any, Any], Q]) -> Q:
    """A decoded wire question: ``build(instructions, examples)`` with the wire's own examples
    list if it has one, else a well-formed block ending its instructions lifted into examples."""
    if examples is None and isinstance(instructions, str):
        return lift_examples(instructions, build)
    return build(instructions, examples)


def lift_examples(instructions: str, build: Callable[[str, list[dict[str, Any]] | None], Q]) -> Q:
    """``build(instructions, examples)`` with a trailing block lifted into examples when it fits the question.

    A block whose answers the question refuses (a key that is not an option, say) was not
    written as examples for it: the question is built from the instructions as they are.
    """
    plain, examples = split_examples_block(instructions)
    if examples is not None:
        try:
            return build(plain, examples)
        except InvalidInputError as error:
            if not error.field.startswith("question.examples"):
                raise
    return build(instructions, None)
