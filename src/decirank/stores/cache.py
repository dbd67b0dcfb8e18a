"""The decision cache: the same question to the same model is answered once.

Off by default. ``DECIRANK_CACHE=on`` (or ``off``) decides; without it the
config's ``[cache] enabled = true`` does. The key is a hash of the canonical
JSON of the model name, the state and the questions, so any change to any of
them is a miss. Only answers that passed the response check are stored. A
hit costs nothing and is recorded in the run log as a cached model call.

The cache is a SQLite file, ``cache.db`` in the data directory, or the path
in ``DECIRANK_CACHE_DB``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from .._config import switch
from .._jsonpath import canonical_json
from .._paths import data_file
from ..errors import InvalidAnswerError
from ..types.answers import DecisionResponse, Note, Usage
from ..types.questions import DecisionRequest
from ..types.records import answers_from_data, answers_to_data, request_to_data
from ._database import Database, SQLiteDatabase, timestamp
from ._migrations import Migration, migrate

__all__ = ["MIGRATIONS", "DecisionCache", "cache_key", "current_cache"]

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "m001_decisions",
        (
            """
            CREATE TABLE decisions (
                key TEXT PRIMARY KEY,
                model TEXT NOT NULL,
                answers TEXT NOT NULL,
                created_at TEXT NOT NULL
            )
            """,
        ),
    ),
    # What the model said about how it read the texts (a text cut short, not English) comes
    # back with its answers, so a hit carries the same notes as the call that was stored.
    Migration("m002_notes", ("ALTER TABLE decisions ADD COLUMN notes TEXT",)),
)


def cache_key(model: str, request: DecisionRequest) -> str:
    return hashlib.sha256(canonical_json({"model": model, **request_to_data(request)}).encode()).hexdigest()


class DecisionCache:
    def __init__(self, database: Database) -> None:
        self.database = database
        migrate(database, MIGRATIONS)

    @classmethod
    def open(cls, path: str | Path) -> DecisionCache:
        return cls(SQLiteDatabase(Path(path), what="decision cache"))

    @property
    def location(self) -> str:
        return self.database.location

    def get(self, model: str, request: DecisionRequest) -> DecisionResponse | None:
        """The stored answers as a response that cost nothing, or None on a miss."""
        rows = self.database.query("SELECT answers, notes FROM decisions WHERE key = ?", (cache_key(model, request),))
        if not rows:
            return None
        try:
            answers = answers_from_data(json.loads(rows[0]["answers"]))
            notes = {
                qid: tuple(Note(kind, message, about) for kind, message, about in noted)
                for qid, noted in json.loads(rows[0]["notes"] or "{}").items()
            }
        except (json.JSONDecodeError, InvalidAnswerError, TypeError, ValueError, AttributeError):
            return None  # a row this version cannot read is a miss, and the next answer replaces it
        return DecisionResponse(model, answers, Usage(), cached=True, notes=notes)

    def put(self, request: DecisionRequest, response: DecisionResponse) -> None:
        self.database.execute(
            "INSERT INTO decisions (key, model, answers, notes, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET answers = excluded.answers, notes = excluded.notes, "
            "created_at = excluded.created_at",
            (
                cache_key(response.model, request),
                response.model,
                json.dumps(answers_to_data(response.answers)),
                json.dumps(
                    {qid: [[n.kind, n.message, n.about] for n in noted] for qid, noted in response.notes.items()}
                ),
                timestamp(),
            ),
        )

    def count(self) -> int:
        return int(self.database.query("SELECT COUNT(*) AS n FROM decisions")[0]["n"])

    def close(self) -> None:
        self.database.close()


def cache_enabled() -> bool:
    return switch("DECIRANK_CACHE", lambda config: config.cache_enabled)


_default: tuple[Path, DecisionCache] | None = None
_lock = threading.Lock()


def current_cache() -> DecisionCache | None:
    """The decision cache when it is enabled, else None."""
    global _default
    if not cache_enabled():
        return None
    path = data_file("cache.db", variable="DECIRANK_CACHE_DB")
    with _lock:
        if _default is None or _default[0] != path:
            _default = (path, DecisionCache.open(path))
        return _default[1]
