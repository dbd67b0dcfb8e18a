"""Canonical JSON, content digests and dot paths, shared by the tools and plans; strict JSON reading."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_NESTING",
    "MISSING",
    "JsonProblem",
    "Unfit",
    "canonical_json",
    "digest",
    "find_non_text",
    "first_unfit",
    "loads_json",
    "resolve_dot_path",
    "to_text",
    "too_deep_in_text",
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


#: How deep containers may nest in any value decirank takes (an HTTP body, a tool's arguments, a Python
#: call's inputs, a plan): deeper values are refused where they come in, so nothing below has to walk
#: them with care (encoders, the run log's summaries, a backend's rendering all recurse).
MAX_NESTING = 64


@dataclass(frozen=True)
class Unfit:
    """The first place in a value that decirank cannot take, and why."""

    #: Where, as keys and positions from the value's root.
    path: tuple[str | int, ...]
    #: What went wrong: ``too_deep``, ``key_type``, ``string_unicode`` or ``finite_number``.
    kind: str
    #: What was expected there, as an error names it.
    expected: str
    problem: str

    def dotted(self, root: str = "") -> str:
        parts = [root] if root else []
        return ".".join([*parts, *(_shown(part) for part in self.path)])


def _shown(part: str | int) -> str:
    # A path is about to be printed: a lone surrogate in a key is shown escaped.
    return part.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(part, str) else str(part)


def first_unfit(value: Any, *, finite: bool = True) -> Unfit | None:
    """The first place (in document order) in ``value`` that JSON text cannot carry, or None.

    That is containers nested deeper than :data:`MAX_NESTING` (a value that holds itself is
    infinitely deep), a key that is not a string, a string or key holding a lone surrogate, and
    (with ``finite``) a float that is not finite: NaN, Infinity, or a number too large for a float.
    The walk is iterative, so any depth will do.
    """
    stack: list[tuple[tuple[str | int, ...], Any, int]] = [((), value, 0)]
    # YAML anchors and Python callers share values: each is walked again only when met deeper.
    reached: dict[int, int] = {}
    while stack:
        path, current, depth = stack.pop()
        if isinstance(current, str):
            found = _SURROGATE.search(current)
            if found:
                problem = f"U+{ord(found.group()):04X} is a lone surrogate, which UTF-8 text cannot hold"
                return Unfit(path, "string_unicode", "text without lone surrogates", problem)
        elif isinstance(current, float):
            if finite and not math.isfinite(current):
                got = "NaN" if math.isnan(current) else "a number out of range"
                problem = f"got {got}; JSON has no NaN or Infinity"
                return Unfit(path, "finite_number", "a finite number", problem)
        elif isinstance(current, dict | list | tuple):
            depth += 1
            if depth > MAX_NESTING:
                problem = f"containers are nested more than {MAX_NESTING} levels deep"
                return Unfit(path, "too_deep", f"at most {MAX_NESTING} levels of nesting", problem)
            if reached.get(id(current), 0) >= depth:
                continue  # met before, at least as deep: nothing new below
            reached[id(current)] = depth
            if isinstance(current, dict):
                children = []
                for key, item in current.items():
                    if not isinstance(key, str):
                        problem = f"the key {key!r} is a {type(key).__name__}"
                        return Unfit((*path, str(key)), "key_type", "keys that are strings", problem)
                    if found := _SURROGATE.search(key):
                        code = f"U+{ord(found.group()):04X}"
                        problem = f"{code} in a key is a lone surrogate, which UTF-8 text cannot hold"
                        return Unfit((*path, key), "string_unicode", "keys without lone surrogates", problem)
                    children.append(((*path, key), item, depth))
                stack.extend(reversed(children))
            else:
                stack.extend(reversed([((*path, i), item, depth) for i, item in enumerate(current)]))
    return None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OTHER = re.compile(r'[^"\[\]{},]+')


def too_deep_in_text(text: str) -> Unfit | None:
    """Where containers first nest past :data:`MAX_NESTING` in JSON ``text``, read without parsing it.

    For text too deep for the parser, which recurses: the scan stops at the first container over the
    limit, so it reads no more than that container's ancestors and their earlier siblings.
    """
    # Each open container: its kind, and the key or position of the value being read in it.
    open_containers: list[list[Any]] = []
    expect_key = False
    at = 0
    while at < len(text):
        char = text[at]
        if char == '"':
            found = _STRING.match(text, at)
            if found is None:
                return None  # an unterminated string: the parser's own error says so
            if expect_key:
                try:
                    open_containers[-1][1] = json.loads(found.group())
                except ValueError:
                    return None
                expect_key = False
            at = found.end()
            continue
        if char in "[{":
            if len(open_containers) == MAX_NESTING:
                path = tuple(position for _, position in open_containers)
                problem = f"containers are nested more than {MAX_NESTING} levels deep"
                return Unfit(path, "too_deep", f"at most {MAX_NESTING} levels of nesting", problem)
            open_containers.append([char, 0 if char == "[" else ""])
            expect_key = char == "{"
        elif char in "]}":
            if not open_containers:
                return None
            open_containers.pop()
            expect_key = False
        elif char == ",":
            if open_containers:
                if open_containers[-1][0] == "[":
                    open_containers[-1][1] += 1
                else:
                    expect_key = True
        else:
            found = _OTHER.match(text, at)
            at = found.end() if found else at + 1
            continue
        at += 1
    return None


def find_non_text(value: Any) -> tuple[str, str] | None:
    """The first place in ``value`` JSON text cannot carry, as ``(dot path, problem)``; else None.

    See :func:`first_unfit`; floats must be finite.
    """
    found = first_unfit(value)
    return None if found is None else (found.dotted(), found.problem)


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
        deep = too_deep_in_text(text)
        if deep is None:
            raise JsonProblem("nested too deeply") from None
        raise JsonProblem(deep.problem, path=deep.dotted()) from None
    found = find_non_text(value)
    if found is not None:
        raise JsonProblem(found[1], path=found[0])
    return value
