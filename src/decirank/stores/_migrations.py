"""Named, append-only schema migrations, applied on every open.

Each store lists its migrations in order. A database records the ones it has
in a ``_migrations`` table; opening it applies the rest, all in one
transaction that holds the write lock, so two processes opening a new file
at once cannot both create it. A migration is never edited once released:
changes are new migrations at the end of the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import StoreError
from ._database import Database, timestamp

__all__ = ["Migration", "migrate"]


@dataclass(frozen=True)
class Migration:
    name: str
    statements: tuple[str, ...]


def migrate(database: Database, migrations: Sequence[Migration]) -> list[str]:
    """Apply the migrations ``database`` lacks, in order; return their names."""
    names = [migration.name for migration in migrations]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise StoreError(f"{database.what}: migration names must be unique; listed more than once: {repeated}")
    if set(names) <= _applied(database):
        return []  # the common case: no write lock taken
    applied_now = []
    with database.exclusive_transaction():
        database.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        applied = _applied(database)
        for migration in migrations:
            if migration.name in applied:
                continue
            for statement in migration.statements:
                database.execute(statement)
            database.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (migration.name, timestamp()),
            )
            applied_now.append(migration.name)
    return applied_now


def _applied(database: Database) -> set[str]:
    if not database.table_exists("_migrations"):
        return set()
    return {row["name"] for row in database.query("SELECT name FROM _migrations")}
