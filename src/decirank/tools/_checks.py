"""Argument checks shared by the tools: each names the field and what it expects.

Text must be encodable as UTF-8: a string holding a lone surrogate (which
Python allows, and JSON parsers produce from ``"\ud800"``) can be neither
sent to a model, nor logged, nor answered over HTTP, so it is refused here,
naming where it is, before any work starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError
from ..stores.examples import resolve_examples
from ..types.questions import Example

__all__ = [
    "check_count",
    "check_encodable",
    "check_instructions",
    "check_items",
    "check_optional_text",
    "check_probability_threshold",
    "check_top_k",
]


def _unencodable(text: str) -> str | None:
    """The first character of ``text`` that UTF-8 cannot encode (a lone surrogate), escaped; None if none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return text[error.start : error.end].encode("utf-8", "backslashreplace").decode("ascii")
    return None


def check_encodable(value: Any, field: str) -> Any:
    """``value`` as it is, after checking that every string in it (keys too) is encodable as UTF-8.

    Lists, tuples and dicts are walked; the error names the path, e.g. ``items.3.title``.
    """
    stack: list[tuple[str, Any]] = [(field, value)]
    seen: set[int] = set()
    while stack:
        path, current = stack.pop()
        if isinstance(current, str):
            bad = _unencodable(current)
            if bad is not None:
                raise InvalidInputError(
                    path, "text encodable as UTF-8", detail=f"it holds the lone surrogate {bad}"
                )
        elif isinstance(current, dict | list | tuple):
            if id(current) in seen:  # a structure that holds itself is walked once
                continue
            seen.add(id(current))
            if isinstance(current, dict):
                children = []
                for key, item in current.items():
                    if isinstance(key, str) and (bad := _unencodable(key)) is not None:
                        raise InvalidInputError(
                            path, "keys encodable as UTF-8", detail=f"a key holds the lone surrogate {bad}"
                        )
                    children.append((f"{path}.{key}", item))
            else:
                children = [(f"{path}.{index}", item) for index, item in enumerate(current)]
            stack.extend(reversed(children))
    return value


def check_items(items: Any, field: str = "items") -> list[Any]:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidInputError(field, "a list", got=items)
    return check_encodable(list(items), field)


def check_instructions(value: Any, field: str = "instructions") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, "a non-empty string", got=value)
    return check_encodable(value, field)


def check_optional_text(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, "a non-empty string or nothing", got=value)
    return check_encodable(value, field)


def check_count(value: Any, field: str, *, lowest: int = 1) -> int:
    """An integer of at least ``lowest``; ``True`` is not a count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise InvalidInputError(field, f"an integer of at least {lowest}", got=value)
    return value


def check_top_k(value: Any, *, allow_zero: bool, field: str = "top_k") -> int | None:
    """``None`` keeps everything; with ``allow_zero``, 0 does too."""
    if value is None:
        return None
    return check_count(value, field, lowest=0 if allow_zero else 1) or None


def check_probability_threshold(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(field, "a number from 0 to 1", got=value)
    return float(value)


def check_examples(
    examples: Any,
    field: str,
    *,
    answer_ok: Callable[[Any], bool],
    expected_answer: str,
    item_text: Callable[[Any, str], str] | None = None,
) -> tuple[Example, ...]:
    """A tool's labelled examples as :class:`Example` values; a string is a stored set's name.

    Each example is an ``Example`` or ``{"state": <text>, "answer": ...}``; where ``item_text``
    is given (the filter tool), ``{"item": <item>, "answer": ...}`` too, the item shown by it.
    Errors name the example and its part (``examples.3.answer``).
    """
    examples = resolve_examples(examples, field)
    if examples is None:
        return ()
    shapes = '{"item" or "state", "answer"}' if item_text else '{"state", "answer"}'
    if isinstance(examples, str | bytes | Mapping) or not isinstance(examples, Sequence):
        raise InvalidInputError(field, f"a list of {shapes} or a stored example set's name", got=examples)
    checked = []
    for index, example in enumerate(examples):
        where = f"{field}.{index}"
        if isinstance(example, Example):
            state, answer = example.state, example.answer
        elif isinstance(example, Mapping) and set(example) == {"state", "answer"}:
            state, answer = example["state"], example["answer"]
        elif item_text is not None and isinstance(example, Mapping) and set(example) == {"item", "answer"}:
            state, answer = item_text(example["item"], f"{where}.item"), example["answer"]
        else:
            got = sorted(map(str, example)) if isinstance(example, Mapping) else example
            raise InvalidInputError(where, f"an object {shapes}", got=got)
        if not answer_ok(answer):
            raise InvalidInputError(f"{where}.answer", expected_answer, got=answer)
        checked.append(Example(check_encodable(state, f"{where}.state"), answer))
    return tuple(checked)
