"""Canonical JSON, content digests and dot paths, shared by the tools and plans."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["MISSING", "canonical_json", "digest", "resolve_dot_path", "to_text"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def canonical_json(value: Any) -> str:
    """One text per JSON value: sorted keys, no spaces, unicode kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def to_text(value: Any) -> str:
    """How a value is shown to a model: strings as they are, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value)


def digest(value: Any) -> bytes:
    return hashlib.sha256(canonical_json(value).encode()).digest()


def resolve_dot_path(value: Any, path: str) -> Any:
    """Follow ``a.b.0.c`` through mappings and sequences; :data:`MISSING` when a step is absent."""
    current = value
    for part in path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return MISSING
            current = current[part]
        elif isinstance(current, list | tuple):
            try:
                index = int(part)
            except ValueError:
                return MISSING
            if not -len(current) <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current
