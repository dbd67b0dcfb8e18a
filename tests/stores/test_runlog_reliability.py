"""Nothing acknowledged is lost: bad rows, concurrent writers and kill -9, on real SQLite files."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

import decirank
from decirank.errors import StoreError
from decirank.stores.runlog import RUN_STATUSES, RunLog, current_runlog, new_run_id, writer_token

BAD = "fleas \udfff and \ud800"  # lone surrogates: valid in Python and JSON, not encodable as UTF-8
USAGE = {"input_tokens": 3, "output_tokens": 1, "calls": 1}


def start(runlog: RunLog, run_id: str, *, inputs=None, tool: str = "rank") -> None:
    runlog.start_run(run_id, tool=tool, role="lexical", inputs=inputs or {"q": "ok"}, started=time.time())


def finish(runlog: RunLog, run_id: str, *, outputs=None, error=None, usage=USAGE) -> None:
    runlog.finish_run(
        run_id,
        status="failed" if error else "success",
        models="lexical:bm25",
        outputs=outputs,
        error=error,
        usage=usage,
        ended=time.time(),
        duration=0.001,
    )


def committed(path) -> dict[str, str]:
    """Tool runs and their status as another connection sees them: only what is committed."""
    with sqlite3.connect(path) as connection:
        return dict(connection.execute("SELECT id, status FROM runs WHERE kind = 'tool'").fetchall())


def test_an_unencodable_run_in_a_batch_keeps_the_good_runs_and_is_stored_safely(tmp_path):
    """Runs sharing a batch with lone surrogates in inputs, outputs and error all land; the text reads back."""
    runlog = RunLog.open(tmp_path / "runs.db")
    good = [new_run_id() for _ in range(3)]
    bad, failed = new_run_id(), new_run_id()
    for run_id in good:
        start(runlog, run_id)
    start(runlog, bad, inputs={"query": "fleas", "documents": [BAD]})
    start(runlog, failed, inputs={BAD: BAD}, tool=BAD)
    finish(runlog, bad, outputs={"ranked": [BAD]})
    finish(runlog, failed, error={"type": "InvalidInputError", "message": f"bad text: {BAD!s}"})
    for run_id in good:
        finish(runlog, run_id, outputs={"ranked": ["a"]})
    assert committed(tmp_path / "runs.db") == {**dict.fromkeys([*good, bad], "success"), failed: "failed"}
    stored = runlog.run(bad)
    assert stored["inputs"] == {"query": "fleas", "documents": [BAD]}, "JSON keeps the exact text"
    assert stored["outputs"] == {"ranked": [BAD]}
    other = runlog.run(failed)
    assert other["inputs"] == {BAD: BAD}
    assert other["error"] == "bad text: fleas \\udfff and \\ud800" and other["tool"] == "fleas \\udfff and \\ud800"


def test_a_row_the_database_refuses_fails_only_its_own_run(tmp_path):
    """A row that fails inside the database fails its own tool call only; the batch's other runs commit."""
    path = tmp_path / "runs.db"
    runlog = RunLog.open(path)
    runlog.database.execute(
        "CREATE TRIGGER poison BEFORE UPDATE ON runs WHEN NEW.outputs LIKE '%poison%' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned row'); END"
    )
    good, poisoned, later = new_run_id(), new_run_id(), new_run_id()
    for run_id in (good, poisoned, later):
        start(runlog, run_id)
    with pytest.raises(StoreError, match="poisoned row"):
        finish(runlog, poisoned, outputs="poison")
    finish(runlog, good)
    finish(runlog, later)
    assert committed(path) == {good: "success", poisoned: "running", later: "success"}
    assert runlog.count(kind="tool") == 3, "reading is not broken by the failure"


def test_out_of_range_numbers_are_stored_rather_than_failing_the_run(tmp_path):
    """A token count SQLite cannot hold is dropped from its row; the run is still recorded."""
    runlog = RunLog.open(tmp_path / "runs.db")
    run_id = new_run_id()
    start(runlog, run_id)
    finish(runlog, run_id, usage={"input_tokens": 2**70, "output_tokens": 1, "calls": 1})
    run = runlog.run(run_id)
    assert (run["status"], run["input_tokens"], run["output_tokens"]) == ("success", None, 1)


def test_concurrent_calls_with_bad_text_lose_no_acknowledged_run(isolated_user_dir):
    """600 calls from 20 threads, every 25th a rerank with lone surrogates: each call that returned is committed.

    Half the threads call the sync API (which runs every call on one shared loop); the other half run
    event loops of their own, so several writers really do finish at once and share commits.
    """
    acknowledged: list[str] = []
    refused: list[BaseException] = []
    unexpected: list[BaseException] = []
    lock = threading.Lock()

    async def call(number: int) -> str:
        if number % 25 == 0:  # as the server's /v1/rerank gets it
            return (await decirank.arerank("fleas", ["a cat", f"a \udfff {number}"], model="lexical")).run_id
        items = ["a cat that purrs", f"item {number}"]
        return (await decirank.arank(items, "Which one purrs?", {"n": number}, model="lexical")).run_id

    async def calls(thread: int, run) -> None:
        for n in range(30):
            number = thread * 30 + n
            try:
                run_id = await run(number)
            except Exception as error:
                with lock:  # input checks may refuse the bad text; nothing else may fail
                    (refused if number % 25 == 0 else unexpected).append(error)
                continue
            with lock:
                acknowledged.append(run_id)

    def sync_call(number: int) -> str:
        if number % 25 == 0:
            return decirank.rerank("fleas", ["a cat", f"a \udfff {number}"], model="lexical").run_id
        items = ["a cat that purrs", f"item {number}"]
        return decirank.rank(items, "Which one purrs?", {"n": number}, model="lexical").run_id

    async def via_sync(number: int) -> str:
        return sync_call(number)

    def caller(thread: int) -> None:
        asyncio.run(calls(thread, call if thread % 2 else via_sync))

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not unexpected
    assert len(acknowledged) + len(refused) == 600
    # Read through another connection, without flushing this process's writer: acknowledged means committed.
    seen = committed(isolated_user_dir / "runs.db")
    assert {run_id: seen.get(run_id) for run_id in acknowledged} == dict.fromkeys(acknowledged, "success")
    runlog = current_runlog()
    assert runlog.runs(status="running", limit=None) == []
    orphans = runlog.database.query(
        "SELECT COUNT(*) AS n FROM runs c WHERE c.kind = 'model' AND c.parent_id NOT IN (SELECT id FROM runs)"
    )
    assert orphans[0]["n"] == 0


KILLED_CHILD = r"""
import sys, threading
import decirank
from decirank.testing import ScriptedBackend, use_backend

def stuck():
    with use_backend(ScriptedBackend(delay=600)) as model:
        decirank.rerank("q", ["a", "b"], model=model)

threading.Thread(target=stuck, daemon=True).start()

printing = threading.Lock()

def caller(thread):
    n = 0
    while True:
        n += 1
        result = decirank.rank(["a cat", "a car", "a dog"], "Which one purrs?", {"t": thread, "n": n}, model="lexical")
        with printing:
            sys.stdout.write(result.run_id + "\n")
            sys.stdout.flush()

for thread in range(3):
    threading.Thread(target=caller, args=(thread,), daemon=True).start()
threading.Event().wait()
"""


def test_kill_9_loses_no_acknowledged_run_and_marks_the_dead_runs_interrupted(tmp_path, isolated_user_dir):
    """A process killed with SIGKILL keeps every run it returned; its unfinished runs become interrupted."""
    log_path = tmp_path / "killed.db"
    environment = {**os.environ, "DECIRANK_RUNLOG": str(log_path)}
    printed: list[str] = []
    for _ in range(2):  # two processes in turn, the second finding the first one's runs
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_CHILD], stdout=subprocess.PIPE, text=True, env=environment
        )
        assert child.stdout is not None
        returned: list[str] = []
        deadline = time.monotonic() + 30
        while len(returned) < 150 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            returned.append(line.strip())
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        returned += child.stdout.read().splitlines()  # calls that returned before it died
        child.stdout.close()
        printed += [run_id.strip() for run_id in returned if run_id.strip()]
    assert len(printed) >= 300

    seen = committed(log_path)
    assert {run_id: seen.get(run_id) for run_id in printed} == dict.fromkeys(printed, "success")
    assert "running" in seen.values(), "the dead processes left runs open (at least their stuck rerank)"

    runlog = RunLog.open(log_path)  # opening the log again closes what dead processes left open
    statuses = {run["status"] for run in runlog.runs(limit=None)}
    assert "running" not in statuses and "interrupted" in statuses
    stuck = runlog.runs(tool="rerank", limit=None)
    assert [run["status"] for run in stuck] == ["interrupted", "interrupted"]
    assert stuck[0]["error_type"] == "Interrupted" and "ended" in stuck[0]["error"]


def test_runs_of_a_live_process_are_left_running(tmp_path):
    """Opening the log marks only dead writers' runs: this process's and another live one's stay running."""
    path = tmp_path / "runs.db"
    runlog = RunLog.open(path)
    mine = new_run_id()
    start(runlog, mine)
    runlog.flush()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        token = writer_token()
        alive_elsewhere = token.rsplit("|", 2)[0] + f"|{live.pid}|{_start_time(live.pid)}"
        dead_elsewhere = token.rsplit("|", 2)[0] + "|999999999|1"
        other_host = "another-host|boot|pid:[1]|123|456"
        for writer, run_id in ((alive_elsewhere, "alive"), (dead_elsewhere, "dead"), (other_host, "remote")):
            runlog.database.execute(
                "INSERT INTO runs (id, kind, tool, status, writer) VALUES (?, 'tool', 'rank', 'running', ?)",
                (run_id, writer),
            )
        assert RunLog.open(path).mark_interrupted() == 0, "opening already marked the dead one"
        assert committed(path) == {mine: "running", "alive": "running", "dead": "interrupted", "remote": "running"}
    finally:
        live.kill()
        live.wait()
    RunLog.open(path)
    assert committed(path)["alive"] == "interrupted", "once it ended, the next opening closed its run"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return ""


def test_interrupted_is_a_status_runs_can_be_filtered_by(tmp_path):
    """'interrupted' is one of the statuses, so listings and stats take it."""
    assert "interrupted" in RUN_STATUSES
    runlog = RunLog.open(tmp_path / "runs.db")
    assert runlog.runs(status="interrupted") == []


def test_runs_left_open_before_writers_were_recorded_are_interrupted_by_the_upgrade(tmp_path):
    """A log from before m002 keeps its finished runs; its open ones (writer unknown) become interrupted."""
    from decirank.stores._database import SQLiteDatabase
    from decirank.stores._migrations import migrate
    from decirank.stores.runlog import MIGRATIONS

    path = tmp_path / "runs.db"
    old = SQLiteDatabase(path, what="run log")
    migrate(old, MIGRATIONS[:1])
    for run_id, status in (("open", "running"), ("done", "success")):
        old.execute("INSERT INTO runs (id, kind, tool, status) VALUES (?, 'tool', 'rank', ?)", (run_id, status))
    old.close()
    RunLog.open(path)
    assert committed(path) == {"open": "interrupted", "done": "success"}


def test_the_wal_is_checkpointed_in_the_background_while_the_log_is_open(tmp_path):
    """Committing once per run, the log still copies its WAL into the database file as it goes."""
    path = tmp_path / "runs.db"
    runlog = RunLog.open(path)
    empty = path.stat().st_size
    for _ in range(3 * runlog.database.CHECKPOINT_EVERY):
        run_id = new_run_id()
        start(runlog, run_id, inputs={"text": "x" * 2000})
        finish(runlog, run_id)
    deadline = time.monotonic() + 10
    while path.stat().st_size <= empty and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.stat().st_size > empty, "pages reached the database file without a close"
    runlog.close()
