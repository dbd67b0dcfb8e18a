"""The run log: a run per tool call, a child per model call, on real SQLite files."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading

import pytest

import decirank
from decirank.errors import StoreError
from decirank.stores._database import SQLiteDatabase
from decirank.stores._migrations import Migration, migrate
from decirank.stores.runlog import MIGRATIONS, RunLog, current_runlog, set_runlog
from decirank.testing import ScriptedBackend, use_backend
from decirank.types.answers import Usage

ITEMS = ["a cat that purrs", "a car that honks", "a dog that barks"]


def rank_once(**options):
    return decirank.rank(ITEMS, "Which one purrs?", {"topic": "pets"}, model="lexical", **options)


def test_migrations_are_recorded_once_and_reapplying_is_a_no_op(tmp_path):
    """Opening a log twice records each migration once, and migrating again applies nothing."""
    path = tmp_path / "runs.db"
    RunLog.open(path).close()
    again = RunLog.open(path)
    rows = again.database.query("SELECT name, applied_at FROM _migrations")
    assert [row["name"] for row in rows] == [migration.name for migration in MIGRATIONS]
    assert migrate(again.database, MIGRATIONS) == [], "nothing left to apply"
    assert again.database.query("SELECT COUNT(*) AS n FROM _migrations")[0]["n"] == len(MIGRATIONS)


def test_a_new_migration_is_applied_to_an_existing_log_and_keeps_its_rows(tmp_path):
    """A migration added later is applied once to an existing file without losing its rows."""
    path = tmp_path / "runs.db"
    runlog = RunLog.open(path)
    set_runlog(runlog)
    rank_once()
    runlog.flush()
    added = Migration("m999_note", ("ALTER TABLE runs ADD COLUMN note TEXT",))
    database = SQLiteDatabase(path, what="run log")
    assert migrate(database, [*MIGRATIONS, added]) == ["m999_note"]
    assert migrate(database, [*MIGRATIONS, added]) == []
    assert database.query("SELECT COUNT(*) AS n FROM runs WHERE note IS NULL")[0]["n"] == 2


def test_a_migration_list_naming_one_migration_twice_is_refused(tmp_path):
    """Duplicate migration names are a StoreError naming the store and the name; nothing is applied."""
    database = SQLiteDatabase(tmp_path / "runs.db", what="run log")
    with pytest.raises(StoreError, match="run log: .*m001_runs"):
        migrate(database, [*MIGRATIONS, MIGRATIONS[0]])
    assert not database.table_exists("_migrations")


def test_the_file_is_sqlite_in_wal_mode_under_the_users_data_dir(isolated_user_dir):
    """By default the log is runs.db, in WAL mode, in the user's directory."""
    result = rank_once()
    runlog = current_runlog()
    runlog.flush()
    assert runlog.location == str(isolated_user_dir / "runs.db")
    with sqlite3.connect(isolated_user_dir / "runs.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        ids = [row[0] for row in connection.execute("SELECT id FROM runs WHERE kind = 'tool'")]
    assert ids == [result.run_id]


def test_a_tool_run_records_inputs_outputs_usage_and_its_model_call():
    """A tool run holds its inputs, outputs and usage, and its model call holds the request and answers."""
    result = rank_once(top_k=2)
    run = current_runlog().run(result.run_id)
    assert (run["tool"], run["role"], run["model"], run["status"]) == ("rank", "lexical", "lexical:bm25", "success")
    assert run["inputs"]["items"] == ITEMS and run["inputs"]["top_k"] == 2
    assert [entry["item"] for entry in run["outputs"]["ranked"]] == result.items
    assert run["started_at"] <= run["ended_at"] and run["duration_ms"] > 0
    (child,) = run["children"]
    assert (child["parent_id"], child["kind"], child["provider"], child["status"]) == (
        result.run_id,
        "model",
        "lexical",
        "success",
    )
    options = child["request"]["questions"]["rank"]["options"]
    assert sorted(options.values()) == sorted(ITEMS)
    assert child["request"]["state"] == {"topic": "pets"}
    assert set(child["answers"]["rank"]["probabilities"]) == set(options)
    assert run["input_tokens"] == child["input_tokens"] == result.usage.input_tokens > 0


def test_usage_of_every_model_call_rolls_up_to_the_run():
    """Tokens, calls and cost of a split call's model calls add up on the tool run."""
    paid = ScriptedBackend(usage=Usage(input_tokens=100, output_tokens=5, cost=0.002, currency="EUR", calls=1))
    with use_backend(paid) as model:
        result = decirank.rerank("q", [f"doc {n}" for n in range(45)], model=model, max_documents_per_call=20)
    run = current_runlog().run(result.run_id)
    assert len(run["children"]) == 3
    assert (run["input_tokens"], run["output_tokens"], run["calls"]) == (300, 15, 3)
    assert run["cost"] == pytest.approx(0.006) and run["currency"] == "EUR"
    assert all(child["cost"] == pytest.approx(0.002) for child in run["children"])


def test_long_inputs_are_shortened_in_the_run_record():
    """Long texts and lists are cut in the recorded inputs, saying how much was left out."""
    documents = ["word " * 100] * 12
    with use_backend(ScriptedBackend()) as model:
        result = decirank.rerank("q", documents, model=model)
    inputs = current_runlog().run(result.run_id)["inputs"]
    assert len(inputs["documents"]) == 6 and inputs["documents"][-1] == "… (+7 more)"
    assert inputs["documents"][0].endswith("(+300 chars)")


def test_switched_off_by_environment_nothing_is_written(monkeypatch, isolated_user_dir):
    """DECIRANK_RUNLOG=off writes no file, and results still carry a run id."""
    monkeypatch.setenv("DECIRANK_RUNLOG", "off")
    result = rank_once()
    assert result.run_id, "results still carry a run id"
    assert current_runlog() is None
    assert not (isolated_user_dir / "runs.db").exists()


def test_switched_off_from_python_nothing_is_written(isolated_user_dir):
    """set_runlog(None) writes no file."""
    set_runlog(None)
    rank_once()
    assert not (isolated_user_dir / "runs.db").exists()


def test_decirank_runlog_names_another_file(monkeypatch, tmp_path):
    """DECIRANK_RUNLOG names the file the log is written to."""
    elsewhere = tmp_path / "elsewhere" / "log.db"
    monkeypatch.setenv("DECIRANK_RUNLOG", str(elsewhere))
    result = rank_once()
    assert current_runlog().location == str(elsewhere)
    assert current_runlog().run(result.run_id)["status"] == "success"


def test_a_run_log_that_cannot_be_opened_is_a_store_error(monkeypatch, tmp_path):
    """A log path that cannot be opened is a StoreError naming the run log and the path."""
    monkeypatch.setenv("DECIRANK_RUNLOG", str(tmp_path))  # a directory, not a file
    with pytest.raises(StoreError) as caught:
        rank_once()
    assert "run log" in str(caught.value) and str(tmp_path) in str(caught.value)


def test_an_unknown_model_is_recorded_as_a_failed_run():
    """A tool call with an unknown model is still a run, failed with UnknownModelError."""
    with pytest.raises(decirank.UnknownModelError):
        decirank.rank(ITEMS, "Which?", {}, model="lexicl")
    (run,) = current_runlog().runs()
    assert (run["status"], run["error_type"], run["role"]) == ("failed", "UnknownModelError", "lexicl")


def test_runs_are_listed_newest_first_and_filtered():
    """Runs list newest first and filter by tool, status and limit."""
    rank_once()
    decirank.rerank("q", ["a"], model="lexical")
    with pytest.raises(decirank.UnknownModelError):
        decirank.rerank("q", ["a"], model="nobody")
    runlog = current_runlog()
    assert [run["tool"] for run in runlog.runs()] == ["rerank", "rerank", "rank"]
    assert [run["status"] for run in runlog.runs(tool="rerank")] == ["failed", "success"]
    assert len(runlog.runs(status="success")) == 2 and len(runlog.runs(limit=1)) == 1


def test_a_run_is_found_by_a_unique_prefix_only():
    """A run is found by a unique id prefix; an unknown or empty id is an InvalidInputError."""
    first = rank_once().run_id
    runlog = current_runlog()
    assert runlog.run(first[:10])["id"] == first
    with pytest.raises(decirank.InvalidInputError):
        runlog.run("not-an-id")
    with pytest.raises(decirank.InvalidInputError):
        runlog.run("")


def test_a_thousand_tool_calls_from_eight_threads_leave_exactly_their_rows():
    """Four threads call the sync API; four run their own event loops: all write one log at once."""
    calls_per_thread = 125
    run_ids: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def sync_caller(thread: int) -> None:
        for n in range(calls_per_thread):
            run_id = decirank.rank(ITEMS, "Which?", {"thread": thread, "n": n}, model="lexical").run_id
            with lock:
                run_ids.append(run_id)

    def async_caller(thread: int) -> None:
        async def many() -> list[str]:
            return [
                (await decirank.arank(ITEMS, "Which?", {"thread": thread, "n": n}, model="lexical")).run_id
                for n in range(calls_per_thread)
            ]

        ids = asyncio.run(many())
        with lock:
            run_ids.extend(ids)

    def guarded(target, thread):
        try:
            target(thread)
        except BaseException as error:  # surfaced below: a thread's exception is otherwise lost
            failures.append(error)

    threads = [
        threading.Thread(target=guarded, args=(sync_caller if n % 2 else async_caller, n)) for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    runlog = current_runlog()
    assert len(run_ids) == len(set(run_ids)) == 1000
    assert runlog.count(kind="tool") == 1000 and runlog.count(kind="model") == 1000
    rows = runlog.database.query("SELECT id, status FROM runs WHERE kind = 'tool'")
    assert {row["id"] for row in rows} == set(run_ids)
    assert {row["status"] for row in rows} == {"success"}
    orphans = runlog.database.query(
        "SELECT COUNT(*) AS n FROM runs c WHERE c.kind = 'model' AND c.parent_id NOT IN (SELECT id FROM runs)"
    )
    assert orphans[0]["n"] == 0

    reported = subprocess.run(
        [sys.executable, "-m", "decirank", "runs", "stats", "--json"], capture_output=True, text=True, check=True
    )
    stats = json.loads(reported.stdout)
    assert stats["runs"] == 1000
    (lexical,) = stats["models"]
    assert (lexical["model"], lexical["calls"], lexical["failed"]) == ("lexical:bm25", 1000, 0)
    assert 0 < lexical["p50_ms"] <= lexical["p95_ms"]


def test_stats_count_runs_and_sum_each_models_calls():
    """Stats count runs by tool and status, and calls and failures by model."""
    rank_once()
    rank_once()
    with use_backend(ScriptedBackend(error=decirank.ModelError("down"))) as model, pytest.raises(decirank.ModelError):
        decirank.rerank("q", ["a"], model=model)
    stats = current_runlog().stats()
    assert stats["runs"] == 3
    assert {(row["tool"], row["status"]): row["runs"] for row in stats["by_tool"]} == {
        ("rank", "success"): 2,
        ("rerank", "failed"): 1,
    }
    by_model = {row["model"]: row for row in stats["models"]}
    assert by_model["lexical:bm25"]["calls"] == 2
    assert (by_model[model]["calls"], by_model[model]["failed"]) == (1, 1)


def test_rows_written_just_before_exit_are_not_lost(isolated_user_dir):
    """A process that ends right after its last call still leaves that call's rows."""
    script = (
        "import decirank\n"
        "for n in range(3):\n"
        "    decirank.rank(['a', 'b'], 'Which?', {'n': n}, model='lexical')\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    with sqlite3.connect(isolated_user_dir / "runs.db") as connection:
        counts = dict(connection.execute("SELECT kind, COUNT(*) FROM runs GROUP BY kind").fetchall())
        statuses = {row[0] for row in connection.execute("SELECT status FROM runs")}
    assert counts == {"tool": 3, "model": 3} and statuses == {"success"}


def test_two_processes_writing_at_once_leave_every_row(isolated_user_dir):
    """Two processes writing one log file at once lose no row."""
    script = (
        "import decirank\n"
        "for n in range(150):\n"
        "    decirank.rank(['a', 'b', 'c'], 'Which?', {'n': n}, model='lexical')\n"
    )
    writers = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(2)]
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0]
    assert RunLog.open(isolated_user_dir / "runs.db").count(kind="tool") == 300
