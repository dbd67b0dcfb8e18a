"""The run log: every tool call is a run, every model call a child run.

A tool run is written when the call starts (status ``running``) and updated
when it ends (``success``, ``failed`` or ``cancelled``, with its outputs and
the usage of all its children). Each model call, every failover attempt and
cache hit included, is a child row written when it ends, carrying its
request, answers, error, tokens, cost and timing.

Where it goes, first match wins:

- :func:`set_runlog` from Python (``set_runlog(None)`` turns it off);
- ``DECIRANK_RUNLOG=off`` turns it off;
- ``DECIRANK_DATABASE_URL=postgresql://...`` writes to PostgreSQL;
- ``DECIRANK_RUNLOG=/some/file.db``, else ``runs.db`` in the data directory.

Durability
----------

*A tool call that returns has its run committed.* :meth:`RunLog.finish_run`
returns only once the run's final row, and every row written before it (its
opening row, its model calls), is committed; if that row cannot be written
the tool call fails with :class:`~decirank.errors.StoreError` instead of
returning. Rows are still written many at a time: callers finishing at once
share one commit (group commit, see :class:`~._database.BatchWriter`), so the
price of the guarantee is one commit per tool call when calls come one at a
time, and less under concurrency (``benchmarks/runlog_overhead.py``: about
0.3 ms per lexical rank call on a busy 2-core machine, against 0.14 ms when
runs were acknowledged before their commit). There is no window in which an
acknowledged run lives only in memory.

What "committed" survives: on PostgreSQL, what the server promises for a
commit. On SQLite (WAL, ``synchronous = NORMAL``) a commit is in the log
file when the call returns, so it survives the process dying by any means,
kill -9 included; an operating-system crash or power cut may lose the
commits since the last checkpoint, as SQLite documents for that setting.

What is not acknowledged may be lost: a run's opening row (status
``running``) waits for company, at most ``2 * BatchWriter.LINGER_SECONDS``,
so a process killed just after starting a call may leave no trace of it.

One bad value never costs another run: texts are stored so that any Python
string can be written (JSON columns escape everything outside ASCII, lone
surrogates included, and read back exactly; plain text columns show lone
surrogates and NUL as backslash escapes), and a row the database still
refuses fails only its own tool call; the runs sharing its batch commit.

What is kept of texts
---------------------

Requests hold users' texts, often the same ones again and again (a
document asked about in a thousand calls). In ``full`` mode (the default)
every string of a model call's request at least :data:`SHARED_TEXT_CHARS`
long is kept once, content-addressed, in ``run_texts`` (by its SHA-256),
and the request refers to it as ``{"$text": "<sha256>"}``; reading a run
puts the texts back. A repeated call grows the log by its metadata only. In
``hashes`` mode (``DECIRANK_RUNLOG_TEXTS=hashes``, ``[runlog] texts`` in the
config, ``decirank serve --runlog-texts hashes``, or :func:`texts_kept` for
the calls in a block) no text is kept at all: every string of a run's
inputs, outputs and requests but a question's ``type`` becomes
``{"sha256": ..., "length": ...}``, and the run's ``texts`` column says
``hashes``.

Retention
---------

:meth:`RunLog.prune` removes whole finished runs (a top-level run with
every run below it, never one with any part still ``running``), oldest
first: those started before a time, or as many as bring the log under a
size; then the stored texts no run refers to any longer. ``[runlog]
keep_days`` and ``max_mb`` in the config have a background thread do so
when the process opens its log, and every :data:`RETENTION_INTERVAL`
seconds after, a few hundred runs per transaction so writers never wait
long.

Runs left ``running`` by a process that died are marked ``interrupted``
(error type ``Interrupted``) the next time any process opens the log. Each
opening row records its writer: host name, boot id, PID namespace, PID and
the process's start time. A writer counts as dead only when it is on this
host (same host name, PID namespace and boot) and no process with its PID
and start time exists, or when its host was rebooted since. Rows of writers
on other hosts, or in other PID namespaces, are left alone: nothing here can
tell whether those are alive. A live run marked by mistake would still be
set to its real status when it ends.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .._config import RUNLOG_TEXTS, load_config
from .._jsonpath import MAX_NESTING
from .._paths import data_dir, data_file
from ..errors import ConfigError, InvalidInputError
from ._database import (
    BatchWriter,
    Database,
    PostgresDatabase,
    SQLiteDatabase,
    hide_password,
    is_postgres_url,
    timestamp,
)
from ._migrations import Migration, migrate

__all__ = [
    "MIGRATIONS",
    "RUN_STATUSES",
    "RUNLOG_TEXTS",
    "RunLog",
    "configured_location",
    "configured_texts",
    "off_marker",
    "retention_settings",
    "texts_kept",
    "current_parent_run",
    "current_runlog",
    "new_run_id",
    "note_run_started",
    "noting_runs",
    "reset_runlog",
    "set_runlog",
    "summarize",
    "under_parent_run",
    "writer_token",
]

#: ``interrupted``: the process writing the run ended (was killed) before the run did.
RUN_STATUSES = ("running", "success", "failed", "cancelled", "interrupted")
_OFF = frozenset({"off", "0", "false", "no", "none"})

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "m001_runs",
        (
            """
            CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                parent_id TEXT,
                kind TEXT,
                tool TEXT,
                role TEXT,
                model TEXT,
                provider TEXT,
                status TEXT NOT NULL,
                decision INTEGER,
                attempt INTEGER,
                cached INTEGER,
                inputs TEXT,
                outputs TEXT,
                request TEXT,
                answers TEXT,
                error_type TEXT,
                error TEXT,
                input_tokens INTEGER,
                output_tokens INTEGER,
                cached_tokens INTEGER,
                cost DOUBLE PRECISION,
                currency TEXT,
                calls INTEGER,
                started_at TEXT,
                ended_at TEXT,
                duration_ms DOUBLE PRECISION
            )
            """,
            "CREATE INDEX runs_parent ON runs (parent_id)",
            "CREATE INDEX runs_started ON runs (kind, started_at)",
            "CREATE INDEX runs_model ON runs (kind, model)",
        ),
    ),
    Migration(
        "m002_run_writer",
        (
            # Who wrote a run's opening row (see writer_token), so a dead writer's open runs can be closed.
            "ALTER TABLE runs ADD COLUMN writer TEXT",
            # Only open runs are ever looked up by writer; the index holds nothing else.
            "CREATE INDEX runs_open ON runs (writer) WHERE status = 'running'",
            # Runs opened before writers were recorded cannot be told apart: they are closed now. A
            # run of an older process still alive is set to its real status when it ends.
            "UPDATE runs SET status = 'interrupted', error_type = 'Interrupted', "
            "error = 'the run was open when the log was upgraded; its process is not known' "
            "WHERE status = 'running'",
        ),
    ),
    Migration(
        "m003_shared_texts",
        (
            # Each long text of a request, once, by the SHA-256 of its UTF-8 (see "What is kept of texts").
            "CREATE TABLE run_texts (hash TEXT PRIMARY KEY, length INTEGER NOT NULL, text TEXT NOT NULL)",
            # Which rows refer to which texts: pruning a run frees the texts no other run refers to.
            "CREATE TABLE run_text_refs (run_id TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (run_id, hash))",
            "CREATE INDEX run_text_refs_hash ON run_text_refs (hash)",
            # "full" or "hashes": what the row kept of its texts (NULL, from before: full).
            "ALTER TABLE runs ADD COLUMN texts TEXT",
        ),
    ),
)

#: Strings of a request at least this long are kept once in ``run_texts`` and referred to by hash.
SHARED_TEXT_CHARS = 256
#: Seconds between two background retention passes.
RETENTION_INTERVAL = 600.0
#: Top-level runs removed per transaction when pruning.
PRUNE_BATCH = 200

_COLUMNS = (
    "id", "parent_id", "kind", "tool", "role", "model", "provider", "status", "decision", "attempt", "cached",
    "inputs", "outputs", "request", "answers", "error_type", "error", "input_tokens", "output_tokens",
    "cached_tokens", "cost", "currency", "calls", "started_at", "ended_at", "duration_ms", "writer", "texts",
)  # fmt: skip
# Rows are written at a run's start and again at its end, in batches (see RunLog._write).
_UPSERT = (
    f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' for _ in _COLUMNS)}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{column} = COALESCE(excluded.{column}, runs.{column})" for column in _COLUMNS[1:])
)
# The upsert keeps what a write leaves out; a run opened again (a resumed batch) has no error yet.
_CLEAR_ERROR = "UPDATE runs SET error_type = NULL, error = NULL WHERE id = ?"
# Columns a listing shows; the request and answers stay in ``show``.
_SUMMARY_COLUMNS = (
    "id, parent_id, kind, tool, role, model, provider, status, decision, attempt, cached, error_type, error, "
    "input_tokens, output_tokens, cached_tokens, cost, currency, calls, started_at, ended_at, duration_ms, texts"
)
_INSERT_TEXT = "INSERT INTO run_texts (hash, length, text) VALUES (?, ?, ?) ON CONFLICT (hash) DO NOTHING"
_INSERT_TEXT_REF = "INSERT INTO run_text_refs (run_id, hash) VALUES (?, ?) ON CONFLICT (run_id, hash) DO NOTHING"
_JSON_COLUMNS = ("inputs", "outputs", "request", "answers")


#: The longest run id (or prefix) looked up: ids are 32 hex digits; room for ids of other writers.
MAX_RUN_ID_LENGTH = 256


def new_run_id() -> str:
    """32 random hex digits: any dozen of the first are enough to name a run."""
    return uuid.uuid4().hex


# One encoder for every row: json.dumps with options builds a new one per call. ASCII out, so
# any Python string can be stored (a lone surrogate is a \\udfff escape) and reads back exactly.
_encode_json = json.JSONEncoder(ensure_ascii=True, default=str).encode


def _json(value: Any) -> str | None:
    return None if value is None else _encode_json(value)


def _text(value: Any) -> str | None:
    """``value`` as text any database takes: lone surrogates and NUL become backslash escapes."""
    if value is None:
        return None
    if not isinstance(value, str):
        value = str(value)
    if value.isascii():
        return value.replace("\x00", "\\x00") if "\x00" in value else value
    return value.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


_INT64 = 2**63


def _salvage(params: Sequence[Any]) -> tuple[Any, ...]:
    """A row the database refused, made as safe as it can be: numbers it cannot hold dropped, all text plain."""
    safer: list[Any] = []
    for value in params:
        if isinstance(value, bool) or value is None:
            safer.append(value)
        elif isinstance(value, int):
            safer.append(value if -_INT64 <= value < _INT64 else None)
        elif isinstance(value, float):
            safer.append(value if math.isfinite(value) else None)
        else:
            safer.append(_text(value))
    return tuple(safer)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _hashed(value: Any, key: Any = None) -> Any:
    """``value`` with every string replaced by its SHA-256 and length; a question's ``type`` is kept, so the
    row still says what was asked, and so are mapping keys (ids, option keys)."""
    if isinstance(value, str):
        if key == "type":
            return value
        return {"sha256": _digest(value), "length": len(value)}
    if isinstance(value, dict | Mapping):
        return {name: _hashed(item, name) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_hashed(item) for item in value]
    return value


def _shared(value: Any, texts: dict[str, str]) -> Any:
    """``value`` with each string of at least :data:`SHARED_TEXT_CHARS` characters replaced by
    ``{"$text": sha256}``; the texts themselves are put in ``texts`` (sha256 -> text), to be stored once."""
    if isinstance(value, str):
        if len(value) < SHARED_TEXT_CHARS:
            return value
        text = _text(value)
        digest = _digest(text)
        texts[digest] = text
        return {"$text": digest}
    if isinstance(value, dict | Mapping):
        return {name: _shared(item, texts) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_shared(item, texts) for item in value]
    return value


def _text_references(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$text"), str):
            found.add(value["$text"])
            return
        for item in value.values():
            _text_references(item, found)
    elif isinstance(value, list):
        for item in value:
            _text_references(item, found)


def _with_texts(value: Any, texts: Mapping[str, str]) -> Any:
    """``value`` with each ``{"$text": sha256}`` put back as its text (left as it is if the text is gone)."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$text"), str):
            return texts.get(value["$text"], value)
        return {name: _with_texts(item, texts) for name, item in value.items()}
    if isinstance(value, list):
        return [_with_texts(item, texts) for item in value]
    return value


def summarize(value: Any, *, max_text: int = 200, max_items: int = 5, max_depth: int = 10) -> Any:
    """A short copy of ``value`` for a run's inputs and outputs: long texts and lists cut, deep nesting too.

    A stored row is read back by every run list, so it is kept small and shallow whatever it was given.
    """

    def cut(value: Any, depth: int) -> Any:
        # Concrete types first: this runs on every tool call, and ABC checks are slow.
        if isinstance(value, str):
            return value if len(value) <= max_text else value[:max_text] + f"… (+{len(value) - max_text} chars)"
        if value is None or isinstance(value, bool | int | float):
            return value
        if isinstance(value, dict | Mapping | list | tuple) and depth >= max_depth:
            return f"… ({len(value)} more nested)"
        if isinstance(value, dict | Mapping):
            return {str(key): cut(item, depth + 1) for key, item in value.items()}
        if isinstance(value, list | tuple):
            shown = [cut(item, depth + 1) for item in value[:max_items]]
            if len(value) > max_items:
                shown.append(f"… (+{len(value) - max_items} more)")
            return shown
        return str(value)

    return cut(value, 0)


def _usage_columns(usage: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "input_tokens": usage.get("input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0),
        "cached_tokens": usage.get("cached_tokens", 0),
        "cost": usage.get("cost"),
        "currency": usage.get("currency"),
        "calls": usage.get("calls", 0),
    }


def _percentile(sorted_values: list[float], fraction: float) -> float | None:
    """Nearest rank: the smallest value with at least ``fraction`` of the values at or below it."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


class RunLog:
    """Runs and their children in one ``runs`` table; safe to share between threads."""

    def __init__(self, database: Database) -> None:
        self.database = database
        migrate(database, MIGRATIONS)
        # A run's last row is waited for (see "Durability" above); the rest ride along. Readers flush first.
        self._writer = BatchWriter(database, salvage=_salvage)
        #: The background retention of the process's own log, when the config asks for one.
        self.retention: _Retention | None = None
        self.mark_interrupted()

    @classmethod
    def open(cls, target: str | Path) -> RunLog:
        """A SQLite file path, or a ``postgresql://`` URL."""
        if isinstance(target, str) and is_postgres_url(target):
            return cls(PostgresDatabase(target, what="run log"))
        return cls(SQLiteDatabase(Path(target), what="run log", background_checkpoints=True))

    @property
    def location(self) -> str:
        return self.database.location

    def flush(self) -> None:
        """Wait until every row written so far is committed (or has failed, which its run's caller hears of)."""
        self._writer.flush()

    def close(self) -> None:
        if self.retention is not None:
            self.retention.stop()
        self.flush()
        self.database.close()

    # -- writing ---------------------------------------------------------------------------
    #
    # Every write is the same upsert, so the writer can send a whole batch in one
    # executemany, in order: a column left None keeps what the row already holds.

    def _write(self, key: str, *, wait: bool = False, **values: Any) -> None:
        """Write a row; ``key`` is the tool run it belongs to, whose closing row waits and hears of failures."""
        self._writer.submit(_UPSERT, tuple(map(values.get, _COLUMNS)), key=key, wait=wait)

    def check_writable(self) -> None:
        """Raise :class:`~decirank.errors.StoreError` unless a run could be written now (a readiness probe asks).

        The statement takes the write lock, as a real write does, and changes no row.
        """
        with self.database.transaction():
            self.database.execute("UPDATE runs SET status = status WHERE id IS NULL")

    def mark_interrupted(self) -> int:
        """Mark ``interrupted`` the runs left ``running`` by writers that are gone; return how many."""
        writers = [
            row["writer"]
            for row in self.database.query("SELECT DISTINCT writer FROM runs WHERE status = 'running'")
            if row["writer"] is not None
        ]
        dead = [writer for writer in writers if _writer_is_gone(writer)]
        marked = 0
        for writer in dead:
            with self.database.transaction():  # no RETURNING: SQLite has it only since 3.35
                open_runs = self.database.query(
                    "SELECT COUNT(*) AS n FROM runs WHERE status = 'running' AND writer = ?", (writer,)
                )
                self.database.execute(
                    "UPDATE runs SET status = 'interrupted', error_type = 'Interrupted', error = ? "
                    "WHERE status = 'running' AND writer = ?",
                    (_interrupted_message(writer), writer),
                )
            marked += int(open_runs[0]["n"])
        return marked

    def start_run(
        self, run_id: str, *, tool: str, role: str | None, inputs: Any, started: float, parent_id: str | None = None
    ) -> None:
        """Open a tool run; ``parent_id`` makes it a child, as a plan's steps are of the plan's run.

        A run opened again (a batch resumed after it was interrupted) loses the error it was closed with.
        """
        texts = configured_texts()
        self._write(
            run_id,
            id=run_id,
            parent_id=parent_id,
            kind="tool",
            tool=_text(tool),
            role=_text(role),
            status="running",
            inputs=_json(_hashed(inputs) if texts == "hashes" else inputs),
            started_at=timestamp(started),
            writer=_WRITER.token,
            texts=texts,
        )
        self._writer.submit(_CLEAR_ERROR, (run_id,), key=run_id)

    def finish_run(
        self,
        run_id: str,
        *,
        status: str,
        models: str | None,
        outputs: Any,
        error: Mapping[str, Any] | None,
        usage: Mapping[str, Any],
        ended: float,
        duration: float,
    ) -> None:
        """Close a tool run; ``usage`` is the sum over its children (``Usage.to_dict()``).

        Returns once the run, its model calls included, is committed; raises
        :class:`~decirank.errors.StoreError` when any of its rows could not be.
        """
        if configured_texts() == "hashes":
            outputs = _hashed(outputs)
        self._write(
            run_id,
            wait=True,
            id=run_id,
            status=_check_status(status),
            model=_text(models),
            outputs=_json(outputs),
            error_type=_text(error["type"]) if error else None,
            error=_text(error["message"]) if error else None,
            ended_at=timestamp(ended),
            duration_ms=duration * 1000,
            **_usage_columns(usage),
        )

    def record_model_call(
        self,
        *,
        parent_id: str | None,
        tool: str,
        role: str,
        model: str,
        provider: str,
        status: str,
        decision: int,
        attempt: int,
        cached: bool,
        request: Any,
        answers: Any,
        error: Mapping[str, Any] | None,
        usage: Mapping[str, Any],
        started: float,
        duration: float,
    ) -> str:
        """One finished model call (or cache hit); returns its id."""
        run_id = new_run_id()
        key = parent_id or run_id
        texts = configured_texts()
        if texts == "hashes":
            request = _hashed(request)
        else:
            shared: dict[str, str] = {}
            request = _shared(request, shared)
            # Before the row that refers to them, in the same order: a committed row never lacks its texts.
            for digest, text in shared.items():
                self._writer.submit(_INSERT_TEXT, (digest, len(text), text), key=key)
            for digest in shared:
                self._writer.submit(_INSERT_TEXT_REF, (run_id, digest), key=key)
        self._write(
            key,
            id=run_id,
            parent_id=parent_id,
            kind="model",
            tool=_text(tool),
            role=_text(role),
            model=_text(model),
            provider=_text(provider),
            status=_check_status(status),
            decision=decision,
            attempt=attempt,
            cached=int(cached),
            request=_json(request),
            answers=_json(answers),
            texts=texts,
            error_type=_text(error["type"]) if error else None,
            error=_text(error["message"]) if error else None,
            started_at=timestamp(started),
            ended_at=timestamp(started + duration),
            duration_ms=duration * 1000,
            **_usage_columns(usage),
        )
        return run_id

    # -- reading ---------------------------------------------------------------------------

    def runs(
        self,
        *,
        limit: int | None = 20,
        tool: str | None = None,
        status: str | None = None,
        model: str | None = None,
        with_inputs: bool = False,
    ) -> list[dict[str, Any]]:
        """Tool runs, newest first; ``model`` keeps the runs answered by or calling that model.

        ``with_inputs`` adds each run's recorded (shortened) inputs.
        """
        self.flush()
        columns = f"{_SUMMARY_COLUMNS}, inputs" if with_inputs else _SUMMARY_COLUMNS
        sql = f"SELECT {columns} FROM runs WHERE kind = 'tool'"
        params: list[Any] = []
        if tool is not None:
            sql += " AND tool = ?"
            params.append(tool)
        if status is not None:
            sql += " AND status = ?"
            params.append(_check_status(status))
        if model is not None:
            sql += " AND (model = ? OR id IN (SELECT parent_id FROM runs WHERE kind = 'model' AND model = ?))"
            params += [model, model]
        sql += " ORDER BY started_at DESC, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        if with_inputs:
            return [_decode(row) for row in self.database.query(sql, params)]
        return [
            {**row, "cached": bool(row["cached"]), "texts": row["texts"] or "full"}
            for row in self.database.query(sql, params)
        ]

    def run(self, run_id: str) -> dict[str, Any]:
        """One run by id or unique id prefix, with its model calls as ``children``."""
        self.flush()
        # An id longer than any the log writes names no run; as a LIKE pattern it could pass SQLite's
        # pattern limit (50,000 bytes), which is an error, not a miss.
        matches = self.database.query(
            "SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at LIMIT 2", (_escape_like(run_id) + "%",)
        ) if run_id and len(run_id) <= MAX_RUN_ID_LENGTH else []
        if len(matches) != 1:
            detail = "no run has that id" if not matches else "more than one run starts with it; give more of it"
            raise InvalidInputError("run id", "the id (or a unique prefix) of a recorded run", detail=detail)
        run = _decode(matches[0])
        children = self.database.query(
            "SELECT * FROM runs WHERE parent_id = ? ORDER BY started_at, decision, attempt", (run["id"],)
        )
        run["children"] = [_decode(child) for child in children]
        references: set[str] = set()
        for row in (run, *run["children"]):
            _text_references(row.get("request"), references)
        if references:
            texts = self._stored_texts(references)
            for row in (run, *run["children"]):
                if row.get("request") is not None:
                    row["request"] = _with_texts(row["request"], texts)
        return run

    def _stored_texts(self, digests: set[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        ordered = sorted(digests)
        for start in range(0, len(ordered), 500):
            part = ordered[start : start + 500]
            rows = self.database.query(
                f"SELECT hash, text FROM run_texts WHERE hash IN ({', '.join('?' for _ in part)})", part
            )
            found.update((row["hash"], row["text"]) for row in rows)
        return found

    def count(self, *, kind: str | None = None) -> int:
        self.flush()
        sql, params = "SELECT COUNT(*) AS n FROM runs", []
        if kind is not None:
            sql += " WHERE kind = ?"
            params.append(kind)
        return int(self.database.query(sql, params)[0]["n"])

    def stats(self) -> dict[str, Any]:
        """Tool runs by tool and status; per model: calls, failures, cache hits, tokens, cost, latency."""
        self.flush()
        tools = self.database.query(
            "SELECT tool, status, COUNT(*) AS runs FROM runs WHERE kind = 'tool' "
            "GROUP BY tool, status ORDER BY tool, status"
        )
        models = self.database.query(
            """
            SELECT model, COUNT(*) AS calls,
                SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed,
                SUM(cached) AS cache_hits,
                SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
                SUM(cost) AS cost, MIN(currency) AS currency
            FROM runs WHERE kind = 'model' GROUP BY model ORDER BY model
            """
        )
        # Latency is the model's: cache hits are left out. Percentiles are taken here, not in
        # SQL, because SQLite has no percentile function.
        durations: dict[str, list[float]] = {}
        for row in self.database.query(
            "SELECT model, duration_ms FROM runs WHERE kind = 'model' AND cached = 0 AND duration_ms IS NOT NULL"
        ):
            durations.setdefault(row["model"], []).append(float(row["duration_ms"]))
        for row in models:
            for key in ("calls", "failed", "cache_hits", "input_tokens", "output_tokens"):
                row[key] = int(row[key] or 0)
            latencies = sorted(durations.get(row["model"], []))
            row["p50_ms"] = _percentile(latencies, 0.50)
            row["p95_ms"] = _percentile(latencies, 0.95)
        total = sum(int(row["runs"]) for row in tools)
        return {"runs": total, "by_tool": [{**row, "runs": int(row["runs"])} for row in tools], "models": models}


    # -- retention -------------------------------------------------------------------------

    def size(self) -> int:
        """Bytes the runs take: SQLite's pages in use (a removed run's pages are reused, not returned), or
        on PostgreSQL the length of what the rows hold."""
        if isinstance(self.database, SQLiteDatabase):
            pages = self.database.query("PRAGMA page_count")[0]
            free = self.database.query("PRAGMA freelist_count")[0]
            page_size = self.database.query("PRAGMA page_size")[0]
            return (int(next(iter(pages.values()))) - int(next(iter(free.values())))) * int(
                next(iter(page_size.values()))
            )
        columns = " + ".join(f"COALESCE(OCTET_LENGTH({column}), 0)" for column in (*_JSON_COLUMNS, "error"))
        rows = self.database.query(f"SELECT COALESCE(SUM({columns}), 0) AS n FROM runs")
        texts = self.database.query("SELECT COALESCE(SUM(OCTET_LENGTH(text)), 0) AS n FROM run_texts")
        return int(rows[0]["n"]) + int(texts[0]["n"])

    def prune(
        self, *, before: float | None = None, max_bytes: int | None = None, pause: float = 0.0
    ) -> dict[str, int]:
        """Remove whole finished runs, oldest first: those started before ``before`` (seconds since the epoch),
        then as many as bring :meth:`size` to ``max_bytes`` or under; and the texts no run refers to any more.

        A run goes with every run below it (its model calls, a plan's steps), and never while any of them is
        ``running``. Each batch of :data:`PRUNE_BATCH` top-level runs is one transaction, with ``pause``
        seconds between them for other writers. Returns how many runs (of every kind) and texts were removed.
        """
        self.flush()
        removed = {"runs": 0, "texts": 0}
        if before is not None:
            cutoff = timestamp(before)
            while self._prune_batch("AND COALESCE(r.started_at, r.ended_at) < ?", [cutoff], removed):
                time.sleep(pause)
        if max_bytes is not None:
            # A tenth of the runs at a time: each step frees about a tenth, so little more goes than must.
            tools = self.count(kind="tool")
            step = max(1, min(PRUNE_BATCH, tools // 10))
            while self.size() > max_bytes and self._prune_batch("", [], removed, limit=step):
                time.sleep(pause)
        return removed

    def _prune_batch(
        self, condition: str, params: list[Any], removed: dict[str, int], *, limit: int = PRUNE_BATCH
    ) -> bool:
        """Remove the oldest ``limit`` finished top-level runs meeting ``condition``; whether any went."""
        database = self.database
        with database.transaction():
            # Top-level: no parent, or a parent no longer in the log (a row whose parent was never written).
            roots = [
                row["id"]
                for row in database.query(
                    "SELECT r.id FROM runs r WHERE r.status != 'running' AND (r.parent_id IS NULL OR NOT EXISTS "
                    f"(SELECT 1 FROM runs p WHERE p.id = r.parent_id)) {condition} "
                    "ORDER BY COALESCE(r.started_at, r.ended_at), r.id LIMIT ?",
                    [*params, limit],
                )
            ]
            if not roots:
                return False
            # UNION, not UNION ALL: a parent loop in a damaged log ends the walk instead of looping forever.
            tree = database.query(
                "WITH RECURSIVE tree(root, id, status) AS ("
                f"SELECT id, id, status FROM runs WHERE id IN ({', '.join('?' for _ in roots)}) "
                "UNION SELECT tree.root, runs.id, runs.status FROM runs JOIN tree ON runs.parent_id = tree.id) "
                "SELECT root, id, status FROM tree",
                roots,
            )
            busy = {row["root"] for row in tree if row["status"] == "running"}
            doomed = sorted({row["id"] for row in tree if row["root"] not in busy})
            if not doomed:
                return False
            freed: set[str] = set()
            for start in range(0, len(doomed), 500):
                part = doomed[start : start + 500]
                marks = ", ".join("?" for _ in part)
                freed.update(
                    row["hash"]
                    for row in database.query(f"SELECT DISTINCT hash FROM run_text_refs WHERE run_id IN ({marks})", part)
                )
                database.execute(f"DELETE FROM run_text_refs WHERE run_id IN ({marks})", part)
                database.execute(f"DELETE FROM runs WHERE id IN ({marks})", part)
            hashes = sorted(freed)
            for start in range(0, len(hashes), 500):
                part = hashes[start : start + 500]
                unreferenced = (
                    f"hash IN ({', '.join('?' for _ in part)}) AND NOT EXISTS "
                    "(SELECT 1 FROM run_text_refs x WHERE x.hash = run_texts.hash)"
                )
                removed["texts"] += int(
                    database.query(f"SELECT COUNT(*) AS n FROM run_texts WHERE {unreferenced}", part)[0]["n"]
                )
                database.execute(f"DELETE FROM run_texts WHERE {unreferenced}", part)
        removed["runs"] += len(doomed)
        return True

    def compact(self) -> None:
        """Give the pages removed runs freed back to the file system (SQLite's VACUUM; PostgreSQL's own)."""
        self.flush()
        if isinstance(self.database, SQLiteDatabase):
            self.database.execute("VACUUM")

    def status(self) -> dict[str, Any]:
        """Where the log is, its size, rows, oldest run, and the settings that govern it."""
        self.flush()
        counts = {
            row["kind"]: int(row["n"])
            for row in self.database.query("SELECT kind, COUNT(*) AS n FROM runs GROUP BY kind")
        }
        oldest = self.database.query("SELECT MIN(started_at) AS oldest FROM runs WHERE kind = 'tool'")[0]["oldest"]
        texts = int(self.database.query("SELECT COUNT(*) AS n FROM run_texts")[0]["n"])
        file_bytes = None
        if isinstance(self.database, SQLiteDatabase):
            path = self.database.path
            file_bytes = sum(
                candidate.stat().st_size
                for candidate in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))
                if candidate.exists()
            )
        keep_days, max_mb = retention_settings()
        return {
            "location": self.location,
            "texts": configured_texts(),
            "bytes": self.size(),
            "file_bytes": file_bytes,
            "runs": counts.get("tool", 0),
            "model_calls": counts.get("model", 0),
            "stored_texts": texts,
            "oldest": oldest,
            "keep_days": keep_days,
            "max_mb": max_mb,
        }


# -- who writes: telling a dead writer's open runs from a live one's -------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read().strip()
    except OSError:
        return None


def _pid_namespace(pid: int | str = "self") -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _process_start(pid: int | str) -> str | None:
    """The process's start time in clock ticks since boot (Linux), '' where unknown, None if it does not exist."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None if os.path.isdir("/proc/self") else ""
    # The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


class _Writer:
    """This process as a writer of runs: ``host|boot id|pid namespace|pid|start time``; renewed after fork."""

    def __init__(self) -> None:
        self.host = socket.gethostname().replace("|", "/")
        self.boot = (_read("/proc/sys/kernel/random/boot_id") or "").replace("|", "/")
        self.renew()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.renew)

    def renew(self) -> None:
        pid = os.getpid()
        start = _process_start(pid) or ""
        self.namespace = _pid_namespace().replace("|", "/")
        self.token = f"{self.host}|{self.boot}|{self.namespace}|{pid}|{start}"


_WRITER = _Writer()


def writer_token() -> str:
    """How this process signs the runs it opens (see "Durability" in the module's docstring)."""
    return _WRITER.token


def _writer_is_gone(token: str) -> bool:
    """True only when the process that wrote ``token`` surely no longer runs."""
    parts = token.split("|")
    if len(parts) != 5 or token == _WRITER.token:
        return False
    host, boot, namespace, pid_text, start = parts
    if host != _WRITER.host or namespace != _WRITER.namespace or not pid_text.isdigit():
        return False  # another host, or another PID namespace (a container): its processes are not ours to see
    if boot and _WRITER.boot and boot != _WRITER.boot:
        return True  # this host was rebooted since
    pid = int(pid_text)
    now = _process_start(pid)
    if now is None:
        return True  # /proc says no such process
    if now and start:
        return now != start  # the PID is another process's now
    if sys.platform == "win32":
        return False  # os.kill would end the process, not probe it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, under another user
    return False


def _interrupted_message(token: str) -> str:
    host, _, _, pid, _ = token.split("|")
    return f"the process writing this run (pid {pid} on {host}) ended before the run did"


def _check_status(status: str) -> str:
    if status not in RUN_STATUSES:
        raise InvalidInputError("status", f"one of {', '.join(RUN_STATUSES)}", got=status)
    return status


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _stored_json(text: str) -> Any:
    """A stored JSON column as a value any reader can render: never an error, never deeper than the
    nesting limit (a row written before it, or by another program, may be)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(value, dict | list):
        value = summarize(value, max_text=sys.maxsize, max_items=sys.maxsize, max_depth=MAX_NESTING)
    return value


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    for column in _JSON_COLUMNS:
        if row.get(column) is not None:
            row[column] = _stored_json(row[column])
    row["cached"] = bool(row["cached"])
    if "texts" in row:
        row["texts"] = row["texts"] or "full"
    return row


# -- the process's run log -----------------------------------------------------------------

_UNSET: Any = object()
_override: Any = _UNSET
_default: tuple[str, RunLog] | None = None
_lock = threading.Lock()


def off_marker() -> Path:
    """The file ``decirank runs off`` leaves in the data directory, and ``decirank runs on`` removes."""
    return data_dir() / "runlog-off"


def _switched_off() -> bool:
    """``decirank runs off``, or ``[runlog] enabled = false``; ``DECIRANK_RUNLOG`` (off or a path) wins over both."""
    return off_marker().exists() or load_config().runlog_enabled is False


def _configured_target() -> str | None:
    environ = os.environ
    setting = environ.get("DECIRANK_RUNLOG", "")
    if not setting.strip() and _switched_off():
        return None
    return _target_for(setting, environ.get("DECIRANK_DATABASE_URL", ""), environ.get("DECIRANK_HOME"))


# Per call (a block of calls) from Python: see texts_kept.
_texts_override: ContextVar[str | None] = ContextVar("decirank_runlog_texts", default=None)


def _check_texts(value: str, where: str) -> str:
    value = value.strip().lower()
    if value not in RUNLOG_TEXTS:
        raise ConfigError(f"{where}: expected full or hashes, got {value!r}")
    return value


def configured_texts() -> str:
    """What the run log keeps of texts now: ``full`` or ``hashes``.

    :func:`texts_kept` for the calls in its block, else ``DECIRANK_RUNLOG_TEXTS``, else ``[runlog] texts``
    in the config, else ``full``.
    """
    override = _texts_override.get()
    if override is not None:
        return override
    setting = os.environ.get("DECIRANK_RUNLOG_TEXTS", "")
    if setting.strip():
        return _check_texts(setting, "DECIRANK_RUNLOG_TEXTS")
    return load_config().runlog_texts or "full"


@contextlib.contextmanager
def texts_kept(mode: str) -> Iterator[None]:
    """Record the runs started in the block with ``mode`` (``"full"`` or ``"hashes"``), whatever else says."""
    if not isinstance(mode, str) or mode.strip().lower() not in RUNLOG_TEXTS:
        raise InvalidInputError("texts", "full or hashes", got=mode)
    token = _texts_override.set(mode.strip().lower())
    try:
        yield
    finally:
        _texts_override.reset(token)


def retention_settings() -> tuple[float | None, float | None]:
    """``[runlog] keep_days`` and ``max_mb`` from the config (None where it says nothing)."""
    config = load_config()
    return config.runlog_keep_days, config.runlog_max_mb


class _Retention:
    """A daemon thread applying ``[runlog] keep_days`` and ``max_mb`` to one run log: when the process opens
    it, then every :data:`RETENTION_INTERVAL` seconds, in batches that never hold writers up for long."""

    def __init__(self, runlog: RunLog) -> None:
        self._runlog = runlog
        self._stop = threading.Event()
        self.passes = 0
        self._thread = threading.Thread(target=self._run, name="decirank-runlog-retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                keep_days, max_mb = retention_settings()
                if keep_days is not None or max_mb is not None:
                    self._runlog.prune(
                        before=time.time() - keep_days * 86_400 if keep_days is not None else None,
                        max_bytes=int(max_mb * 1024 * 1024) if max_mb is not None else None,
                        pause=0.01,
                    )
            except Exception as error:  # a bad config or a busy database: said once a pass, tried again later
                sys.stderr.write(f"decirank: run log retention: {error}\n")
            self.passes += 1
            self._stop.wait(RETENTION_INTERVAL)


@functools.lru_cache(maxsize=16)
def _target_for(setting: str, url: str, home: str | None) -> str | None:
    """Memoised because every tool call asks; ``home`` is only part of the key (data_file reads it)."""
    if setting.strip().lower() in _OFF:
        return None
    url = url.strip()
    if url:
        if not is_postgres_url(url):
            raise ConfigError(f"DECIRANK_DATABASE_URL: expected a postgresql:// URL, got {url.split(':', 1)[0]}:...")
        return url
    return str(data_file("runs.db", variable="DECIRANK_RUNLOG"))


def current_runlog() -> RunLog | None:
    """The run log tool calls write to now; None when it is switched off."""
    global _default
    if _override is not _UNSET:
        return _override
    target = _configured_target()
    if target is None:
        return None
    with _lock:
        if _default is None or _default[0] != target:
            # The previous one (another DECIRANK_HOME, say) is left to its holders and closed
            # when the last of them lets go.
            if _default is not None and _default[1].retention is not None:
                _default[1].retention.stop()
            runlog = RunLog.open(target)
            keep_days, max_mb = retention_settings()
            if keep_days is not None or max_mb is not None:
                runlog.retention = _Retention(runlog)
            _default = (target, runlog)
        return _default[1]


def configured_location() -> str | None:
    """Where the run log is, without opening it: a path, a URL (password hidden), or None when off."""
    if _override is not _UNSET:
        return _override.location if _override is not None else None
    target = _configured_target()
    if target is None or not is_postgres_url(target):
        return target
    return hide_password(target)


def set_runlog(runlog: RunLog | None) -> None:
    """Write to ``runlog`` from now on, whatever the environment says; None switches the log off."""
    global _override
    _override = runlog


def reset_runlog() -> None:
    """Undo :func:`set_runlog`: the environment decides again."""
    global _override
    _override = _UNSET


# -- the run new tool runs are children of -------------------------------------------------

# A context variable, so concurrent plans (threads, tasks) each see their own parent.
_parent_run: ContextVar[str | None] = ContextVar("decirank_parent_run", default=None)


def current_parent_run() -> str | None:
    """The run that tool runs started now belong to (a plan's run), or None."""
    return _parent_run.get()


@contextlib.contextmanager
def under_parent_run(run_id: str) -> Iterator[None]:
    """Tool runs started inside are recorded as children of ``run_id``."""
    token = _parent_run.set(run_id)
    try:
        yield
    finally:
        _parent_run.reset(token)


# -- the runs a piece of work started, for whoever answers for it --------------------------

# A list shared with whatever runs inside (tasks and worker threads copy the context, and so the list's reference).
_noted_runs: ContextVar[list[str] | None] = ContextVar("decirank_noted_runs", default=None)


@contextlib.contextmanager
def noting_runs() -> Iterator[list[str]]:
    """The ids of the runs started inside that belong to no other run, in order, as they start.

    The server's access log names the run a request made, whichever route made it, from this.
    """
    runs: list[str] = []
    token = _noted_runs.set(runs)
    try:
        yield runs
    finally:
        _noted_runs.reset(token)


def note_run_started(run_id: str) -> None:
    """Tell the enclosing :func:`noting_runs`, if any, that the run ``run_id`` started (unless it has a parent)."""
    runs = _noted_runs.get()
    if runs is not None and _parent_run.get() is None:
        runs.append(run_id)
