"""Argument checks shared by the tools: each names the field and what it expects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "check_count",
    "check_instructions",
    "check_items",
    "check_optional_text",
    "check_probability_threshold",
    "check_top_k",
]


def check_items(items: Any, field: str = "items") -> list[Any]:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidInputError(field, "a list", got=items)
    return list(items)


def check_instructions(value: Any, field: str = "instructions") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, "a non-empty string", got=value)
    return value


def check_optional_text(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, "a non-empty string or nothing", got=value)
    return value


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
