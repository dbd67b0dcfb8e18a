"""The artifact store: refs to text, stamps and registered types in a real SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest

from decirank import ArtifactStore, InvalidInputError, Stamp, register_validation_type
from decirank.stores.artifacts import MIGRATIONS


def test_put_then_get_returns_the_text_exactly(store):
    """Text comes back byte for byte, unicode, blank lines and empty text included."""
    store.put("run1/agent-a", "héllo\n\n  wörld\n")
    store.put("run1/agent-b", "")
    assert store.get("run1/agent-a") == "héllo\n\n  wörld\n"
    assert store.get("run1/agent-b") == ""


def test_put_replaces_and_get_of_a_missing_ref_is_none(store):
    """A second put replaces the text and moves updated_at; an unknown ref reads as None."""
    store.put("r/a", "first")
    before = store.list("r/")[0]
    store.put("r/a", "second")
    after = store.list("r/")[0]
    assert store.get("r/a") == "second"
    assert after.created_at == before.created_at and after.updated_at > before.updated_at
    assert store.get("r/missing") is None


def test_list_filters_by_prefix_taking_wildcards_literally(store):
    """A prefix matches the start of refs; '%' and '_' are not SQL wildcards."""
    for ref in ["run1/a", "run1/b", "run10/a", "run2/a", "r%n/x", "r_n/y"]:
        store.put(ref, ref)
    assert [info.ref for info in store.list("run1/")] == ["run1/a", "run1/b"]
    assert [info.ref for info in store.list("run1")] == ["run1/a", "run1/b", "run10/a"]
    assert [info.ref for info in store.list("r%")] == ["r%n/x"]
    assert [info.ref for info in store.list("r_")] == ["r_n/y"]
    assert len(store.list()) == 6
    info = store.list("run2")[0]
    assert (info.run_id, info.agent_id, info.size) == ("run2", "a", 6)


def test_delete_removes_the_artifact_and_its_stamps(store):
    """delete is True once, then False; the ref's stamps go with it."""
    store.put("r/a", "x")
    store.add_stamps([Stamp("r/a", "score-run", "validate:json", 1.0, "VALID", 1, False, "parses as json")])
    assert store.delete("r/a") is True
    assert store.get("r/a") is None and store.stamps("r/a") == []
    assert store.delete("r/a") is False


@pytest.mark.parametrize("bad", ["plain", "a/b/c", "/b", "a/", " a/b", "a/b ", "a/\tb", "", 42, None])
def test_a_bad_ref_is_a_typed_error_naming_the_field(store, bad):
    """A ref must be run_id/agent_id: two non-empty parts."""
    with pytest.raises(InvalidInputError) as raised:
        store.put(bad, "text")
    assert raised.value.field == "ref"
    assert "run_id/agent_id" in str(raised.value)


def test_stamps_are_a_history_readable_by_ref_and_by_run(store):
    """Each scoring run adds its stamps, stamped with the time; both ways of reading them agree."""
    store.put("r/a", "x")
    store.put("r/b", "y")
    store.add_stamps([
        Stamp("r/a", "run-1", "exec:true", 1.0, "VALID", 1, False, "command exited with status 0"),
        Stamp("r/b", "run-1", "exec:true", None, "UNKNOWN", 2, True, "pruned: not scored"),
    ])
    store.add_stamps([Stamp("r/a", "run-2", "score:short", 0.5, "PARTIAL", 1, False, "level 2")])
    history = store.stamps("r/a")
    assert [(s.run_id, s.score, s.beam_rank) for s in history] == [("run-1", 1.0, 1), ("run-2", 0.5, 1)]
    assert all(isinstance(s.created_at, datetime) and s.created_at.tzinfo == UTC for s in history)
    run = store.stamps(run_id="run-1")
    assert [(s.ref, s.verdict, s.pruned) for s in run] == [("r/a", "VALID", False), ("r/b", "UNKNOWN", True)]
    assert store.stamps("r/b", run_id="run-2") == []
    assert run[1].to_dict()["score"] is None
    with pytest.raises(InvalidInputError):
        store.stamps()


def test_the_default_file_lives_in_the_user_dir_or_where_the_variable_says(isolated_user_dir, tmp_path, monkeypatch):
    """DECIRANK_HOME moves the store with the rest of the user's state; DECIRANK_ARTIFACTS moves it alone."""
    default = ArtifactStore()
    default.put("r/a", "x")
    default.close()
    assert default.path == isolated_user_dir / "artifacts.db" and default.path.is_file()
    monkeypatch.setenv("DECIRANK_ARTIFACTS", str(tmp_path / "elsewhere" / "mine.db"))
    moved = ArtifactStore()
    assert moved.path == tmp_path / "elsewhere" / "mine.db"
    assert moved.get("r/a") is None
    moved.close()


def test_opening_creates_nothing_until_first_use(tmp_path):
    """Constructing a store touches no disk, so building one is free."""
    ArtifactStore(tmp_path / "never" / "artifacts.db")
    assert not (tmp_path / "never").exists()


def test_migrations_are_named_recorded_once_and_the_file_is_in_wal_mode(tmp_path):
    """Reopening applies nothing again; WAL lets readers run beside a writer."""
    path = tmp_path / "artifacts.db"
    with ArtifactStore(path) as first:
        first.put("r/a", "x")
    with ArtifactStore(path) as second:
        assert second.get("r/a") == "x"
    with sqlite3.connect(path) as db:
        names = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY name")]
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert names == [migration.name for migration in MIGRATIONS]
    assert mode == "wal"


WRITER = textwrap.dedent(
    """
    import sys
    from decirank import ArtifactStore, Stamp
    path, worker = sys.argv[1], sys.argv[2]
    with ArtifactStore(path) as store:
        for n in range(40):
            store.put(f"w{worker}/a{n}", f"text {worker} {n}")
            store.add_stamps([Stamp(f"w{worker}/a{n}", f"run-{worker}", "exec:true", 1.0, "VALID", n + 1, False, "ok")])
    """
)


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    """Four processes creating and writing one new file at once: every row lands, each migration once."""
    path = tmp_path / "shared.db"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w)]) for w in range(4)]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0, 0]
    with ArtifactStore(path) as store:
        assert len(store.list()) == 160
        assert store.get("w3/a39") == "text 3 39"
        assert len(store.stamps(run_id="run-2")) == 40
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)


def test_registered_types_are_kept_and_built_in_names_refused(store):
    """validate:<type> types live in the store; json and friends belong to their parsers."""
    registered = register_validation_type("sql", "a single SQL SELECT statement", store=store)
    assert registered.name == "sql"
    register_validation_type("sql", "a SQL query", store=store)
    assert store.get_type("sql").description == "a SQL query"
    assert [t.name for t in store.types()] == ["sql"]
    with pytest.raises(InvalidInputError) as raised:
        register_validation_type("json", "anything", store=store)
    assert raised.value.field == "name"
    with pytest.raises(InvalidInputError):
        register_validation_type("bad name", "x", store=store)
    with pytest.raises(InvalidInputError) as raised:
        register_validation_type("ok", "   ", store=store)
    assert raised.value.field == "description"
    assert store.delete_type("sql") is True and store.delete_type("sql") is False
