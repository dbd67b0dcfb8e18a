"""What the run log keeps of texts (full, shared once; or hashes only), and its retention (prune, keep_days,
max_mb, in the background), on a real SQLite file with real tool calls."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time

import pytest

import decirank
from decirank.errors import ConfigError, InvalidInputError
from decirank.stores.runlog import RunLog, current_runlog, new_run_id, set_runlog, texts_kept

BIG = "a medical note about fleas " * 40_000  # about 1 MB


@pytest.fixture
def runlog(tmp_path):
    opened = RunLog.open(tmp_path / "runs.db")
    set_runlog(opened)
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgres"])
def any_runlog(request, tmp_path):
    """The run log on a SQLite file, then on a throwaway PostgreSQL server (skipped where none can start)."""
    where = tmp_path / "runs.db" if request.param == "sqlite" else request.getfixturevalue("database_url")
    opened = RunLog.open(where)
    set_runlog(opened)
    yield opened
    opened.close()


def file_size(path) -> int:
    return sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))


def test_a_repeated_big_item_is_stored_once_and_read_back_whole(runlog, tmp_path):
    """A 1 MB document asked about in 20 calls grows the log by about 1 MB, not 20; each call shows it whole."""
    first = decirank.rerank("fleas", [BIG, "a cat"], model="lexical")
    runlog.flush()
    after_one = runlog.size()
    ids = [decirank.rerank("fleas", [BIG, f"a cat {n}"], model="lexical").run_id for n in range(19)]
    growth = runlog.size() - after_one
    assert growth < 400_000, f"19 repeated calls grew the log by {growth} bytes"
    for run_id in (first.run_id, ids[-1]):
        run = runlog.run(run_id)
        asked = repr([child["request"] for child in run["children"]])
        assert BIG in asked and "$text" not in asked
    assert runlog.status()["stored_texts"] == 1


def test_hashes_mode_keeps_no_text_anywhere_in_the_file(runlog, tmp_path, monkeypatch):
    """DECIRANK_RUNLOG_TEXTS=hashes: the words are in no row, the sha256 and length are, and the run says so."""
    secret = "Patient 4471 reports chest pain"
    monkeypatch.setenv("DECIRANK_RUNLOG_TEXTS", "hashes")
    result = decirank.rank([secret, "a routine check-up"], instructions="Which is urgent?", model="lexical")
    runlog.flush()
    connection = sqlite3.connect(tmp_path / "runs.db")
    dumped = "\n".join(connection.iterdump())
    connection.close()
    assert "chest pain" not in dumped
    assert hashlib.sha256(secret.encode()).hexdigest() in dumped
    run = runlog.run(result.run_id)
    assert run["texts"] == "hashes"
    assert {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "length": len(secret)} in run["inputs"]["items"]


def test_texts_kept_sets_the_mode_for_the_calls_in_a_block(runlog, monkeypatch):
    monkeypatch.setenv("DECIRANK_RUNLOG_TEXTS", "full")
    with texts_kept("hashes"):
        hidden = decirank.rank(["x1", "x2"], instructions="Which?", model="lexical")
    shown = decirank.rank(["x1", "x2"], instructions="Which?", model="lexical")
    assert runlog.run(hidden.run_id)["texts"] == "hashes"
    assert runlog.run(shown.run_id)["inputs"]["items"] == ["x1", "x2"]
    with pytest.raises(InvalidInputError, match="full or hashes"):
        with texts_kept("some"):
            pass
    monkeypatch.setenv("DECIRANK_RUNLOG_TEXTS", "partly")
    with pytest.raises(ConfigError, match="DECIRANK_RUNLOG_TEXTS"):
        decirank.rank(["x1", "x2"], instructions="Which?", model="lexical")


def test_prune_removes_whole_old_runs_and_never_a_running_one(any_runlog):
    """Old finished runs go with their model calls and texts; a running run (and a recent one) stays."""
    runlog = any_runlog
    old = [decirank.rerank("fleas", [BIG[: 1000 + n], "a cat"], model="lexical").run_id for n in range(3)]
    running = new_run_id()
    runlog.start_run(running, tool="rank", role="lexical", inputs={}, started=time.time() - 100 * 86_400)
    runlog.flush()
    cutoff = time.time()
    time.sleep(0.01)
    recent = decirank.rerank("fleas", ["a dog", "a cat"], model="lexical").run_id
    calls = sum(len(runlog.run(run_id)["children"]) for run_id in old)
    before = runlog.count(kind="model")
    assert calls >= 3
    removed = runlog.prune(before=cutoff)
    assert removed["runs"] == 3 + calls and removed["texts"] == 3
    assert runlog.count(kind="model") == before - calls
    assert {run["id"] for run in runlog.runs(limit=None)} == {running, recent}
    # No model call is left without its parent, and no stored text without a run referring to it.
    rows = runlog.database.query(
        "SELECT COUNT(*) AS n FROM runs c WHERE c.parent_id IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.id = c.parent_id)"
    )
    assert rows[0]["n"] == 0
    assert runlog.status()["stored_texts"] == 0


def test_size_and_status_are_read_on_either_database(any_runlog):
    """decirank runs status's figures come from the database in use; a size the log is under prunes nothing."""
    run_id = decirank.rerank("fleas", ["a dog", "a cat"], model="lexical").run_id
    any_runlog.flush()
    assert any_runlog.size() > 0
    assert any_runlog.status()["runs"] >= 1
    assert any_runlog.prune(max_bytes=any_runlog.size() * 10)["runs"] == 0
    assert any_runlog.run(run_id)["status"] == "success"


def test_prune_to_a_size_removes_the_oldest_first(runlog):
    ids = [decirank.rerank("fleas", [f"{n} " + BIG[:200_000], "a cat"], model="lexical").run_id for n in range(6)]
    assert runlog.size() > 1_000_000
    runlog.prune(max_bytes=600_000)
    assert runlog.size() <= 600_000
    left = [run["id"] for run in runlog.runs(limit=None)]
    assert left and ids[-1] in left and ids[0] not in left


def test_keep_days_in_the_config_prunes_in_the_background(isolated_user_dir):
    """[runlog] keep_days: the process's own log is pruned when it opens it, without a call waiting on it."""
    runlog = RunLog.open(isolated_user_dir / "runs.db")
    stale = new_run_id()
    runlog.start_run(stale, tool="rank", role="lexical", inputs={}, started=time.time() - 40 * 86_400)
    runlog.finish_run(stale, status="success", models="lexical", outputs=None, error=None, usage={},
                      ended=time.time() - 40 * 86_400, duration=0.1)  # fmt: skip
    runlog.close()
    (isolated_user_dir / "config.toml").write_text("[runlog]\nkeep_days = 30\n")
    started = time.monotonic()
    decirank.rank(["a", "b"], instructions="Which?", model="lexical")
    current = current_runlog()
    assert current.retention is not None
    deadline = time.monotonic() + 20
    while current.count(kind="tool") > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [run["id"] for run in current.runs(limit=None)] != [] and stale not in {
        run["id"] for run in current.runs(limit=None)
    }
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[runlog]\ntexts = "some"\n', "runlog.texts"),
        ("[runlog]\nkeep_days = -1\n", "runlog.keep_days"),
        ('[runlog]\nmax_mb = "big"\n', "runlog.max_mb"),
    ],
)
def test_a_bad_runlog_section_is_a_config_error_naming_the_key(isolated_user_dir, text, message):
    isolated_user_dir.mkdir(parents=True, exist_ok=True)
    (isolated_user_dir / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        decirank.rank(["a", "b"], instructions="Which?", model="lexical")


def test_runs_off_marker_and_config_switch_the_log_off(isolated_user_dir):
    from decirank.stores.runlog import configured_location, off_marker

    assert configured_location() is not None
    off_marker().parent.mkdir(parents=True, exist_ok=True)
    off_marker().touch()
    assert configured_location() is None and current_runlog() is None
    off_marker().unlink()
    (isolated_user_dir / "config.toml").write_text("[runlog]\nenabled = false\n")
    assert configured_location() is None
