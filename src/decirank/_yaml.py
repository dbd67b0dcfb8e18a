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
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from ._jsonpath import MAX_NESTING

__all__ = ["MAX_EXPANDED_NODES", "YamlProblem", "load_yaml", "yaml_problem"]

#: The most values a document may hold once its aliases are expanded.
MAX_EXPANDED_NODES = 100_000


class YamlProblem(ValueError):
    """What is wrong with a YAML text, as a phrase each caller puts in its own typed error."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what PyYAML found wrong, on one line: `` at line 3: found unexpected end of stream``."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or " ".join(str(error).split())
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


def _check(root: yaml.Node) -> None:
    size, depth = _expanded_size(root)
    if size > MAX_EXPANDED_NODES:
        raise YamlProblem(f"expected at most {MAX_EXPANDED_NODES} values with its aliases expanded; it holds more")
    if depth > MAX_NESTING:
        raise YamlProblem(f"expected at most {MAX_NESTING} levels of nesting; it nests deeper")


def load_yaml(text: str, *, what_is_wrong: str = "not valid YAML", every_document: bool = False) -> Any:
    """The document ``text`` holds (a list of them with ``every_document``), or :class:`YamlProblem`.

    ``what_is_wrong`` starts the problem of a text that does not parse (``'plan.yaml' is not valid YAML``);
    a text over the limits is refused with a problem stating the limit.
    """
    loader = yaml.SafeLoader(text)
    try:
        if every_document:
            documents = []
            while loader.check_node():
                root = loader.get_node()
                _check(root)
                documents.append(loader.construct_document(root))
            return documents
        root = loader.get_single_node()
        if root is None:
            return None
        _check(root)
        return loader.construct_document(root)
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
