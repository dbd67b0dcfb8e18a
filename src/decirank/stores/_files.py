"""The stores kept as plain files, one per name under a folder (example sets, calibrations).

Writes are whole-file and atomic; names are checked by the caller before they touch the disk,
and :data:`NAME` is the rule they follow.

Everything a store keeps is the user's own (their texts, their labels), so
its files are ``0600`` and its folders ``0700`` whatever the umask, and
files or folders an older release left readable by others are tightened when
a store opens them (:func:`private_folder`, :func:`private_file`).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from .._paths import data_dir
from ..errors import StoreError

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "NAME",
    "known_names",
    "names_in",
    "private_file",
    "private_folder",
    "remove_file",
    "tighten_folder_files",
    "write_atomically",
]

#: A store's files: read and written by their owner only.
FILE_MODE = 0o600
#: A store's folders: listed and entered by their owner only.
FOLDER_MODE = 0o700


def _tighten(path: Path, mode: int) -> None:
    """Take every permission outside ``mode`` away from ``path``; a file of another user is left as it is."""
    with contextlib.suppress(OSError):  # not ours (a shared read-only file), or gone: nothing to tighten
        current = stat.S_IMODE(os.stat(path).st_mode)
        if current & ~mode:
            os.chmod(path, current & mode)


def _decirank_folders(folder: Path) -> set[Path]:
    """The folders at and under the user's data directory down to ``folder``: decirank's own to tighten.

    A folder above it, or a folder outside it that a store was pointed at
    (``DECIRANK_RUNLOG=/tmp/x.db``), belongs to the user; it is not changed.
    """
    try:
        home = data_dir().resolve()
        folder = folder.resolve()
    except OSError:
        return set()
    if folder != home and home not in folder.parents:
        return set()
    ours = {home}
    current = folder
    while current != home:
        ours.add(current)
        current = current.parent
    return ours


def private_folder(folder: Path) -> None:
    """Make ``folder`` (and its missing parents) ``0700``; tighten it, and those up to the data directory, if
    they exist already. Raises OSError as it comes."""
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    folder.mkdir(parents=True, exist_ok=True, mode=FOLDER_MODE)
    # mkdir's mode passes through the umask, and a parent made on the way gets the umask's default.
    for made in missing:
        _tighten(made, FOLDER_MODE)
    for ours in _decirank_folders(folder):
        _tighten(ours, FOLDER_MODE)


def private_file(path: Path, *, companions: Sequence[str] = ()) -> None:
    """Create ``path`` empty as ``0600`` if it is missing, else tighten it; and tighten the files beside it
    named ``path`` + each of ``companions`` (SQLite's ``-wal``, ``-shm``, ``-journal``) that exist."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    _tighten(path, FILE_MODE)
    for suffix in companions:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            _tighten(companion, FILE_MODE)


_tightened_folders: set[Path] = set()
_tightened_lock = threading.Lock()


def tighten_folder_files(folder: Path) -> None:
    """Tighten the folder of a file store and every file in it, once per process and folder (an older release
    wrote them with the umask's mode)."""
    with _tightened_lock:
        if folder in _tightened_folders:
            return
        _tightened_folders.add(folder)
    if not folder.is_dir():
        return
    _tighten(folder, FOLDER_MODE)
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.is_file():
                _tighten(entry, FILE_MODE)

#: A stored thing's name: a letter or digit, then letters, digits, ``_``, ``.`` or ``-`` (at most 100).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, then a rename.

    A reader sees the old file or the new one, never half of either, even after a crash.
    Raises OSError as it comes; the caller names the store in its error.
    """
    private_folder(path.parent)
    # mkstemp makes the file 0600, whatever the umask: the rename keeps that mode.
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
