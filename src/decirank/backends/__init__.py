"""The backend registry: explicit ``provider:model`` names, never guessed.

Built-in providers are registered below by import path, so naming a provider
imports only its module (the CLI does not load onnxruntime to rank with
``lexical``). Third-party packages add providers through the entry point
group ``decirank.backends``: each entry point is a function that receives
:func:`register_provider` and calls it.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ..errors import ConfigError, InvalidInputError, UnknownModelError
from .base import Backend

__all__ = [
    "Backend",
    "Provider",
    "create_backend",
    "get_provider",
    "known_model_names",
    "parse_model_name",
    "providers",
    "register_provider",
    "suggest",
]

BackendFactory = Callable[..., Backend]


@dataclass(frozen=True)
class Provider:
    """A registered ``provider``: how to build its backends and what ``decirank models`` lists."""

    name: str
    #: ``factory(model, **options) -> Backend``, or ``"module:attribute"`` imported on first use.
    factory: BackendFactory | str
    default_model: str
    description: str
    #: Model names known in advance (listed by ``decirank models``); others may still work.
    models: tuple[str, ...] = ()
    #: Whether any model name is accepted (hosted services) or only those in ``models``.
    open_models: bool = False
    #: Environment variable holding the API key, for the listing.
    key_variable: str | None = None
    #: Options the factory takes besides the model name (``base_url``, ``api_key``, ...).
    options: tuple[str, ...] = ()

    def load_factory(self) -> BackendFactory:
        if callable(self.factory):
            return self.factory
        module_name, _, attribute = self.factory.partition(":")
        return getattr(importlib.import_module(module_name), attribute)


_providers: dict[str, Provider] = {}
# Keyed by the Provider itself, not its name: a backend built by a provider that has since been
# replaced (a plugin, or a test's stand-in and the original it restores) is never handed out.
_instances: dict[tuple[Provider, str, tuple[tuple[str, Any], ...]], Backend] = {}
_lock = threading.Lock()
_plugins_lock = threading.Lock()
_plugins_loaded = False


def register_provider(
    name: str,
    factory: BackendFactory | str,
    *,
    default_model: str,
    description: str,
    models: Iterable[str] = (),
    open_models: bool = False,
    key_variable: str | None = None,
    options: Iterable[str] = (),
) -> None:
    """Make ``name:MODEL`` resolvable. Registering a name again replaces it."""
    if not name or ":" in name:
        raise InvalidInputError("provider", "a name without ':'", got=name)
    models = tuple(models)
    if default_model not in models:
        models = (default_model, *models)
    with _lock:
        _providers[name] = Provider(
            name, factory, default_model, description, models, open_models, key_variable, tuple(options)
        )
        for key in [key for key in _instances if key[0].name == name]:
            del _instances[key]


def _load_plugins() -> None:
    """Run every ``decirank.backends`` entry point once per process, before any name is resolved."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded:
            return
        for entry_point in entry_points(group="decirank.backends"):
            try:
                entry_point.load()(register_provider)
            except Exception as error:
                raise ConfigError(
                    f"the backend plugin {entry_point.name!r} ({entry_point.value}) failed to register: "
                    f"{type(error).__name__}: {error}; fix or uninstall the package that provides it"
                ) from error
        _plugins_loaded = True


def providers() -> list[Provider]:
    _load_plugins()
    return sorted(_providers.values(), key=lambda p: p.name)


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def known_model_names() -> list[str]:
    names = []
    for provider in providers():
        names.append(provider.name)
        names.extend(f"{provider.name}:{model}" for model in provider.models)
    return names


def get_provider(name: str) -> Provider:
    _load_plugins()
    provider = _providers.get(name)
    if provider is None:
        raise UnknownModelError(name, known=list(_providers), suggestion=suggest(name, _providers))
    return provider


def parse_model_name(spec: str) -> tuple[Provider, str]:
    """Split ``provider[:model]`` and check both parts exist."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInputError("model", "a model name such as 'local' or 'systemone:jev-latest'", got=spec)
    provider_name, _, model = spec.strip().partition(":")
    try:
        provider = get_provider(provider_name)
    except UnknownModelError:
        raise UnknownModelError(
            spec, known=[p.name for p in providers()], suggestion=suggest(spec, known_model_names())
        ) from None
    model = model or provider.default_model
    if not provider.open_models and model not in provider.models:
        full_names = [f"{provider.name}:{m}" for m in provider.models]
        raise UnknownModelError(spec, known=full_names, suggestion=suggest(spec, full_names))
    return provider, model


def create_backend(spec: str, **options: Any) -> Backend:
    """The backend for ``spec``; one instance per name and options, so models load once."""
    provider, model = parse_model_name(spec)
    given = {name: value for name, value in options.items() if value is not None}
    for name in given:
        if name not in provider.options:
            accepted = ", ".join(provider.options) or "none"
            raise InvalidInputError(name, f"an option {provider.name} takes (it takes: {accepted})")
    key = (provider, model, tuple(sorted(given.items())))
    with _lock:
        backend = _instances.get(key)
    if backend is not None:
        return backend
    backend = provider.load_factory()(model, **given)
    with _lock:
        return _instances.setdefault(key, backend)


register_provider(
    "local",
    "decirank.backends.local:LocalBackend",
    default_model="default",
    description="embedded model, offline, no key (the default decider)",
    models=("minilm", "splade"),
)
register_provider(
    "lexical",
    "decirank.backends.lexical:LexicalBackend",
    default_model="bm25",
    description="BM25 readout, no model: fast, a baseline and a fallback",
)

# Every hosted or self-hosted model speaks one of two wire formats; the providers below are
# presets of them (base URL, key variable, declared limits), so a model is always named explicitly.
_HTTP_OPTIONS = ("base_url", "api_key", "timeout", "max_retries")
register_provider(
    "systemone",
    "decirank.backends.systemone:SystemOneBackend",
    default_model="local",
    description="any System One server (POST /v1/systemone) at base_url, default http://127.0.0.1:8000",
    open_models=True,
    key_variable="SYSTEMONE_API_KEY",
    options=_HTTP_OPTIONS,
)
register_provider(
    "typesafe",
    "decirank.backends.systemone:TypeSafeBackend",
    default_model="jev-latest",
    description="TypeSafe's hosted System One models (Jev)",
    open_models=True,
    key_variable="TYPESAFE_API_KEY",
    options=_HTTP_OPTIONS,
)
register_provider(
    "openrouter",
    "decirank.backends.systemone:OpenRouterBackend",
    default_model="typesafe/jev-latest",
    description="OpenRouter's decisions endpoint (System One body, reports cost)",
    open_models=True,
    key_variable="OPENROUTER_API_KEY",
    options=_HTTP_OPTIONS,
)
register_provider(
    "ollama",
    "decirank.backends.systemone:OllamaBackend",
    default_model="default",
    description="a System One model served by Ollama, default http://127.0.0.1:11434",
    open_models=True,
    options=_HTTP_OPTIONS,
)
register_provider(
    "vllm",
    "decirank.backends.systemone:VllmBackend",
    default_model="default",
    description="a System One model served by vLLM, default http://127.0.0.1:8000",
    open_models=True,
    key_variable="VLLM_API_KEY",
    options=_HTTP_OPTIONS,
)
register_provider(
    "openai",
    "decirank.backends.openai:OpenAIDecisionsBackend",
    default_model="gpt-6-luna",
    description="OpenAI's Decisions API (POST /v1/decisions), or any server of its shape at base_url",
    open_models=True,
    key_variable="OPENAI_API_KEY",
    options=_HTTP_OPTIONS,
)
