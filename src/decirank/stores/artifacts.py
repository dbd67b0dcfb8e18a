"""The artifact store: refs ``run_id/agent_id`` resolved to artifact text.

Upstream steps (a map, a beam, a person) put their outputs here under a ref;
``score_list`` resolves refs to text itself, so callers never pipe artifact
text through tool parameters, and it leaves a *stamp* on each ref it scores.
Users also register here the types that ``validate:<type>`` judges with a
decision model.

One SQLite file (``artifacts.db`` in the data directory, or the path in
``DECIRANK_ARTIFACTS``) in WAL mode, so readers never wait for a writer; a
store is safe to share between threads, and several processes may write at
once (each waits for the write lock under a busy timeout). The schema is a
list of named, append-only migrations, recorded in the file and applied on
first use (:mod:`decirank.stores._migrations`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .._paths import data_file
from ..errors import InvalidInputError
from ._database import Database, SQLiteDatabase, timestamp
from ._migrations import Migration, migrate

__all__ = ["ArtifactInfo", "ArtifactStore", "RegisteredType", "Stamp", "check_ref", "check_type_name", "default_path"]

_TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def default_path() -> Path:
    return data_file("artifacts.db", variable="DECIRANK_ARTIFACTS")


def check_ref(value: Any, field: str = "ref") -> str:
    """A ref is ``run_id/agent_id``: exactly two non-empty parts without surrounding spaces."""
    expected = "a ref 'run_id/agent_id' (two non-empty parts)"
    if not isinstance(value, str):
        raise InvalidInputError(field, expected, got=value)
    parts = value.split("/")
    if len(parts) != 2 or any(not part or part != part.strip() for part in parts):
        raise InvalidInputError(field, expected, got=value)
    if any(not character.isprintable() for character in value):
        raise InvalidInputError(field, expected, detail=f"{value!r} holds a control character")
    return value


def check_type_name(value: Any, field: str = "name") -> str:
    if not isinstance(value, str) or not _TYPE_NAME.fullmatch(value):
        raise InvalidInputError(field, "a type name: a letter, then letters, digits, '_', '.' or '-'", got=value)
    return value


@dataclass(frozen=True)
class ArtifactInfo:
    """What ``list`` tells about an artifact, without its text."""

    ref: str
    #: Length of the text in characters.
    size: int
    created_at: datetime
    updated_at: datetime

    @property
    def run_id(self) -> str:
        return self.ref.split("/")[0]

    @property
    def agent_id(self) -> str:
        return self.ref.split("/")[1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "size": self.size,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class Stamp:
    """What one scoring run said about one ref."""

    ref: str
    #: The scoring run (``score_list``'s ``run_id``), not the run that made the artifact.
    run_id: str
    evaluator: str
    #: None when the ref could not be scored (verdict UNKNOWN).
    score: float | None
    verdict: str
    #: The ref's place in that run's ranking, 1 for the best.
    beam_rank: int
    pruned: bool
    reason: str
    created_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "run_id": self.run_id,
            "evaluator": self.evaluator,
            "score": self.score,
            "verdict": self.verdict,
            "beam_rank": self.beam_rank,
            "pruned": self.pruned,
            "reason": self.reason,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True)
class RegisteredType:
    """A type that ``validate:<name>`` judges with a decision model against its description."""

    name: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description}


#: Append only: a released migration is never edited, a change is a new entry.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "a001_artifacts",
        (
            """
            CREATE TABLE artifacts (
                ref TEXT PRIMARY KEY,
                text TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            )
            """,
        ),
    ),
    # Stamps are a history: every scoring run adds its own. They are keyed by ref,
    # not tied to an artifact row, so a run that met a missing ref can record so.
    Migration(
        "a002_stamps",
        (
            """
            CREATE TABLE stamps (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                ref TEXT NOT NULL,
                run_id TEXT NOT NULL,
                evaluator TEXT NOT NULL,
                score DOUBLE PRECISION,
                verdict TEXT NOT NULL,
                beam_rank INTEGER NOT NULL,
                pruned INTEGER NOT NULL,
                reason TEXT NOT NULL,
                created_at TEXT NOT NULL
            )
            """,
            "CREATE INDEX stamps_by_ref ON stamps (ref, id)",
            "CREATE INDEX stamps_by_run ON stamps (run_id, id)",
        ),
    ),
    Migration(
        "a003_types",
        (
            """
            CREATE TABLE types (
                name TEXT PRIMARY KEY,
                description TEXT NOT NULL,
                created_at TEXT NOT NULL
            )
            """,
        ),
    ),
)


class ArtifactStore:
    """Artifact text by ref, the stamps scoring runs leave on refs, and registered types.

    ``path`` defaults to ``artifacts.db`` in the user's data directory
    (``DECIRANK_ARTIFACTS`` names another file). Nothing touches the disk
    until the first operation; :meth:`close` (or ``with``) releases the file.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._database: Database | None = None
        self._open_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ArtifactStore {self.path}>"

    def __enter__(self) -> ArtifactStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._open_lock:
            if self._database is not None:
                self._database.close()
                self._database = None

    @property
    def database(self) -> Database:
        """The open database, its migrations applied."""
        with self._open_lock:
            if self._database is None:
                database = SQLiteDatabase(self.path, what="artifact store")
                try:
                    migrate(database, MIGRATIONS)
                except BaseException:
                    database.close()
                    raise
                self._database = database
            return self._database

    # -- artifacts ---------------------------------------------------------

    def put(self, ref: str, text: str) -> None:
        """Store ``text`` under ``ref``, replacing what was there (its stamps stay, as history)."""
        ref = check_ref(ref)
        if not isinstance(text, str):
            raise InvalidInputError("text", "a string", got=text)
        now = timestamp()
        self.database.execute(
            """
            INSERT INTO artifacts (ref, text, created_at, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (ref) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at
            """,
            (ref, text, now, now),
        )

    def get(self, ref: str) -> str | None:
        """The text stored under ``ref``, or None when there is none."""
        rows = self.database.query("SELECT text FROM artifacts WHERE ref = ?", (check_ref(ref),))
        return rows[0]["text"] if rows else None

    def get_many(self, refs: Iterable[str]) -> dict[str, str]:
        """The texts of those of ``refs`` that exist, in one read."""
        wanted = sorted({check_ref(ref) for ref in refs})
        found: dict[str, str] = {}
        # Batches stay under SQLite's limit on bound parameters.
        for start in range(0, len(wanted), 500):
            batch = wanted[start : start + 500]
            placeholders = ",".join("?" * len(batch))
            rows = self.database.query(f"SELECT ref, text FROM artifacts WHERE ref IN ({placeholders})", batch)
            found.update((row["ref"], row["text"]) for row in rows)
        return found

    def list(self, prefix: str = "") -> list[ArtifactInfo]:
        """Artifacts whose ref starts with ``prefix`` (a run id, ``run_id/``, ...), sorted by ref."""
        if not isinstance(prefix, str):
            raise InvalidInputError("prefix", "a string", got=prefix)
        # substr, not LIKE, so '%' and '_' in a prefix mean themselves.
        rows = self.database.query(
            """
            SELECT ref, length(text) AS size, created_at, updated_at FROM artifacts
            WHERE substr(ref, 1, ?) = ? ORDER BY ref
            """,
            (len(prefix), prefix),
        )
        return [
            ArtifactInfo(
                row["ref"],
                row["size"],
                datetime.fromisoformat(row["created_at"]),
                datetime.fromisoformat(row["updated_at"]),
            )
            for row in rows
        ]

    def delete(self, ref: str) -> bool:
        """Remove ``ref`` and its stamps; False when there was no such artifact."""
        ref = check_ref(ref)
        with self.database.exclusive_transaction() as database:
            existed = bool(database.query("SELECT 1 FROM artifacts WHERE ref = ?", (ref,)))
            database.execute("DELETE FROM artifacts WHERE ref = ?", (ref,))
            database.execute("DELETE FROM stamps WHERE ref = ?", (ref,))
        return existed

    # -- stamps ------------------------------------------------------------

    def add_stamps(self, stamps: Iterable[Stamp]) -> None:
        """Record the stamps of one scoring run together."""
        now = timestamp()
        rows = [
            (
                check_ref(stamp.ref, "stamp.ref"),
                stamp.run_id,
                stamp.evaluator,
                stamp.score,
                stamp.verdict,
                stamp.beam_rank,
                int(stamp.pruned),
                stamp.reason,
                stamp.created_at.isoformat() if stamp.created_at else now,
            )
            for stamp in stamps
        ]
        with self.database.transaction() as database:
            database.execute_many(
                """
                INSERT INTO stamps (ref, run_id, evaluator, score, verdict, beam_rank, pruned, reason, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                rows,
            )

    def stamps(self, ref: str | None = None, *, run_id: str | None = None) -> list[Stamp]:
        """The stamps on ``ref``, or of the scoring run ``run_id``, or both; oldest first."""
        if ref is None and run_id is None:
            raise InvalidInputError("ref", "a ref or a run_id to read stamps of")
        conditions, values = [], []
        if ref is not None:
            conditions.append("ref = ?")
            values.append(check_ref(ref))
        if run_id is not None:
            conditions.append("run_id = ?")
            values.append(run_id)
        rows = self.database.query(
            f"""
            SELECT ref, run_id, evaluator, score, verdict, beam_rank, pruned, reason, created_at
            FROM stamps WHERE {" AND ".join(conditions)} ORDER BY id
            """,
            values,
        )
        return [
            Stamp(
                row["ref"],
                row["run_id"],
                row["evaluator"],
                row["score"],
                row["verdict"],
                row["beam_rank"],
                bool(row["pruned"]),
                row["reason"],
                datetime.fromisoformat(row["created_at"]),
            )
            for row in rows
        ]

    # -- registered types ----------------------------------------------------

    def put_type(self, name: str, description: str) -> None:
        """Store a type for ``validate:<name>``. Prefer :func:`decirank.register_validation_type`,
        which also refuses the names of built-in types."""
        name = check_type_name(name)
        if not isinstance(description, str) or not description.strip():
            raise InvalidInputError("description", "a non-empty string", got=description)
        self.database.execute(
            """
            INSERT INTO types (name, description, created_at) VALUES (?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET description = excluded.description
            """,
            (name, description, timestamp()),
        )

    def get_type(self, name: str) -> RegisteredType | None:
        rows = self.database.query("SELECT name, description FROM types WHERE name = ?", (name,))
        return RegisteredType(rows[0]["name"], rows[0]["description"]) if rows else None

    def types(self) -> list[RegisteredType]:
        rows = self.database.query("SELECT name, description FROM types ORDER BY name")
        return [RegisteredType(row["name"], row["description"]) for row in rows]

    def delete_type(self, name: str) -> bool:
        with self.database.exclusive_transaction() as database:
            existed = bool(database.query("SELECT 1 FROM types WHERE name = ?", (name,)))
            database.execute("DELETE FROM types WHERE name = ?", (name,))
        return existed
