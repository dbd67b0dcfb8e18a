"""Canonical JSON, content digests and dot paths, shared by the tools and plans; strict JSON reading."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from typing import Any

__all__ = [
    "MISSING",
    "JsonProblem",
    "canonical_json",
    "digest",
    "find_non_text",
    "loads_json",
    "resolve_dot_path",
    "to_text",
]


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


# -- strict reading ---------------------------------------------------------------------------

#: A code point in U+D800..U+DFFF. A Python string holds one only from a ``"\\udfff"`` escape that
#: is not half of a pair, or from bytes that were not UTF-8 (argv's surrogateescape); it is not
#: text: UTF-8 cannot encode it, so neither a terminal, nor the run log, nor a server can take it.
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonProblem(ValueError):
    """Why some text is not JSON that decirank can use.

    ``syntax`` is true when the text is not JSON at all (as opposed to JSON holding something
    unusable); ``line`` is where, when known; ``path`` the dot path of the bad value, when known.
    """

    def __init__(self, problem: str, *, syntax: bool = False, line: int | None = None, path: str | None = None):
        self.problem = problem
        self.syntax = syntax
        self.line = line
        self.path = path
        super().__init__(problem)

    def where(self) -> str:
        """``line 3: ``, ``at 0.title: `` or both (or nothing), to put before :attr:`problem`."""
        if self.line is not None:
            return f"line {self.line}, at {self.path}: " if self.path else f"line {self.line}: "
        if self.path:
            return f"at {self.path}: "
        return ""


def _reject_constant(name: str) -> Any:
    raise JsonProblem(f"{name} is not JSON", syntax=True)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def find_non_text(value: Any) -> tuple[str, str] | None:
    """The first place in ``value`` JSON text cannot carry, as ``(dot path, problem)``; else None.

    That is a string (or key) holding a surrogate code point, or a float that is not finite
    (NaN, Infinity, or a number too large for a float). The walk is iterative, so any depth will do.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    seen: set[int] = set()  # YAML anchors share a value, or make one that holds itself
    while stack:
        path, current = stack.pop()
        if isinstance(current, dict | list | tuple):
            if id(current) in seen:
                continue
            seen.add(id(current))
        if isinstance(current, str):
            found = _SURROGATE.search(current)
            if found:
                return path, f"U+{ord(found.group()):04X} is a lone surrogate, which UTF-8 text cannot hold"
        elif isinstance(current, float):
            if not math.isfinite(current):
                return path, "NaN is not a JSON number" if current != current else "a number is out of range"
        elif isinstance(current, dict):
            children = []
            for key, item in current.items():
                if isinstance(key, str) and _SURROGATE.search(key):
                    # The path names the key escaped: it is about to be printed.
                    shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
                    stack.append((f"{path}.{shown}" if path else shown, key))
                    break
                children.append((f"{path}.{key}" if path else str(key), item))
            stack.extend(reversed(children))
        elif isinstance(current, list | tuple):
            stack.extend(reversed([(f"{path}.{i}" if path else str(i), item) for i, item in enumerate(current)]))
    return None


def loads_json(text: str) -> Any:
    """``json.loads`` for untrusted input: anything it cannot use is a :class:`JsonProblem`.

    Besides syntax errors: NaN and Infinity (not JSON), numbers too large for a float, integers
    longer than Python converts (``sys.get_int_max_str_digits``), nesting deeper than the parser
    recurses, and lone surrogates (``"\\ud800"``).
    """
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise JsonProblem(error.msg, syntax=True, line=error.lineno) from None
    except JsonProblem:
        raise
    except ValueError:  # the integer-string conversion limit
        limit = sys.get_int_max_str_digits()
        raise JsonProblem(f"a number has more than {limit} digits") from None
    except RecursionError:
        raise JsonProblem("nested too deeply") from None
    found = find_non_text(value)
    if found is not None:
        raise JsonProblem(found[1], path=found[0])
    return value
