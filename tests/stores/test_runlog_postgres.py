"""The run log on a real PostgreSQL server (``tests.postgres``), chosen by DECIRANK_DATABASE_URL."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

import decirank
from decirank.stores._migrations import migrate
from decirank.stores.runlog import MIGRATIONS, RunLog, current_runlog
from decirank.testing import ScriptedBackend, use_backend

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def test_migrations_are_recorded_once_on_postgres(database_url):
    """On PostgreSQL too, each migration is recorded once and migrating again applies nothing."""
    RunLog.open(database_url).close()
    runlog = RunLog.open(database_url)
    assert [row["name"] for row in runlog.database.query("SELECT name FROM _migrations")] == [
        migration.name for migration in MIGRATIONS
    ]
    assert migrate(runlog.database, MIGRATIONS) == []


def test_tool_and_model_runs_are_written_to_postgres(database_url, isolated_user_dir):
    """With DECIRANK_DATABASE_URL set, runs, children and stats go to PostgreSQL and nothing to SQLite."""
    result = decirank.rank(["a cat", "a car"], "Which one purrs?", {"topic": "pets"}, model="lexical")
    with use_backend(ScriptedBackend(error=decirank.ModelError("down"))) as model, pytest.raises(decirank.ModelError):
        decirank.rerank("q", ["a"], model=model)
    runlog = current_runlog()
    assert runlog.location == database_url
    run = runlog.run(result.run_id[:12])
    assert run["status"] == "success" and run["inputs"]["items"] == ["a cat", "a car"]
    (child,) = run["children"]
    assert child["request"]["state"] == {"topic": "pets"} and child["model"] == "lexical:bm25"
    assert [(r["tool"], r["status"], r["error_type"]) for r in runlog.runs()] == [
        ("rerank", "failed", "ModelError"),
        ("rank", "success", None),
    ]
    stats = runlog.stats()
    assert stats["runs"] == 2
    assert {row["model"]: (row["calls"], row["failed"]) for row in stats["models"]} == {
        "lexical:bm25": (1, 0),
        model: (1, 1),
    }
    assert not (isolated_user_dir / "runs.db").exists(), "nothing went to SQLite"


def test_concurrent_threads_leave_every_row_on_postgres(database_url):
    """Eight threads writing to PostgreSQL at once lose no row."""

    def caller(thread: int) -> None:
        for n in range(50):
            decirank.rank(["a", "b", "c"], "Which?", {"thread": thread, "n": n}, model="lexical")

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runlog = current_runlog()
    assert (runlog.count(kind="tool"), runlog.count(kind="model")) == (400, 400)
    assert {run["status"] for run in runlog.runs(limit=None)} == {"success"}


def test_the_runs_command_reads_postgres(database_url):
    """'decirank runs list' reads the PostgreSQL log named by the environment."""
    decirank.rank(["a", "b"], "Which?", {}, model="lexical")
    current_runlog().flush()
    listed = subprocess.run(
        [sys.executable, "-m", "decirank", "runs", "list", "--json"], capture_output=True, text=True, check=True
    )
    assert [run["tool"] for run in json.loads(listed.stdout)] == ["rank"]


def test_bad_text_and_a_refused_row_fail_no_other_run_on_postgres(database_url):
    """Lone surrogates and NUL are stored safely; a row PostgreSQL refuses fails only its own run."""
    from decirank.errors import StoreError
    from decirank.stores.runlog import new_run_id

    runlog = RunLog.open(database_url)
    runlog.database.execute(
        "CREATE FUNCTION poison() RETURNS trigger AS $$ BEGIN "
        "IF position('poison' in NEW.outputs) > 0 THEN RAISE EXCEPTION 'poisoned row'; END IF; "
        "RETURN NEW; END $$ LANGUAGE plpgsql"
    )
    runlog.database.execute("CREATE TRIGGER poison BEFORE UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION poison()")
    bad_text = "fleas \udfff and \x00"
    good, bad, poisoned = new_run_id(), new_run_id(), new_run_id()

    def finish(run_id, outputs, error=None):
        runlog.finish_run(
            run_id, status="failed" if error else "success", models="m", outputs=outputs, error=error,
            usage={}, ended=1.0, duration=0.001,
        )  # fmt: skip

    for run_id in (good, bad, poisoned):
        runlog.start_run(run_id, tool="rank", role="r", inputs={"documents": [bad_text]}, started=0.0)
    with pytest.raises(StoreError, match="poisoned row"):
        finish(poisoned, "poison")
    finish(bad, [bad_text], error={"type": "InvalidInputError", "message": bad_text})
    finish(good, ["fine"])
    assert {run["id"]: run["status"] for run in runlog.runs(limit=None)} == {
        good: "success",
        bad: "failed",
        poisoned: "running",
    }
    stored = runlog.run(bad)
    assert stored["inputs"] == {"documents": [bad_text]} and stored["outputs"] == [bad_text]
    assert stored["error"] == "fleas \\udfff and \\x00"


def test_a_dead_writers_open_runs_are_interrupted_on_postgres(database_url):
    """Opening the log marks the open runs of a writer that is gone, and leaves this process's alone."""
    from decirank.stores.runlog import new_run_id, writer_token

    runlog = RunLog.open(database_url)
    mine = new_run_id()
    runlog.start_run(mine, tool="rank", role="r", inputs={}, started=0.0)
    runlog.flush()
    dead = writer_token().rsplit("|", 2)[0] + "|999999999|1"
    runlog.database.execute(
        "INSERT INTO runs (id, kind, tool, status, writer) VALUES ('dead', 'tool', 'rank', 'running', ?)", (dead,)
    )
    RunLog.open(database_url)
    assert {run["id"]: run["status"] for run in runlog.runs(limit=None)} == {mine: "running", "dead": "interrupted"}


def test_the_run_log_reconnects_when_the_server_drops_its_connection(database_url, postgres_server):
    """After PostgreSQL cuts the log's connection (a restart, a failover), the next tool call is logged all the same."""
    first = decirank.rank(["a", "b"], "Which?", {"n": 1}, model="lexical")
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database_url.rsplit("/", 1)[1],),
        )
    second = decirank.rank(["a", "b"], "Which?", {"n": 2}, model="lexical")
    statuses = {run["id"]: run["status"] for run in current_runlog().runs(limit=None)}
    assert statuses == {first.run_id: "success", second.run_id: "success"}
