"""Every test gets its own empty user directory, so no test sees another's config or run log."""

from __future__ import annotations

import os
import signal

import pytest

from decirank.stores.runlog import reset_runlog

# postgres_server and database_url: a real PostgreSQL for the tests that ask for one.
pytest_plugins = ["tests.postgres"]

# A suite started in the background by a shell without job control inherits SIGINT ignored, and so would every
# command it starts: the Ctrl-C tests would wait on commands that cannot be interrupted. A handler, unlike an
# ignored signal, is not inherited, so the commands get the default that a terminal's Ctrl-C meets.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
