"""``{{E1.items}}`` / ``{{input.state}}`` templates in a step's input.

A tag is a root (``input`` or an earlier step's id) and a dot path into its
value: keys, list indices (``{{E1.ranked.0.item}}``, negative from the end)
and ``length`` (of a list, text or object, unless the object has a key of
that name). A string that is exactly one tag becomes the tag's raw JSON
value, so ``items: "{{E1.items}}"`` passes a list; tags inside longer text
are stringified: strings as they are, anything else as compact JSON.
Templates are resolved in the values of mappings and lists, at any depth;
mapping keys are taken literally.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._jsonpath import to_text
from .errors import TemplateError

__all__ = ["INPUT_ROOT", "TemplateRef", "find_refs", "resolve_templates"]

INPUT_ROOT = "input"
LENGTH = "length"

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


@dataclass(frozen=True)
class TemplateRef:
    """One tag: ``{{E1.ranked.0.item}}`` is root ``E1`` and path ``("ranked", "0", "item")``."""

    root: str
    path: tuple[str, ...]

    @property
    def tag(self) -> str:
        return "{{" + ".".join((self.root, *self.path)) + "}}"


def parse_tag(body: str, field: str, step: str | None) -> TemplateRef:
    parts = body.strip().split(".")
    if any(not part.strip() for part in parts):
        raise TemplateError(field, f"{{{{{body}}}}} is not a dot path like {{{{E1.items}}}}", step=step)
    return TemplateRef(parts[0].strip(), tuple(part.strip() for part in parts[1:]))


def find_refs(value: Any, field: str, step: str | None = None) -> Iterator[tuple[str, TemplateRef]]:
    """Every tag in ``value``, with the field it sits in (``steps.E2.input.state.question``)."""
    if isinstance(value, str):
        for match in _TAG.finditer(value):
            yield field, parse_tag(match.group(1), field, step)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from find_refs(item, f"{field}.{key}", step)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from find_refs(item, f"{field}.{index}", step)


def _keys_of(value: Any) -> str:
    """What a path could have named at a value, for the error when it named something else."""
    if isinstance(value, Mapping):
        keys = ", ".join(map(str, value)) or "no keys"
        return f"its keys: {keys}"
    if isinstance(value, list | tuple):
        if not value:
            return f"it is an empty list; only {LENGTH}"
        return f"it is a list of {len(value)}: indices 0 to {len(value) - 1}, or {LENGTH}"
    if isinstance(value, str):
        return f"it is text; only {LENGTH}"
    return f"it is {'null' if value is None else type(value).__name__}, with no keys"


def _step(value: Any, part: str) -> tuple[bool, Any]:
    """Follow one path part; ``(False, None)`` when ``value`` has nothing by that name."""
    if isinstance(value, Mapping) and part in value:
        return True, value[part]
    if part == LENGTH and isinstance(value, Mapping | list | tuple | str):
        return True, len(value)
    if isinstance(value, list | tuple):
        try:
            index = int(part)
        except ValueError:
            return False, None
        if -len(value) <= index < len(value):
            return True, value[index]
    return False, None


def lookup(ref: TemplateRef, context: Mapping[str, Any], field: str, step: str | None) -> Any:
    if ref.root not in context:
        available = ", ".join(context)
        raise TemplateError(
            field, f"{ref.tag} names neither the input nor an earlier step (available: {available})", step=step
        )
    value = context[ref.root]
    walked = ref.root
    for part in ref.path:
        found, next_value = _step(value, part)
        if not found:
            raise TemplateError(field, f"{ref.tag}: {walked} has no {part!r} ({_keys_of(value)})", step=step)
        value = next_value
        walked += f".{part}"
    return value


def resolve_templates(value: Any, context: Mapping[str, Any], field: str, step: str | None = None) -> Any:
    """``value`` with every tag replaced from ``context`` (``{"input": ..., "E1": output, ...}``).

    ``field`` locates ``value`` in the plan, for errors: ``steps.E2.input``.
    """
    if isinstance(value, str):
        whole = _TAG.fullmatch(value)
        if whole is not None and "{{" not in whole.group(1):
            return lookup(parse_tag(whole.group(1), field, step), context, field, step)
        return _TAG.sub(
            lambda match: to_text(lookup(parse_tag(match.group(1), field, step), context, field, step)), value
        )
    if isinstance(value, Mapping):
        return {key: resolve_templates(item, context, f"{field}.{key}", step) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [resolve_templates(item, context, f"{field}.{index}", step) for index, item in enumerate(value)]
    return value
