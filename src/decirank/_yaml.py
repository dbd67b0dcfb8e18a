"""The one YAML reader: every place decirank reads YAML (plans, ``--input X.yaml``) reads it here.

PyYAML's ``safe_load`` is safe from code, not from size: aliases share what
they name, so a kilobyte of them stands for billions of values, which
anything that walks the result (checks, templates, JSON) visits one by one;
its composer recurses once per level, so deep nesting ends in a
``RecursionError``; and an integer of a million digits is refused with a bare
``ValueError``. :func:`load_yaml` composes the document first, measures it
with its aliases expanded (without expanding them), and builds it only when
it is within :data:`MAX_EXPANDED_NODES` values and
:data:`~decirank._jsonpath.MAX_NESTING` levels, so a hostile file is refused
as soon as it is read.

Size and time are bounded too. A text over :data:`MAX_YAML_CHARS` is not
read at all. The reader is PyYAML's pure-Python one, which checks a
deadline (default :data:`MAX_YAML_SECONDS`) between tokens, nodes and
values, so a slow document stops where it is, in whatever thread reads it,
with :class:`YamlLimit`; and no single value may take long: a sexagesimal
integer (``1:0:0:...``, YAML 1.1's base 60) is built by a loop of big-number
products, about a quarter of a minute for 800 KB of them, so one of more
than :data:`MAX_SEXAGESIMAL_PARTS` parts is refused as Python refuses a
decimal integer of more than 4,300 digits.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import yaml

from ._jsonpath import MAX_NESTING

__all__ = [
    "MAX_EXPANDED_NODES",
    "MAX_SEXAGESIMAL_PARTS",
    "MAX_YAML_CHARS",
    "MAX_YAML_SECONDS",
    "YamlLimit",
    "YamlProblem",
    "load_yaml",
    "yaml_problem",
]

#: The most values a document may hold once its aliases are expanded.
MAX_EXPANDED_NODES = 100_000
#: The longest text read as YAML, the server's body limit: the deadline is checked between tokens, and one
#: token this long (a plain scalar of 4 MiB) takes about 2 s to scan.
MAX_YAML_CHARS = 4 * 1024 * 1024
#: Seconds a text may take to read when its caller gives no other limit (a plan file reads in milliseconds).
MAX_YAML_SECONDS = 10.0
#: The most ``:``-separated parts of a base-60 integer: 60**2400 has about as many digits (4,267) as
#: Python converts from a decimal string by default (4,300), and builds in milliseconds.
MAX_SEXAGESIMAL_PARTS = 2_400


class YamlProblem(ValueError):
    """What is wrong with a YAML text, as a phrase each caller puts in its own typed error."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class YamlLimit(YamlProblem):
    """The text is over a size or time limit of the reader: it was not read to the end, so not judged.

    ``timed_out`` tells the time limit from the size limit.
    """

    def __init__(self, problem: str, *, timed_out: bool = False) -> None:
        super().__init__(problem)
        self.timed_out = timed_out


class _GuardedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that stops at ``deadline`` (``time.monotonic()``) and refuses a base-60 integer of
    more than :data:`MAX_SEXAGESIMAL_PARTS` parts."""

    def __init__(self, text: str, deadline: float, seconds: float) -> None:
        super().__init__(text)
        self._deadline = deadline
        self._seconds = seconds

    def _on_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise YamlLimit(f"not read within {self._seconds:g} s, the time limit for reading it", timed_out=True)

    # The three loops a document's reading goes through: tokens, nodes, values.
    def fetch_more_tokens(self) -> None:
        self._on_time()
        super().fetch_more_tokens()

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._on_time()
        return super().compose_node(parent, index)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        self._on_time()
        return super().construct_object(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        value = self.construct_scalar(node)
        if isinstance(value, str) and value.count(":") >= MAX_SEXAGESIMAL_PARTS:
            raise ValueError(
                f"a base-60 number has more than {MAX_SEXAGESIMAL_PARTS} ':'-separated parts "
                f"(over {math.floor(MAX_SEXAGESIMAL_PARTS * math.log10(60))} digits)"
            )
        return super().construct_yaml_int(node)


_GuardedLoader.add_constructor("tag:yaml.org,2002:int", _GuardedLoader.construct_yaml_int)


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what PyYAML found wrong, on one line: `` at line 3: found unexpected end of stream``."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    context = getattr(error, "context", None)
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
    if context and getattr(error, "problem", None):
        problem = f"{context}: {problem}"
    return f"{where}: {problem}"


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """How many nodes ``root`` holds with every alias expanded, and how deep they nest (capped
    just past the limits: a node that holds itself is over them)."""
    sizes: dict[int, tuple[int, int]] = {}
    over = (MAX_EXPANDED_NODES + 1, MAX_NESTING + 1)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = (1, 0)
            continue
        children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
        if children_done:
            measured = [sizes.get(id(child), over) for child in children]
            total = 1 + sum(size for size, _ in measured)
            depth = 1 + max((depth for _, depth in measured), default=0)
            sizes[id(node)] = (min(total, over[0]), min(depth, over[1]))
            continue
        if id(node) in sizes:
            continue
        sizes[id(node)] = over  # until measured: a node met again inside itself is over every limit
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _check(root: yaml.Node, max_values: int | None, max_nesting: int | None) -> None:
    if max_values is None and max_nesting is None:
        return
    size, depth = _expanded_size(root)
    if max_values is not None and size > max_values:
        raise YamlProblem(f"expected at most {max_values} values with its aliases expanded; it holds more")
    if max_nesting is not None and depth > max_nesting:
        raise YamlProblem(f"expected at most {max_nesting} levels of nesting; it nests deeper")


def load_yaml(
    text: str,
    *,
    what_is_wrong: str = "not valid YAML",
    every_document: bool = False,
    timeout: float = MAX_YAML_SECONDS,
    max_values: int | None = MAX_EXPANDED_NODES,
    max_nesting: int | None = MAX_NESTING,
) -> Any:
    """The document ``text`` holds (a list of them with ``every_document``), or :class:`YamlProblem`.

    ``what_is_wrong`` starts the problem of a text that does not parse (``'plan.yaml' is not valid YAML``);
    a text over the limits is refused with a problem stating the limit: :class:`YamlLimit` when it is over
    :data:`MAX_YAML_CHARS` or was not read within ``timeout`` seconds. ``max_values`` and ``max_nesting``
    bound what the caller will walk; None leaves that bound out, for a caller that only asks whether the
    text parses (the document is built either way without expanding an alias).
    """
    if len(text) > MAX_YAML_CHARS:
        raise YamlLimit(f"{what_is_wrong}: expected at most {MAX_YAML_CHARS} characters; it has {len(text)}")
    loader = _GuardedLoader(text, time.monotonic() + timeout, timeout)
    try:
        if every_document:
            documents = []
            while loader.check_node():
                root = loader.get_node()
                _check(root, max_values, max_nesting)
                documents.append(loader.construct_document(root))
            return documents
        root = loader.get_single_node()
        if root is None:
            return None
        _check(root, max_values, max_nesting)
        return loader.construct_document(root)
    except YamlLimit as limit:
        raise YamlLimit(f"{what_is_wrong}: {limit.problem}", timed_out=limit.timed_out) from None
    except yaml.YAMLError as error:
        raise YamlProblem(f"{what_is_wrong}{yaml_problem(error)}") from None
    except RecursionError:
        raise YamlProblem(f"{what_is_wrong}: nested too deeply to read") from None
    except ValueError as error:  # a constructor's: the integer-string conversion limit, a bad date
        problem = str(error)
        if "integer string conversion" in problem:
            problem = f"a number has more than {sys.get_int_max_str_digits()} digits"
        raise YamlProblem(f"{what_is_wrong}: {problem}") from None
    finally:
        loader.dispose()
