"""Where a user's decirank state lives.

Everything (config, run log, decision cache, artifact store) sits under one
directory per user, moved as a whole by ``DECIRANK_HOME``. Without it the
config goes to the platform's config directory and the data to its data
directory. Single files can be moved by their own variables.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["config_dir", "config_file", "data_dir", "data_file"]

APP_NAME = "decirank"


def _home() -> Path | None:
    home = os.environ.get("DECIRANK_HOME")
    return Path(home).expanduser() if home else None


def config_dir() -> Path:
    return _home() or Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    return _home() or Path(platformdirs.user_data_dir(APP_NAME))


def config_file() -> Path:
    """The TOML config file; ``DECIRANK_CONFIG`` names another."""
    override = os.environ.get("DECIRANK_CONFIG")
    return Path(override).expanduser() if override else config_dir() / "config.toml"


def data_file(name: str, *, variable: str | None = None) -> Path:
    """A file in the data directory, unless ``variable`` names another path."""
    override = os.environ.get(variable) if variable else None
    return Path(override).expanduser() if override else data_dir() / name
