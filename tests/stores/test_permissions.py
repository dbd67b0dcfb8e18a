"""Every store keeps the user's texts private: files 0600 and folders 0700 whatever the umask, and what an older
release left readable by others is tightened when a store opens it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from decirank.errors import InvalidInputError
from decirank.stores.calibrations import CalibrationStore

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# Runs in a child process so that its umask (022, the common default) is the one every store meets.
STORE_EVERYTHING = textwrap.dedent(
    """
    import os
    os.umask(0o022)
    import decirank
    from decirank.stores.artifacts import ArtifactStore
    from decirank.stores.examples import ExampleStore
    from decirank.stores.cache import current_cache
    from decirank.stores.runlog import current_runlog

    decirank.rank(["a dog", "a cat"], instructions="Which is a pet?", model="lexical")
    runlog = current_runlog()
    runlog.flush()
    with ArtifactStore() as store:
        store.put("run1/agent1", "a medical text")
    ExampleStore().put("notes", [{"state": "a dog", "answer": True}])
    os.environ["DECIRANK_CACHE"] = "on"
    decirank.rank(["a dog", "a cat"], instructions="Which is a pet?", model="lexical")
    current_cache().count()
    # The -wal and -shm files exist while the databases are open: look at them now.
    for root, folders, files in os.walk(os.environ["DECIRANK_HOME"]):
        for name in folders + files:
            path = os.path.join(root, name)
            print(oct(os.stat(path).st_mode & 0o777), os.path.relpath(path, os.environ["DECIRANK_HOME"]))
    """
)


def test_every_store_file_is_0600_and_folder_0700_under_umask_022(isolated_user_dir):
    """Run log (with its -wal and -shm), cache, artifacts and example sets: none readable by another user."""
    done = subprocess.run(
        [sys.executable, "-c", STORE_EVERYTHING], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = dict(reversed(line.split(" ", 1)) for line in done.stdout.splitlines())
    for name in ("runs.db", "runs.db-wal", "runs.db-shm", "cache.db", "artifacts.db", "examples/notes.jsonl"):
        assert seen.get(name) == "0o600", (name, seen)
    assert seen["examples"] == "0o700", seen
    assert all(value in ("0o600", "0o700") for value in seen.values()), seen
    assert mode(isolated_user_dir) == 0o700


def test_files_an_older_release_left_open_are_tightened_when_opened(isolated_user_dir, tmp_path):
    """A 0644 run log, its -wal, and 0644 calibrations in a 0755 folder become private when opened."""
    import sqlite3

    from decirank.stores.runlog import RunLog

    isolated_user_dir.mkdir(mode=0o755)
    os.chmod(isolated_user_dir, 0o755)
    path = isolated_user_dir / "runs.db"
    connection = sqlite3.connect(path, isolation_level=None)  # kept open, so its -wal stays
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("CREATE TABLE t (x)")
    connection.execute("INSERT INTO t VALUES (1)")
    for name in ("runs.db", "runs.db-wal"):
        os.chmod(isolated_user_dir / name, 0o644)
    calibrations = isolated_user_dir / "calibrations"
    calibrations.mkdir(mode=0o755)
    os.chmod(calibrations, 0o755)
    (calibrations / "old.json").write_text("{}")
    os.chmod(calibrations / "old.json", 0o644)

    runlog = RunLog.open(path)
    try:
        assert mode(path) == 0o600
        assert mode(isolated_user_dir / "runs.db-wal") == 0o600
        assert mode(isolated_user_dir) == 0o700
    finally:
        runlog.close()
        connection.close()
    CalibrationStore()
    assert (mode(calibrations), mode(calibrations / "old.json")) == (0o700, 0o600)


def test_a_folder_outside_the_data_directory_is_left_to_its_owner(tmp_path):
    """DECIRANK_RUNLOG pointed into a shared folder makes the file private, not the folder."""
    from decirank.stores.runlog import RunLog

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    runlog = RunLog.open(shared / "runs.db")
    runlog.close()
    assert (mode(shared), mode(shared / "runs.db")) == (0o755, 0o600)


def test_a_bad_calibration_name_is_refused_as_a_calibration_name():
    """Not "expected an example set name": the error names what was asked for."""
    with pytest.raises(InvalidInputError) as caught:
        CalibrationStore().require("../up")
    assert "a calibration name" in str(caught.value) and "example set" not in str(caught.value)
