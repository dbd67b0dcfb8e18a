"""The stores kept as plain files, one per name under a folder (example sets, calibrations).

Writes are whole-file and atomic; names are checked by the caller before they touch the disk,
and :data:`NAME` is the rule they follow.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..errors import StoreError

__all__ = ["NAME", "known_names", "names_in", "remove_file", "write_atomically"]

#: A stored thing's name: a letter or digit, then letters, digits, ``_``, ``.`` or ``-`` (at most 100).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then a rename.

    A reader sees the old file or the new one, never half of either, even after a crash.
    Raises OSError as it comes; the caller names the store in its error.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def names_in(root: Path, suffix: str, what: str) -> list[str]:
    """The names of the files ``<name><suffix>`` in ``root``, sorted; ``what`` names them in errors."""
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return []
    except OSError as error:
        raise StoreError(f"cannot list {what} in {root}: {error.strerror or error}") from None
    return sorted(
        entry.name[: -len(suffix)]
        for entry in entries
        if entry.name.endswith(suffix) and NAME.fullmatch(entry.name[: -len(suffix)]) and entry.is_file()
    )


def remove_file(path: Path, what: str) -> bool:
    """Remove ``path``; False when there was none. ``what`` ("example set 'x'") names it in errors."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as error:
        raise StoreError(f"cannot remove {what} at {path}: {error.strerror or error}") from None
    return True


def known_names(known: Sequence[str]) -> str:
    """The first 20 of ``known``, and how many more, for an error about an unknown name."""
    return ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
