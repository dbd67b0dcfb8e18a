"""Backends are named explicitly as provider:model; wrong names get a suggestion."""

from __future__ import annotations

import pytest

from decirank.backends import create_backend, parse_model_name, register_provider
from decirank.decisions.decider import Decider
from decirank.errors import InvalidInputError, UnknownModelError
from decirank.testing import ScriptedBackend


def test_provider_alone_means_its_default_model():
    provider, model = parse_model_name("lexical")
    assert (provider.name, model) == ("lexical", "bm25")
    assert create_backend("lexical") is create_backend("lexical:bm25"), "one instance per name"


@pytest.mark.parametrize(("name", "suggestion"), [("lexicl", "lexical"), ("lexical:bm52", "lexical:bm25"), ("decidr", "decider")])
def test_unknown_names_suggest_the_closest(name, suggestion):
    with pytest.raises(UnknownModelError) as caught:
        Decider.resolve(name)
    assert caught.value.suggestion == suggestion
    assert repr(suggestion) in str(caught.value)


def test_options_a_provider_does_not_take_are_refused():
    with pytest.raises(InvalidInputError) as caught:
        create_backend("lexical", base_url="http://127.0.0.1:1")
    assert caught.value.field == "base_url"


def test_plugins_register_providers():
    backend = ScriptedBackend("m1")
    register_provider("plugin", lambda model, **_: backend, default_model="m1", description="a plugin", models=["m2"])
    assert create_backend("plugin") is backend
    with pytest.raises(UnknownModelError):
        create_backend("plugin:m3")


def test_default_role_is_the_embedded_model():
    assert Decider.resolve().model_names == ["local:default"]
