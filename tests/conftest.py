"""Every test gets its own empty user directory, so no test sees another's config or run log."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_user_dir(tmp_path, monkeypatch):
    home = tmp_path / "decirank-home"
    monkeypatch.setenv("DECIRANK_HOME", str(home))
    for variable in ("DECIRANK_CONFIG", "DECIRANK_RUNLOG", "DECIRANK_DATABASE_URL", "DECIRANK_ARTIFACTS", "DECIRANK_CACHE"):
        monkeypatch.delenv(variable, raising=False)
    return home
