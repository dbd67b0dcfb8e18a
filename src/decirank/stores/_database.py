"""One small SQL interface over SQLite and PostgreSQL, for the stores.

Stores write SQL once, with ``?`` placeholders and types both engines know
(TEXT, INTEGER, DOUBLE PRECISION). Each database holds one connection behind
a lock, so threads sharing it wait on the lock, not on SQLite's file lock and
its busy-retry sleeps. Other processes are kept apart by SQLite's busy
timeout (or by PostgreSQL).

A commit costs far more than a small row (about 150 us on a 2-core machine,
against a tool call of about 300 us with the lexical backend), so the run
log writes through a :class:`BatchWriter`: writers finishing at once share
one commit, and each waits only for the commit that carries its own row.

Foreign errors become :class:`~decirank.errors.StoreError` here.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import itertools
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import StoreError
from ._files import private_file, private_folder

__all__ = [
    "BatchWriter",
    "Database",
    "PostgresDatabase",
    "SQLiteDatabase",
    "hide_password",
    "is_postgres_url",
    "timestamp",
]

#: The files SQLite keeps beside a database, private as the database is.
_SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
#: How long a writer waits for another process holding the SQLite write lock.
BUSY_TIMEOUT_MS = 10_000


def timestamp(seconds: float | None = None) -> str:
    """``seconds`` since the epoch (default: now) as ISO 8601 in UTC to the microsecond.

    Every store writes its times this way: they sort as text and read as dates.
    """
    moment = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="microseconds")


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


def hide_password(url: str) -> str:
    """``url`` as it may be shown: the password replaced by ``***``."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


class Database(abc.ABC):
    def __init__(self, what: str) -> None:
        #: What the database is for, as errors name it ("run log", "decision cache").
        self.what = what
        self._lock = threading.RLock()

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """A file path, or a URL with its password hidden."""

    @abc.abstractmethod
    def _run(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """Execute one statement (lock held) and return its rows, if any."""

    @abc.abstractmethod
    def _run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    @abc.abstractmethod
    def _begin_exclusive(self) -> None:
        """Begin a transaction that holds the write lock against other processes."""

    @abc.abstractmethod
    def table_exists(self, name: str) -> bool: ...

    @abc.abstractmethod
    def _close(self) -> None: ...

    def _failed(self, error: Exception) -> StoreError:
        return StoreError(f"{self.what} at {self.location}: {error}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.query(sql, params)

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._lock:
            self._run_many(sql, rows)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return self._run(sql, params)

    def _begin_write(self) -> None:
        """Begin a transaction for ordinary writes; by default the same as an exclusive one."""
        self._begin_exclusive()

    @contextlib.contextmanager
    def _transaction(self, begin: Callable[[], None]) -> Iterator[Database]:
        with self._lock:
            begin()
            try:
                yield self
                self._run("COMMIT", ())
            except BaseException:
                # A failed COMMIT can leave the transaction open; a failed statement may have ended it
                # already. Either way the connection must be left outside any transaction, and the
                # error that counts is the first one.
                with contextlib.suppress(Exception):
                    self._run("ROLLBACK", ())
                raise
            self._committed()

    def _committed(self) -> None:
        """Called after each transaction commits (lock held); nothing by default."""

    def exclusive_transaction(self) -> contextlib.AbstractContextManager[Database]:
        """Statements inside commit together, and no other writer (thread or process) interleaves."""
        return self._transaction(self._begin_exclusive)

    def transaction(self) -> contextlib.AbstractContextManager[Database]:
        """Statements inside commit together."""
        return self._transaction(self._begin_write)

    def close(self) -> None:
        with self._lock:
            self._close()


class SQLiteDatabase(Database):
    """One SQLite file in WAL mode.

    ``background_checkpoints=True`` is for a file written by many small
    transactions (the run log commits once per tool call): SQLite copies
    the WAL back into the database every ``CHECKPOINT_EVERY`` commits from a
    thread of its own, on a connection of its own, instead of inside the
    commit that happens to cross the WAL's size limit. That checkpoint
    syncs the file, which on a virtual disk costs several milliseconds; in
    the background it costs a caller nothing. The writing connection still
    checkpoints by itself past ``BACKSTOP_PAGES``, should the thread fall
    behind.
    """

    #: Commits between two background checkpoints.
    CHECKPOINT_EVERY = 64
    #: WAL pages past which the writing connection checkpoints by itself (SQLite's default is 1,000).
    BACKSTOP_PAGES = 10_000

    def __init__(self, path: Path, *, what: str, background_checkpoints: bool = False) -> None:
        super().__init__(what)
        self.path = Path(path)
        self._checkpointer: _Checkpointer | None = None
        try:
            # The file is made 0600 before SQLite opens it: SQLite gives its -wal and -shm the same mode.
            private_folder(self.path.parent)
            private_file(self.path, companions=_SQLITE_COMPANIONS)
            # Autocommit: every statement is its own transaction unless one is begun.
            self._connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
            )
            self._connection.row_factory = sqlite3.Row
            self._connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _enter_wal(self._connection)
            # In WAL mode NORMAL never corrupts the file; a power cut may lose the last rows.
            self._connection.execute("PRAGMA synchronous = NORMAL")
            if background_checkpoints:
                self._connection.execute(f"PRAGMA wal_autocheckpoint = {self.BACKSTOP_PAGES}")
                self._checkpointer = _Checkpointer(self.path, every=self.CHECKPOINT_EVERY)
        except (OSError, sqlite3.Error) as error:
            raise self._failed(error) from error

    def _committed(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.committed()

    @property
    def location(self) -> str:
        return str(self.path)

    def _run(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        try:
            cursor = self._connection.execute(sql, tuple(params))
            return [dict(row) for row in cursor.fetchall()]
        except sqlite3.Error as error:
            raise self._failed(error) from error

    def _run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._connection.executemany(sql, rows)
        except sqlite3.Error as error:
            raise self._failed(error) from error

    def _begin_exclusive(self) -> None:
        # IMMEDIATE takes the write lock now, not at the first write.
        self._run("BEGIN IMMEDIATE", ())

    def table_exists(self, name: str) -> bool:
        return bool(self.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)))

    def _close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._connection.close()


def _enter_wal(connection: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another process opening the same file holds it.

    Switching the journal mode can answer "database is locked" at once, without waiting on the busy
    handler, when two processes open a new log together; it is retried within the same budget.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class _Checkpointer:
    """A daemon thread that checkpoints one SQLite file's WAL every ``every`` commits (PASSIVE: never blocks)."""

    def __init__(self, path: Path, *, every: int) -> None:
        self._path = path
        self._every = every
        self._commits = 0
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        self._commits += 1
        if self._commits >= self._every:
            self._commits = 0
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="decirank-checkpointer", daemon=True)
                self._thread.start()
            self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        connection = None
        try:
            connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                # PASSIVE copies what it can without waiting for readers or writers; the rest waits a turn.
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as error:  # the writing connection's own checkpoints take over
            sys.stderr.write(f"decirank: background checkpoint of {self._path} stopped: {error}\n")
        finally:
            if connection is not None:
                connection.close()


class PostgresDatabase(Database):
    #: Any constant shared by every decirank process: the advisory lock that serialises migrations.
    _MIGRATION_LOCK = 0x6465636972616E6B  # "decirank"

    def __init__(self, url: str, *, what: str) -> None:
        super().__init__(what)
        self._url = url
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as error:
            raise StoreError(
                f"{what}: a PostgreSQL URL needs psycopg; install it with: pip install 'decirank[postgres]'"
            ) from error
        self._psycopg_error = psycopg.Error
        self._connect = lambda: psycopg.connect(url, autocommit=True, row_factory=dict_row)
        #: Whether a transaction is open on the connection: a statement inside one is never retried.
        self._in_transaction = False
        try:
            self._connection = self._connect()
        except psycopg.Error as error:
            raise self._failed(error) from error

    @property
    def location(self) -> str:
        return hide_password(self._url)

    def _run(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        def run() -> list[dict[str, Any]]:
            cursor = self._connection.execute(sql.replace("?", "%s"), tuple(params))
            return list(cursor.fetchall()) if cursor.description is not None else []

        rows = self._retried(run, begins=sql == "BEGIN")
        if sql == "BEGIN":
            self._in_transaction = True
        elif sql in ("COMMIT", "ROLLBACK"):
            self._in_transaction = False
        return rows

    def _run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._retried(lambda: self._connection.cursor().executemany(sql.replace("?", "%s"), rows))

    def _retried(self, run: Callable[[], Any], *, begins: bool = False) -> Any:
        """``run()``, once more on a new connection if the server dropped this one outside a transaction.

        A server restart or a failover closes every connection; without this
        the process would fail every statement until it restarted. A statement
        inside a transaction is not retried: the transaction is lost with the
        connection, and its caller hears so (and rolls back, which the new
        connection shrugs off).
        """
        try:
            return run()
        except self._psycopg_error as error:
            if not (self._connection.closed or self._connection.broken):
                raise self._failed(error) from error
            retry = begins or not self._in_transaction
            self._in_transaction = False
            try:
                self._connection = self._connect()
            except self._psycopg_error:
                raise self._failed(error) from error
            if not retry:
                raise self._failed(error) from error
        try:
            return run()
        except self._psycopg_error as error:
            raise self._failed(error) from error

    def _begin_exclusive(self) -> None:
        self._run("BEGIN", ())
        # Held until the transaction ends; every decirank process takes the same one.
        self._run("SELECT pg_advisory_xact_lock(?)", (self._MIGRATION_LOCK,))

    def _begin_write(self) -> None:
        self._run("BEGIN", ())  # row locks are PostgreSQL's business: writers need not queue

    def table_exists(self, name: str) -> bool:
        rows = self.query(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?",
            (name,),
        )
        return bool(rows)

    def _close(self) -> None:
        self._connection.close()


class BatchWriter:
    """Commits statements many at a time, in the order they came; a waiting writer is told its own fate.

    :meth:`submit` buffers a statement. With ``wait=True`` it returns only
    once the statement is committed (group commit): the caller takes the
    write lock and commits everything buffered so far, its own statement and
    every other thread's, or finds on taking the lock that another caller's
    commit already carried it. So under concurrency one commit serves many
    callers, and a caller that is told "done" is durable. Statements nobody
    waits for (a run's opening row) ride along with the next commit, or are
    written by a background sweeper once they are ``2 * LINGER_SECONDS`` old.

    Writing happens in the callers' threads: a writer thread would take the
    GIL back after every row SQLite steps, and on two cores that costs more
    than the writes.

    One bad statement never fails another. A batch whose statements do not
    all go through is written again one statement at a time, each in its own
    savepoint of one transaction; a statement that still fails is offered to
    ``salvage`` (which may return safer parameters to try once more), and
    failing that its error is kept under the statement's ``key``: the
    waiting submit with that key raises it as a :class:`StoreError`, and
    nobody else does. What is pending at interpreter exit is written then.
    """

    #: Statements per transaction at most, so one commit never holds the lock for long.
    MAX_BATCH = 500
    #: How long a statement nobody waits for may wait for company.
    LINGER_SECONDS = 0.05
    #: The sweeper ends after this long without work, and starts again with the next write.
    IDLE_SECONDS = 1.0
    #: Failures kept for keys nobody has asked about yet, at most (the oldest are dropped).
    MAX_KEPT_ERRORS = 1000

    def __init__(
        self, database: Database, *, salvage: Callable[[Sequence[Any]], Sequence[Any] | None] | None = None
    ) -> None:
        self.database = database
        self._salvage = salvage
        self._pending: list[tuple[str, Sequence[Any], str | None]] = []
        self._oldest = 0.0
        #: Statements submitted, and statements whose batch has been written (committed or failed).
        self._submitted = 0
        self._written = 0
        self._buffer_lock = threading.Lock()
        # Held while a batch is taken and written, so batches commit in the order they were taken.
        self._write_lock = threading.Lock()
        self._sweeper: threading.Thread | None = None
        self._errors: dict[str, StoreError] = {}
        _live_writers.add(self)

    def submit(self, sql: str, params: Sequence[Any] = (), *, key: str | None = None, wait: bool = False) -> None:
        """Buffer one statement; with ``wait``, return once it is committed, or raise why it is not.

        ``key`` names what the statement belongs to (a run): a failure of any
        statement with that key is raised by the next waiting submit with it.
        """
        with self._buffer_lock:
            if not self._pending:
                self._oldest = time.monotonic()
            self._pending.append((sql, params, key))
            self._submitted += 1
            number = self._submitted
            full = len(self._pending) >= self.MAX_BATCH
            if self._sweeper is None and not wait:
                self._sweeper = threading.Thread(target=self._sweep, name="decirank-store-sweeper", daemon=True)
                self._sweeper.start()
        if wait:
            self._write_through(number)
            if key is not None and self._errors:
                with self._buffer_lock:
                    error = self._errors.pop(key, None)
                if error is not None:
                    raise error
        elif full:
            self._write_through(number)

    def flush(self) -> None:
        """Write everything submitted so far. Failed statements are their waiters' business, not raised here."""
        with self._buffer_lock:
            number = self._submitted
        self._write_through(number)

    def _write_through(self, number: int) -> None:
        """Return once statement ``number`` has been written: by this thread, or by the commit that carried it."""
        while True:
            with self._write_lock:
                if self._written >= number:
                    return
                with self._buffer_lock:
                    batch, self._pending = self._pending[: self.MAX_BATCH], self._pending[self.MAX_BATCH :]
                    if self._pending:
                        self._oldest = time.monotonic()
                    last = self._written + len(batch)
                try:
                    if batch:
                        self._write(batch)
                except BaseException as error:  # interrupted (Ctrl-C): the batch's waiters must not think it written
                    self._keep([(key, self.database._failed(error)) for _, _, key in batch])
                    raise
                finally:
                    self._written = last

    def _sweep(self) -> None:
        idle = 0.0
        while True:
            time.sleep(self.LINGER_SECONDS)
            with self._buffer_lock:
                if not self._pending:
                    idle += self.LINGER_SECONDS
                    if idle >= self.IDLE_SECONDS:
                        self._sweeper = None  # under the lock: a submit now starts a new one
                        return
                    continue
                idle = 0.0
                # Busy callers write the buffer with their own commits; this is for what they leave behind.
                stale = time.monotonic() - self._oldest >= 2 * self.LINGER_SECONDS
                number = self._submitted
            if stale:
                try:
                    self._write_through(number)
                except Exception as error:  # never expected: _write keeps its failures; the thread must live on
                    sys.stderr.write(f"decirank: {self.database.what}: {error}\n")

    def _write(self, batch: list[tuple[str, Sequence[Any], str | None]]) -> None:
        try:
            with self.database.transaction():
                # Runs of the same statement go as one executemany: the loop stays in C.
                for sql, group in itertools.groupby(batch, key=lambda statement: statement[0]):
                    self.database.execute_many(sql, [params for _, params, _ in group])
            return
        except Exception:  # some statement failed, or the commit did: find out which, one by one
            pass
        self._write_one_by_one(batch)

    def _write_one_by_one(self, batch: list[tuple[str, Sequence[Any], str | None]]) -> None:
        failures: list[tuple[str | None, StoreError]] = []
        database = self.database
        try:
            with database.transaction():
                for sql, params, key in batch:
                    error = self._try(sql, params)
                    if error is not None and self._salvage is not None:
                        safer = self._salvage(params)
                        if safer is not None and self._try(sql, safer) is None:
                            error = None
                    if error is not None:
                        failures.append((key, error))
        except Exception as error:  # the transaction as a whole failed: none of it is committed
            failure = error if isinstance(error, StoreError) else database._failed(error)
            failures = [(key, failure) for _, _, key in batch]
        self._keep(failures)

    def _keep(self, failures: list[tuple[str | None, StoreError]]) -> None:
        """Keep each failure for its key's waiter; one without a key has nobody to tell but stderr."""
        with self._buffer_lock:
            for key, error in failures:
                if key is None:
                    sys.stderr.write(f"decirank: {error}\n")
                else:
                    self._errors.setdefault(key, error)
            while len(self._errors) > self.MAX_KEPT_ERRORS:
                del self._errors[next(iter(self._errors))]

    def _try(self, sql: str, params: Sequence[Any]) -> StoreError | None:
        """Run one statement in a savepoint (lock and transaction held); its failure undoes only it."""
        database = self.database
        database._run("SAVEPOINT decirank_row", ())
        try:
            database._run_many(sql, [params])
        except Exception as error:
            database._run("ROLLBACK TO SAVEPOINT decirank_row", ())
            database._run("RELEASE SAVEPOINT decirank_row", ())
            return error if isinstance(error, StoreError) else database._failed(error)
        database._run("RELEASE SAVEPOINT decirank_row", ())
        return None


_live_writers: weakref.WeakSet[BatchWriter] = weakref.WeakSet()


@atexit.register
def _write_pending_at_exit() -> None:
    for writer in list(_live_writers):
        try:
            writer.flush()
        except StoreError as error:
            sys.stderr.write(f"decirank: {error}\n")
        for error in writer._errors.values():  # failures no waiter came for: say them once, at least
            sys.stderr.write(f"decirank: {error}\n")
