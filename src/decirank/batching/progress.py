"""What a batch has done, kept beside its output so a killed batch resumes where it stopped.

``OUTPUT.progress/`` holds ``job.json`` (what the batch asks, a fingerprint of
its input, the rows per chunk, its run id) and ``done.jsonl``: one line per
finished chunk, its answers and failed rows, appended by the driver alone and
flushed as each chunk finishes. A line cut short by a kill is dropped when the
folder is opened again, so a chunk is either wholly done or asked again.

The output is written only once every chunk is done, from the input and
``done.jsonl`` in input order, to a temporary file renamed over ``OUTPUT``;
then the folder is removed. Chunks are fixed by row number and each row's
answer depends only on its chunk, so a batch killed and resumed writes the
same bytes as one never stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError
from ..stores.runlog import new_run_id
from ..types.answers import Usage
from .chunks import ChunkOutcome, usage_from_dict

__all__ = ["FIRST_ERRORS", "Progress", "fingerprint", "progress_folder"]

VERSION = 1
#: Failed rows the batch's run shows (all of them are in the errors file).
FIRST_ERRORS = 5
_SAMPLE = 1 << 20


def progress_folder(output: Path) -> Path:
    return output.with_name(output.name + ".progress")


def fingerprint(path: Path) -> dict[str, Any]:
    """Size, modification time and a hash of the first and last MiB: enough to notice a changed input."""
    stat = path.stat()
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        digest.update(file.read(_SAMPLE))
        if stat.st_size > 2 * _SAMPLE:
            file.seek(-_SAMPLE, os.SEEK_END)
        digest.update(file.read(_SAMPLE))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256_ends": digest.hexdigest()}


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class Progress:
    """The progress folder of one output; :meth:`open` starts it or picks it up."""

    def __init__(self, folder: Path, manifest: dict[str, Any], *, created: bool = False) -> None:
        self.folder = folder
        self.manifest = manifest
        #: Whether this batch started the folder (else it resumes one an earlier run left).
        self.created = created
        #: chunk -> (offset, length) of its line in done.jsonl
        self.done: dict[int, tuple[int, int]] = {}
        #: Rows answered and rows failed in the chunks done.
        self.answered = 0
        self.failed = 0
        #: The first failed rows, in row order (at most :data:`FIRST_ERRORS`): ``{"row", "error", "message"}``.
        self.first_errors: list[dict[str, Any]] = []
        #: Usage of the chunks done, by the model(s) that answered.
        self.usage: dict[str, Usage] = {}
        self._journal_path = folder / "done.jsonl"
        self._load()
        self._journal = open(self._journal_path, "ab")

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def started(self) -> float:
        return float(self.manifest["started"])

    @property
    def chunk_rows(self) -> int:
        return int(self.manifest["chunk_rows"])

    @property
    def rows_done(self) -> int:
        """Rows answered or failed in the chunks done."""
        return self.answered + self.failed

    @classmethod
    def open(
        cls,
        output: Path,
        *,
        identity: dict[str, Any],
        input_path: Path,
        chunk_rows: int | None,
        default_chunk_rows: int,
        overwrite: bool,
    ) -> Progress:
        """Resume the batch of ``output`` if its folder holds the same job on the same input, else start one.

        ``chunk_rows`` None takes the resumed batch's, and a new batch ``default_chunk_rows``.
        """
        folder = progress_folder(output)
        source = {"path": os.fspath(input_path.resolve()), **fingerprint(input_path)}
        if folder.is_dir() and overwrite:
            shutil.rmtree(folder)
        if folder.is_dir():
            manifest = cls._read_manifest(folder)
            changed = [
                what
                for what, same in (
                    ("the question, options and calibration", manifest.get("job") == identity),
                    (
                        "the input file",
                        {k: v for k, v in manifest.get("input", {}).items() if k != "path"}
                        == {k: v for k, v in source.items() if k != "path"},
                    ),
                    ("the rows per batch", chunk_rows is None or manifest.get("chunk_rows") == chunk_rows),
                    ("the format", manifest.get("version") == VERSION),
                )
                if not same
            ]
            if changed:
                raise InvalidInputError(
                    "--out",
                    "the same options and input as the unfinished batch it resumes",
                    detail=f"{os.fspath(folder)!r} holds a batch that differs in {', '.join(changed)}; "
                    "rerun it as it was, or give --overwrite to start over",
                )
            return cls(folder, manifest)
        if output.exists() and not overwrite:
            raise InvalidInputError(
                "--out",
                "a new file, or the output of an unfinished batch",
                detail=f"{os.fspath(output)!r} exists; give --overwrite to replace it",
            )
        folder.mkdir()
        manifest = {
            "version": VERSION,
            "job": identity,
            "input": source,
            "chunk_rows": chunk_rows or default_chunk_rows,
            "run_id": new_run_id(),
            "started": time.time(),
        }
        _write_atomic(folder / "job.json", json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=True))
        return cls(folder, manifest, created=True)

    @staticmethod
    def _read_manifest(folder: Path) -> dict[str, Any]:
        try:
            manifest = json.loads((folder / "job.json").read_text(encoding="utf-8"))
            if not isinstance(manifest, dict) or not {"job", "input", "chunk_rows", "run_id", "started"} <= set(
                manifest
            ):
                raise ValueError("fields missing")
        except (OSError, ValueError) as error:
            raise InvalidInputError(
                "--out",
                "an output whose progress folder can be read",
                detail=f"{os.fspath(folder)!r}: {error}; give --overwrite to start over",
            ) from None
        return manifest

    def _load(self) -> None:
        """Index the finished chunks; a last line cut short (a kill while writing it) is dropped."""
        if not self._journal_path.exists():
            return
        good_end = 0
        with open(self._journal_path, "rb") as file:
            offset = 0
            for line in file:
                if not line.endswith(b"\n"):
                    break
                try:
                    data = json.loads(line)
                    chunk = int(data["chunk"])
                    answered, errors = len(data["answers"]), [list(error) for error in data["errors"]]
                    usage = {model: usage_from_dict(used) for model, used in (data.get("usage") or {}).items()}
                except (ValueError, KeyError, TypeError):
                    break
                self._count(chunk, answered, errors, usage)
                self.done[chunk] = (offset, len(line))
                offset += len(line)
                good_end = offset
        if good_end != self._journal_path.stat().st_size:
            with open(self._journal_path, "r+b") as file:
                file.truncate(good_end)

    def append(self, outcome: ChunkOutcome) -> None:
        line = json.dumps(outcome.to_dict(), ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
        offset = self._journal.tell()
        self._journal.write(line)
        self._journal.flush()
        self.done[outcome.chunk] = (offset, len(line))
        usage = {model: usage_from_dict(used) for model, used in outcome.usage.items()}
        self._count(outcome.chunk, len(outcome.answers), outcome.errors, usage)

    def _count(self, chunk: int, answered: int, errors: list[list[Any]], usage: dict[str, Usage]) -> None:
        """Add a finished chunk to the totals: rows answered and failed, the first failed rows, usage."""
        self.answered += answered
        self.failed += len(errors)
        if errors:
            start = chunk * self.chunk_rows
            failed = [{"row": start + offset, "error": kind, "message": message} for offset, kind, message in errors]
            self.first_errors = sorted(self.first_errors + failed, key=lambda error: error["row"])[:FIRST_ERRORS]
        for model, used in usage.items():
            self.usage[model] = self.usage.get(model, Usage()) + used

    def outcomes(self) -> Iterator[ChunkOutcome]:
        """The finished chunks, in chunk order."""
        self._journal.flush()
        with open(self._journal_path, "rb") as file:
            for chunk in sorted(self.done):
                offset, length = self.done[chunk]
                file.seek(offset)
                yield ChunkOutcome.from_dict(json.loads(file.read(length)))

    def temporary(self, name: str) -> Path:
        return self.folder / name

    def close(self) -> None:
        self._journal.close()

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)
