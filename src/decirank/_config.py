"""The user's TOML config file, read once per change and checked on the way in.

The file is ``decirank._paths.config_file()``. A missing file is an empty
config. Sections other surfaces own are left alone; the sections read here
are checked, and a wrong one is a :class:`ConfigError` naming the file and
the key::

    [roles.decider]                 # a role's models, in the order they are tried
    models = ["systemone:jev-latest", "local"]

    [providers.systemone]           # options for every model of a provider
    base_url = "https://api.typesafe.ai"

    [cache]
    enabled = true                  # the decision cache (DECIRANK_CACHE=on|off wins)

    [tracing]
    enabled = true                  # OpenTelemetry spans (DECIRANK_TRACING=on|off wins)

    [runlog]
    enabled = false                 # the run log (DECIRANK_RUNLOG=off, or a path, wins)
    texts = "hashes"                # "full" or "hashes" (DECIRANK_RUNLOG_TEXTS wins)
    keep_days = 30                  # runs older are removed, in the background
    max_mb = 500                    # the oldest runs are removed past this size

API keys are never stored here: they come from each provider's environment
variable.
"""

from __future__ import annotations

import os
import threading
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._paths import config_file
from .errors import ConfigError

__all__ = ["RUNLOG_TEXTS", "Config", "load_config", "switch"]

# Option names that would put a secret in the file; keys belong in environment variables.
_SECRET_OPTIONS = frozenset({"api_key", "key", "token", "password", "secret"})


@dataclass(frozen=True)
class Config:
    path: Path
    #: Role name -> model names, in the order they are tried.
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Provider name -> options given to every backend of that provider.
    providers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``[cache] enabled``; None when the file does not say.
    cache_enabled: bool | None = None
    #: ``[tracing] enabled``; None when the file does not say.
    tracing_enabled: bool | None = None
    #: ``[runlog] enabled``, ``texts`` ("full" or "hashes"), ``keep_days`` and ``max_mb``; None when not said.
    runlog_enabled: bool | None = None
    runlog_texts: str | None = None
    runlog_keep_days: float | None = None
    runlog_max_mb: float | None = None


_cached: tuple[Path, tuple[int, int] | None, Config] | None = None
_lock = threading.Lock()


def load_config(path: Path | None = None) -> Config:
    """The config at ``path`` (default: the user's); parsed again only when the file changes."""
    global _cached
    path = path or config_file()
    try:
        stat = path.stat()
        signature: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        signature = None
    with _lock:
        if _cached is not None and _cached[0] == path and _cached[1] == signature:
            return _cached[2]
    config = _parse(path) if signature is not None else Config(path)
    with _lock:
        _cached = (path, signature, config)
    return config


def _parse(path: Path) -> Config:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot be read: {error}") from None
    return Config(
        path,
        roles=MappingProxyType(_parse_roles(path, data.get("roles", {}))),
        providers=MappingProxyType(_parse_providers(path, data.get("providers", {}))),
        cache_enabled=_parse_enabled(path, "cache", data.get("cache", {})),
        tracing_enabled=_parse_enabled(path, "tracing", data.get("tracing", {})),
        **_parse_runlog(path, data.get("runlog", {})),
    )


#: What ``[runlog] texts`` (and ``DECIRANK_RUNLOG_TEXTS``) may say.
RUNLOG_TEXTS = ("full", "hashes")


def _parse_runlog(path: Path, section: Any) -> dict[str, Any]:
    table = _table(path, "runlog", section)
    texts = table.get("texts")
    if texts is not None and texts not in RUNLOG_TEXTS:
        raise ConfigError(f"{path}: runlog.texts: expected \"full\" or \"hashes\", got {texts!r}")
    limits = {}
    for key in ("keep_days", "max_mb"):
        value = table.get(key)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value is not None and not (number and 0 < value < float("inf")):
            raise ConfigError(f"{path}: runlog.{key}: expected a number greater than 0, got {value!r}")
        limits[key] = float(value) if value is not None else None
    return {
        "runlog_enabled": _parse_enabled(path, "runlog", table),
        "runlog_texts": texts,
        "runlog_keep_days": limits["keep_days"],
        "runlog_max_mb": limits["max_mb"],
    }


def _table(path: Path, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {key}: expected a table, got {type(value).__name__}")
    return value


def _parse_roles(path: Path, section: Any) -> dict[str, tuple[str, ...]]:
    roles = {}
    for name, role in _table(path, "roles", section).items():
        if ":" in name:
            raise ConfigError(f"{path}: roles.{name}: a role name cannot contain ':' (that is a model name)")
        models = _table(path, f"roles.{name}", role).get("models")
        if (
            not isinstance(models, list)
            or not models
            or not all(isinstance(model, str) and model.strip() for model in models)
        ):
            raise ConfigError(
                f"{path}: roles.{name}.models: expected a non-empty list of model names "
                f"such as [\"systemone:jev-latest\", \"local\"], got {models!r}"
            )
        roles[name] = tuple(model.strip() for model in models)
    return roles


def _parse_providers(path: Path, section: Any) -> dict[str, Mapping[str, Any]]:
    providers = {}
    for name, options in _table(path, "providers", section).items():
        options = _table(path, f"providers.{name}", options)
        for option, value in options.items():
            key = f"providers.{name}.{option}"
            if option in _SECRET_OPTIONS or option.endswith("_key"):
                raise ConfigError(
                    f"{path}: {key}: keys are never stored in the config; "
                    "set the provider's environment variable instead (decirank models lists it)"
                )
            if not isinstance(value, str | int | float | bool):
                raise ConfigError(f"{path}: {key}: expected a string, number or boolean, got {value!r}")
        providers[name] = MappingProxyType(dict(options))
    return providers


def _parse_enabled(path: Path, name: str, section: Any) -> bool | None:
    enabled = _table(path, name, section).get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise ConfigError(f"{path}: {name}.enabled: expected true or false, got {enabled!r}")
    return enabled


_ON = frozenset({"on", "1", "true", "yes"})
_OFF = frozenset({"off", "0", "false", "no"})


def switch(variable: str, configured: Callable[[Config], bool | None]) -> bool:
    """An on/off setting: ``variable`` (on or off) when set, else what the config says, else off."""
    setting = os.environ.get(variable, "").strip().lower()
    if setting in _ON:
        return True
    if setting in _OFF:
        return False
    if setting:
        raise ConfigError(f"{variable}: expected on or off, got {setting!r}")
    return bool(configured(load_config()))
