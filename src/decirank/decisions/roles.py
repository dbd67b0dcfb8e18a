"""Roles: a name for an ordered chain of models, a primary and its fallbacks.

A role's models come from, first to last:

- the environment variable ``DECIRANK_ROLE_<NAME>`` (``decider`` ->
  ``DECIRANK_ROLE_DECIDER``), a comma-separated list of model names;
- the config file's ``[roles.<name>] models = [...]``;
- for ``decider`` only, the embedded ``local`` model.

Per-provider options (``[providers.systemone] base_url = ...``) are given to
every backend of that provider; keys always come from environment variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config, load_config
from ..backends import get_provider, known_model_names, parse_model_name, providers, suggest
from ..errors import ConfigError, UnknownModelError

__all__ = [
    "DEFAULT_CHAIN",
    "DEFAULT_ROLE",
    "MODEL_NAME_SOURCE",
    "RoleChain",
    "check_provider_sections",
    "provider_options",
    "resolve_chain",
    "role_names",
]

DEFAULT_ROLE = "decider"
DEFAULT_CHAIN = ("local",)
ENV_PREFIX = "DECIRANK_ROLE_"
#: The source of a chain that is one explicit model name, not a role.
MODEL_NAME_SOURCE = "the model name"


@dataclass(frozen=True)
class RoleChain:
    """What a name resolved to: its model names, and where they were set (for messages)."""

    name: str
    models: tuple[str, ...]
    source: str

    def full_model_names(self) -> list[str]:
        """Each model as ``provider:model``, checked to exist; a wrong one names where it was set."""
        names = []
        for position, spec in enumerate(self.models):
            try:
                provider, model = parse_model_name(spec)
            except UnknownModelError as error:
                if self.source == MODEL_NAME_SOURCE:
                    raise
                raise ConfigError(f"{self.source}[{position}]: {error}") from None
            names.append(f"{provider.name}:{model}")
        return names


def _env_variable(role: str) -> str:
    return ENV_PREFIX + role.upper().replace("-", "_")


def role_names(config: Config | None = None) -> list[str]:
    """Every role that resolves: ``decider``, the config's roles, and those set by environment."""
    config = config or load_config()
    names = {DEFAULT_ROLE, *config.roles}
    names.update(
        variable[len(ENV_PREFIX) :].lower() for variable in os.environ if variable.startswith(ENV_PREFIX)
    )
    return sorted(names)


def _role_from_env(role: str) -> RoleChain | None:
    variable = _env_variable(role)
    value = os.environ.get(variable)
    if value is None:
        return None
    models = tuple(model.strip() for model in value.split(",") if model.strip())
    if not models:
        raise ConfigError(f"{variable}: expected comma-separated model names such as 'systemone:jev-latest,local'")
    return RoleChain(role, models, variable)


def resolve_chain(name: str, config: Config | None = None) -> RoleChain:
    """The model names ``name`` stands for: a role's chain, or a ``provider[:model]`` name alone."""
    config = config or load_config()
    from_env = _role_from_env(name)
    if from_env is not None:
        return from_env
    if name in config.roles:
        return RoleChain(name, config.roles[name], f"{config.path}: roles.{name}.models")
    if name == DEFAULT_ROLE:
        return RoleChain(name, DEFAULT_CHAIN, "the default")
    if ":" in name or any(provider.name == name for provider in providers()):
        return RoleChain(name, (name,), MODEL_NAME_SOURCE)
    # The roles and the providers (each a model name alone, its default model) say what to give instead;
    # ``decirank models`` lists every model of each.
    known = [*role_names(config), *(provider.name for provider in providers())]
    raise UnknownModelError(name, known=known, suggestion=suggest(name, [*role_names(config), *known_model_names()]))


def provider_options(provider: str, config: Config | None = None) -> Mapping[str, Any]:
    """The config's options for ``provider``, checked against what the provider takes."""
    config = config or load_config()
    options = config.providers.get(provider, {})
    if options:
        accepted = get_provider(provider).options
        for option in options:
            if option not in accepted:
                raise ConfigError(
                    f"{config.path}: providers.{provider}.{option}: {provider} takes no such option "
                    f"(it takes: {', '.join(accepted) or 'none'})"
                )
    return options


def check_provider_sections(config: Config) -> None:
    """A ``[providers.X]`` for a provider nobody registered is a typo or a missing plugin."""
    registered = [provider.name for provider in providers()]
    for name in config.providers:
        if name not in registered:
            hint = suggest(name, registered)
            raise ConfigError(
                f"{config.path}: providers.{name}: no provider {name!r} is registered"
                + (f"; did you mean {hint!r}?" if hint else f" (known: {', '.join(registered)})")
            )
