"""Every test gets its own empty user directory, so no test sees another's config or run log."""

from __future__ import annotations

import os

import pytest

from decirank.stores.runlog import reset_runlog

# postgres_server and database_url: a real PostgreSQL for the tests that ask for one.
pytest_plugins = ["tests.postgres"]


@pytest.fixture(autouse=True)
def isolated_user_dir(tmp_path, monkeypatch):
    """DECIRANK_HOME is a fresh folder, and no variable that moves state or names a role leaks in."""
    home = tmp_path / "decirank-home"
    monkeypatch.setenv("DECIRANK_HOME", str(home))
    for variable in (
        "DECIRANK_CONFIG",
        "DECIRANK_RUNLOG",
        "DECIRANK_DATABASE_URL",
        "DECIRANK_ARTIFACTS",
        "DECIRANK_CACHE",
        "DECIRANK_CACHE_DB",
    ):
        monkeypatch.delenv(variable, raising=False)
    for variable in [name for name in os.environ if name.startswith("DECIRANK_ROLE_")]:
        monkeypatch.delenv(variable)
    yield home
    reset_runlog()


@pytest.fixture
def store(tmp_path):
    """An artifact store in a file of the test's own."""
    from decirank.stores.artifacts import ArtifactStore

    with ArtifactStore(tmp_path / "artifacts.db") as opened:
        yield opened
