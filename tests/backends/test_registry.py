"""Backends are named explicitly as provider:model; wrong names get a suggestion."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import decirank.backends as registry
from decirank.backends import create_backend, parse_model_name, register_provider
from decirank.backends.lexical import LexicalBackend
from decirank.decisions.decider import Decider
from decirank.errors import ConfigError, InvalidInputError, UnknownModelError
from decirank.testing import ScriptedBackend, use_backend


@pytest.fixture
def isolated_registry(monkeypatch):
    """Providers and instances registered by a test are gone after it."""
    monkeypatch.setattr(registry, "_providers", dict(registry._providers))
    monkeypatch.setattr(registry, "_instances", dict(registry._instances))


def register_demo(register):
    """An entry point's function, as a third-party package would ship it."""
    register("demo", lambda model, **_: ScriptedBackend(model), default_model="d1", description="a plugin")


def test_provider_alone_means_its_default_model():
    """A bare provider name means its default model, and both names share one instance."""
    provider, model = parse_model_name("lexical")
    assert (provider.name, model) == ("lexical", "bm25")
    assert create_backend("lexical") is create_backend("lexical:bm25"), "one instance per name"


@pytest.mark.parametrize(
    ("name", "suggestion"), [("lexicl", "lexical"), ("lexical:bm52", "lexical:bm25"), ("decidr", "decider")]
)
def test_unknown_names_suggest_the_closest(name, suggestion):
    """An unknown provider, model or role name is refused with the closest known name."""
    with pytest.raises(UnknownModelError) as caught:
        Decider.resolve(name)
    assert caught.value.suggestion == suggestion
    assert repr(suggestion) in str(caught.value)


def test_options_a_provider_does_not_take_are_refused():
    """An option the provider does not take is an InvalidInputError naming it."""
    with pytest.raises(InvalidInputError) as caught:
        create_backend("lexical", base_url="http://127.0.0.1:1")
    assert caught.value.field == "base_url"


def test_a_registered_factory_resolves_only_its_models(isolated_registry):
    """A provider registered with a factory resolves to its backend, and only its listed models are accepted."""
    backend = ScriptedBackend("m1")
    register_provider("plugin", lambda model, **_: backend, default_model="m1", description="a plugin", models=["m2"])
    assert create_backend("plugin") is backend
    with pytest.raises(UnknownModelError):
        create_backend("plugin:m3")


def test_entry_points_register_providers_before_any_name_is_resolved(isolated_registry, monkeypatch):
    """Each installed ``decirank.backends`` entry point is called with register_provider on first use."""
    demo = EntryPoint("demo", f"{__name__}:register_demo", "decirank.backends")
    monkeypatch.setattr(registry, "entry_points", lambda group: [demo] if group == "decirank.backends" else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    assert create_backend("demo").name == "scripted:d1"


def test_a_broken_plugin_is_a_config_error_naming_it(isolated_registry, monkeypatch):
    """A plugin that fails to load is a ConfigError naming its entry point, not the plugin's own exception."""
    broken = EntryPoint("broken", "decirank_no_such_module:register", "decirank.backends")
    monkeypatch.setattr(registry, "entry_points", lambda group: [broken])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    with pytest.raises(ConfigError, match=r"'broken' \(decirank_no_such_module:register\) failed to register"):
        create_backend("lexical")


def test_a_replaced_provider_never_hands_out_its_old_backends():
    """Once a stand-in registered under a provider's name is removed, the name builds the real backend again."""
    with use_backend(ScriptedBackend("bm25"), provider="lexical") as name:
        assert isinstance(create_backend(name), ScriptedBackend)
    assert isinstance(create_backend("lexical"), LexicalBackend)


def test_default_role_is_the_embedded_model():
    """Without a config, the decider role is the embedded local model."""
    assert Decider.resolve().model_names == ["local:default"]
