"""Argument checks shared by the tools: each names the field and what it expects.

Inputs must be what JSON text can carry: a string holding a lone surrogate
(which Python allows, and JSON parsers produce from ``"\ud800"``), a key that
is not a string, or containers nested deeper than :data:`MAX_NESTING` can be
neither sent to a model, nor logged, nor answered over HTTP, so they are
refused here, naming where they are, before any work starts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._jsonpath import MISSING, first_unfit, resolve_dot_path, to_text
from ..errors import InvalidInputError
from ..stores.examples import resolve_examples
from ..types.questions import Example

__all__ = [
    "MAX_ITEMS",
    "check_count",
    "check_encodable",
    "check_instructions",
    "check_items",
    "check_no_blank",
    "check_optional_text",
    "check_probability_threshold",
    "check_state",
    "check_top_k",
    "either",
    "shown_texts",
]


def check_encodable(value: Any, field: str) -> Any:
    """``value`` as it is, once sure JSON text can carry it: every string (keys too) encodable as UTF-8,
    every key a string, and containers nested at most :data:`MAX_NESTING` deep.

    The error names the path, e.g. ``items.3.title``. Floats are not checked: a Python caller's NaN
    is its own affair, and is written as such.
    """
    found = first_unfit(value, finite=False)
    if found is not None:
        raise InvalidInputError(found.dotted(field), found.expected, detail=found.problem)
    return value


#: The most items (texts, documents) one tool call takes. Past it, a request's parse, checks and answer would
#: hold a server for seconds and its default time budget would run to minutes: more goes through several
#: calls, or ``decirank batch``.
MAX_ITEMS = 10_000


def at_most_max_items(items: Any, field: str) -> list[Any]:
    """``items`` as a list, refused without reading further once past :data:`MAX_ITEMS`."""
    count = len(items) if isinstance(items, Sequence) else None
    if count is None:
        taken = list(itertools.islice(items, MAX_ITEMS + 1))
        count = len(taken) if len(taken) <= MAX_ITEMS else None
    if count is None or count > MAX_ITEMS:
        given = f"{count} were given" if count is not None else "more were given"
        raise InvalidInputError(
            field,
            f"at most {MAX_ITEMS} items in one call",
            detail=f"{given}; send the rest in further calls, or a file to decirank batch",
        )
    return taken if not isinstance(items, Sequence) else list(items)


def check_state(state: Any) -> Any:
    """The context questions are asked in; none given is the empty context, as ``decirank batch`` sends it."""
    return {} if state is None else check_encodable(state, "state")


def check_items(items: Any, field: str = "items") -> list[Any]:
    """Any iterable of items as a list: a list, a tuple, a generator, ``dict.values()``, a numpy array or a
    pandas Series (their ``tolist()`` gives Python values, which JSON carries; no numpy is imported).

    A string, bytes or a mapping is refused: iterating them would give characters or keys, never
    what the caller meant.
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInputError(field, "a list", got=items)
    tolist = getattr(items, "tolist", None)
    if callable(tolist) and not isinstance(items, list):
        # numpy arrays and pandas Series: their elements are numpy scalars, their tolist() Python ones.
        items = tolist()
    return check_encodable(at_most_max_items(items, field), field)


def shown_texts(items: Sequence[Any], describe: str | None, field: str) -> list[str]:
    """What a model reads of each item: its ``describe`` dot path (a CSV column, ``meta.body``), else the
    whole item; a string as it is, anything else as canonical JSON. A missing path names the item."""
    texts = []
    for index, item in enumerate(items):
        value = item if describe is None else resolve_dot_path(item, describe)
        if value is MISSING:
            raise InvalidInputError(f"{field}.{index}", f"an item with the describe path {describe!r}", got=item)
        texts.append(to_text(value))
    return texts


def either(value: Any, alias_value: Any, name: str, alias: str) -> Any:
    """A parameter given under its own name or another (``top_k`` or ``top_n``); both given is an error."""
    if value is not None and alias_value is not None:
        raise InvalidInputError(alias, f"either {alias} or {name}, not both", got=alias_value)
    return alias_value if value is None else value


def check_no_blank(texts: Sequence[str], field: str) -> Sequence[str]:
    """``texts`` as they are, once sure none is blank; the error names the first blank one (``texts.3``).

    A blank text gives a model nothing to judge: some models refuse it and
    others answer it, and a probability for nothing would be an invented one.
    So every tool refuses it here, before any model is asked, on every model.
    """
    for index, text in enumerate(texts):
        if not text.strip():
            raise InvalidInputError(f"{field}.{index}", "a text that is not blank", got=text)
    return texts


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


def check_count(value: Any, field: str, *, lowest: int = 1, highest: int | None = None) -> int:
    """An integer of at least ``lowest`` (and at most ``highest``); ``True`` is not a count.

    A float with no fractional part (``2.0``) is the integer it is: JSON
    Schema's ``integer``, which the tools' schemas declare, includes it.
    """
    expected = f"an integer of at least {lowest}" if highest is None else f"an integer from {lowest} to {highest}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise InvalidInputError(field, expected, got=value)
    if highest is not None and value > highest:
        raise InvalidInputError(field, expected, got=value)
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

    Every tool takes the one format ``decirank examples add`` stores: an ``Example``,
    ``{"state": <text>, "answer": ...}`` or ``{"item": <item>, "answer": ...}``, the item shown
    by ``item_text`` (the filter tool's describe path) or else as the tools show a text (a string
    as it is, anything else as canonical JSON). Errors name the example and its part
    (``examples.3.answer``), and an object of other keys says which keys it has.
    """
    examples = resolve_examples(examples, field)
    if examples is None:
        return ()
    shapes = '{"item" or "state", "answer"}'
    if isinstance(examples, str | bytes | Mapping) or not isinstance(examples, Sequence):
        raise InvalidInputError(field, f"a list of {shapes} or a stored example set's name", got=examples)
    checked = []
    for index, example in enumerate(examples):
        where = f"{field}.{index}"
        if isinstance(example, Example):
            state, answer = example.state, example.answer
        elif isinstance(example, Mapping) and set(example) == {"state", "answer"}:
            state, answer = example["state"], example["answer"]
        elif isinstance(example, Mapping) and set(example) == {"item", "answer"}:
            item = example["item"]
            state, answer = (item_text(item, f"{where}.item") if item_text else to_text(item)), example["answer"]
        elif isinstance(example, Mapping):
            keys = ", ".join(repr(str(key)) for key in example) or "none"
            raise InvalidInputError(where, f"an object {shapes}", detail=f"it is an object with the keys {keys}")
        else:
            raise InvalidInputError(where, f"an object {shapes}", got=example)
        if not answer_ok(answer):
            raise InvalidInputError(f"{where}.answer", expected_answer, got=answer)
        checked.append(Example(check_encodable(state, f"{where}.state"), answer))
    return tuple(checked)
