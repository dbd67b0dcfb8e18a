"""Named example sets: labelled examples kept under a name, for any surface to pass by name.

A set is a JSON Lines file ``<name>.jsonl`` in ``examples/`` under the user's
data directory (so it moves with ``DECIRANK_HOME``), one
``{"state": ..., "answer": ...}`` per line: ``answer`` is ``true``/``false``
for a yes/no question, or an option key for a choice. For the filter tool's
questions, which name their own subject, ``state`` is the item text an
example judges.

Writes are atomic (a temporary file in the same folder, then a rename), so a
reader sees a whole set, the old one or the new one, never half of either.
Names are checked before they touch the disk: a letter or digit, then
letters, digits, ``_``, ``.`` or ``-`` (at most 100 characters), so a name
can never leave the folder.

:func:`resolve_examples` is what the surfaces call: a list of examples passes
through, a string is a set name looked up here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._jsonpath import JsonProblem, find_non_text, loads_json, to_text
from .._paths import data_dir
from ..errors import InvalidInputError, StoreError
from ..types.questions import Example
from ._files import NAME, known_names, names_in, remove_file, tighten_folder_files, write_atomically

__all__ = ["ExampleSetInfo", "ExampleStore", "check_examples", "check_set_name", "default_root", "resolve_examples"]

_SUFFIX = ".jsonl"


def default_root() -> Path:
    """``examples/`` in the user's data directory (under ``DECIRANK_HOME`` when it is set)."""
    return data_dir() / "examples"


def check_set_name(value: Any, field: str = "name", *, what: str = "an example set name") -> str:
    """A set name: a letter or digit, then letters, digits, '_', '.' or '-', at most 100 characters.

    ``what`` names the kind of name in the error (``"a calibration name"``).
    """
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise InvalidInputError(
            field,
            f"{what}: a letter or digit, then letters, digits, '_', '.' or '-' (at most 100)",
            got=value,
        )
    return value


_EXPECTED = 'an object with "state" (or "item") and "answer"'


def check_examples(value: Any, field: str = "examples") -> list[dict[str, Any]]:
    """``value`` as a list of ``{"state", "answer"}`` dicts; each problem names its place, e.g. ``examples.3.answer``.

    An example may also be the filter tool's ``{"item", "answer"}`` (the item stored as the text
    the filter shows it as: a string as it is, anything else as canonical JSON) or an
    :class:`~decirank.types.questions.Example`. An answer is ``true``/``false`` or a non-empty
    string (an option key); whether it fits a question is checked when a question carries it.
    """
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidInputError(field, 'a list of {"state": ..., "answer": ...}', got=value)
    checked = []
    for index, example in enumerate(value):
        where = f"{field}.{index}"
        if isinstance(example, Example):
            example = example.to_dict()
        if not isinstance(example, Mapping):
            raise InvalidInputError(where, _EXPECTED, got=example)
        keys = set(example)
        if keys == {"item", "answer"}:
            example = {"state": to_text(example["item"]), "answer": example["answer"]}
        elif keys != {"state", "answer"}:
            shown = ", ".join(repr(str(key)) for key in example) or "none"
            raise InvalidInputError(where, _EXPECTED, detail=f"it has the keys {shown}")
        answer = example["answer"]
        if not (isinstance(answer, bool) or (isinstance(answer, str) and answer)):
            raise InvalidInputError(f"{where}.answer", "true, false or an option key", got=answer)
        found = find_non_text(example["state"])
        if found is not None:
            path = f"{where}.state.{found[0]}" if found[0] else f"{where}.state"
            raise InvalidInputError(path, "JSON text", detail=found[1])
        checked.append({"state": example["state"], "answer": answer})
    return checked


@dataclass(frozen=True)
class ExampleSetInfo:
    """What ``list`` tells about a set, without its examples."""

    name: str
    count: int
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "updated_at": self.updated_at.isoformat()}


class ExampleStore:
    """Example sets by name, one JSON Lines file each under ``root`` (default: :func:`default_root`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_root()
        tighten_folder_files(self.root)

    def __repr__(self) -> str:
        return f"<ExampleStore {self.root}>"

    def _path(self, name: str) -> Path:
        return self.root / f"{check_set_name(name)}{_SUFFIX}"

    def put(self, name: str, examples: Any) -> int:
        """Store ``examples`` under ``name``, replacing any set of that name; returns how many."""
        path = self._path(name)
        checked = check_examples(examples)
        if not checked:
            raise InvalidInputError("examples", "at least one example", got=[])
        text = "".join(json.dumps(example, ensure_ascii=False, separators=(",", ":")) + "\n" for example in checked)
        try:
            write_atomically(path, text)
        except OSError as error:
            raise StoreError(f"cannot write example set {name!r} in {self.root}: {error.strerror or error}") from None
        return len(checked)

    def get(self, name: str) -> list[dict[str, Any]] | None:
        """The set's examples in stored order, or None when there is no such set."""
        path = self._path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise StoreError(f"cannot read example set {name!r} at {path}: {error}") from None
        examples = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                examples.append(loads_json(line))
            except JsonProblem as problem:
                raise StoreError(f"example set {name!r} ({path}) line {number}: {problem.problem}") from None
        try:
            return check_examples(examples, f"example set {name!r}")
        except InvalidInputError as error:
            raise StoreError(f"example set {name!r} ({path}) is damaged: {error}") from None

    def names(self) -> list[str]:
        """Every set's name, sorted."""
        return names_in(self.root, _SUFFIX, "example sets")

    def list(self) -> list[ExampleSetInfo]:
        """Every set with its size and when it was last written, by name."""
        listed = []
        for name in self.names():
            path = self._path(name)
            try:
                modified = path.stat().st_mtime
                count = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
            except FileNotFoundError:  # removed since names() looked
                continue
            except (OSError, UnicodeDecodeError) as error:
                raise StoreError(f"cannot read example set {name!r} at {path}: {error}") from None
            listed.append(ExampleSetInfo(name, count, datetime.fromtimestamp(modified, UTC)))
        return listed

    def remove(self, name: str) -> bool:
        """Remove a set; False when there was none of that name."""
        return remove_file(self._path(name), f"example set {name!r}")


def resolve_examples(value: Any, field: str = "examples", store: ExampleStore | None = None) -> Any:
    """A list of examples as it is (None too); a string is a set name, looked up in ``store``.

    An unknown name is an :class:`InvalidInputError` naming ``field`` and listing the known sets.
    The list is not checked here: the caller checks it against what its question expects.
    """
    if not isinstance(value, str):
        return value
    store = store if store is not None else ExampleStore()
    name = check_set_name(value, field)
    examples = store.get(name)
    if examples is None:
        known = store.names()
        detail = (
            f"no example set {name!r}; known sets: {known_names(known)}"
            if known
            else f"no example set {name!r}; none stored"
        )
        raise InvalidInputError(field, "a list of examples or the name of a stored example set", detail=detail)
    return examples
