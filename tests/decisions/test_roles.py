"""Roles name chains of models in the config file or the environment; mistakes name where they are."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import decirank
from decirank.backends import _providers, register_provider
from decirank.decisions.decider import Decider
from decirank.decisions.roles import resolve_chain, role_names
from decirank.errors import ConfigError, UnknownModelError
from decirank.testing import ScriptedBackend

from .conftest import Alpha, Beta


@pytest.fixture
def config(isolated_user_dir):
    """Write the user's config.toml."""
    path = isolated_user_dir / "config.toml"

    def write(text: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return write


def test_without_a_config_the_decider_is_the_embedded_model():
    """With no config, 'decider' is the only role and it resolves to the embedded local model."""
    chain = resolve_chain("decider")
    assert chain.full_model_names() == ["local:default"]
    assert role_names() == ["decider"]


def test_a_configured_role_is_its_chain_of_models_in_order(config, use_models):
    """A role in the config file resolves to its models, in the order given."""
    use_models(Alpha("one"), Beta("one"))
    config('[roles.decider]\nmodels = ["alpha:one", "beta:one", "lexical"]\n')
    decider = Decider.resolve()
    assert decider.model_names == ["alpha:one", "beta:one", "lexical:bm25"]
    assert decider.name == "decider"


def test_tools_ask_the_configured_default_role(config, use_models):
    """A tool called without a model asks the models the config gives 'decider'."""
    first = Alpha("one")
    use_models(first)
    config('[roles.decider]\nmodels = ["alpha:one"]\n')
    result = decirank.rerank("q", ["a", "b"])
    assert result.model == "alpha:one" and len(first.requests) == 1


def test_the_environment_names_a_role_and_wins_over_the_file(config, monkeypatch):
    """DECIRANK_ROLE_<NAME> defines a role and overrides the same role in the file."""
    config('[roles.fast]\nmodels = ["local"]\n')
    monkeypatch.setenv("DECIRANK_ROLE_FAST", "lexical, lexical:bm25")
    assert Decider.resolve("fast").model_names == ["lexical:bm25", "lexical:bm25"]
    assert "fast" in role_names()


def test_provider_options_from_the_config_reach_every_backend_of_that_provider(config):
    """A provider's config options reach its backends, and options given in code win over them."""
    created = []

    def factory(model, **options):
        created.append((model, options))
        return ScriptedBackend(model)

    register_provider(
        "optioned", factory, default_model="m", description="takes options", open_models=True, options=("base_url",)
    )
    try:
        config('[roles.decider]\nmodels = ["optioned:a"]\n[providers.optioned]\nbase_url = "http://127.0.0.1:9"\n')
        Decider.resolve()
        Decider.resolve("optioned:b", base_url="http://127.0.0.1:7")
    finally:
        _providers.pop("optioned", None)
    assert created == [("a", {"base_url": "http://127.0.0.1:9"}), ("b", {"base_url": "http://127.0.0.1:7"})]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[roles.decider\nmodels = 1", "not valid TOML"),
        ("roles = 3", "roles: expected a table"),
        ('[roles.decider]\nmodels = "local"', "roles.decider.models"),
        ("[roles.decider]\nmodels = []", "roles.decider.models"),
        ('[roles.decider]\nmodels = ["local", 2]', "roles.decider.models"),
        ('[providers.lexical]\napi_key = "sk-123"', "providers.lexical.api_key"),
        (
            '[roles.decider]\nmodels = ["lexical"]\n[providers.lexical]\nbase_url = "http://x"',
            "providers.lexical.base_url",
        ),
        ('[providers.lexicl]\nbase_url = "http://x"', "did you mean 'lexical'"),
        ('[roles.decider]\nmodels = ["lexical", "lexicl:bm25"]', "roles.decider.models[1]"),
        ("[cache]\nenabled = 'yes'", "cache.enabled"),
    ],
)
def test_a_malformed_config_is_a_config_error_naming_the_file_and_key(config, text, names):
    """Each kind of bad config is a ConfigError naming the file and the offending key."""
    path = config(text)
    with pytest.raises(ConfigError) as caught:
        Decider.resolve()
    assert str(path) in str(caught.value)
    assert names in str(caught.value)


def test_a_key_in_the_config_is_refused_without_echoing_it(config):
    """An API key in the config file is refused, and the error does not repeat the secret."""
    config('[providers.lexical]\napi_key = "sk-secret"\n')
    with pytest.raises(ConfigError) as caught:
        Decider.resolve("lexical")
    assert "sk-secret" not in str(caught.value)
    assert "environment variable" in str(caught.value)


def test_an_unknown_role_suggests_a_configured_one(config):
    """A misspelt role name is an UnknownModelError suggesting the configured role."""
    config('[roles.reviewer]\nmodels = ["lexical"]\n')
    with pytest.raises(UnknownModelError) as caught:
        Decider.resolve("reviewr")
    assert caught.value.suggestion == "reviewer"


def test_the_config_is_read_again_when_it_changes(config):
    """A change to the config file is picked up by the next resolve."""
    config('[roles.decider]\nmodels = ["lexical"]\n')
    assert Decider.resolve().model_names == ["lexical:bm25"]
    config('[roles.decider]\nmodels = ["lexical", "lexical:bm25", "lexical"]\n')
    assert len(Decider.resolve().model_names) == 3


def test_decirank_models_shows_each_roles_resolved_chain(config):
    """'decirank models --json' lists every role with its models' full names."""
    config('[roles.decider]\nmodels = ["lexical"]\n[roles.backup]\nmodels = ["lexical:bm25", "local"]\n')
    listed = subprocess.run(
        [sys.executable, "-m", "decirank", "models", "--json"], capture_output=True, text=True, check=True
    )
    roles = json.loads(listed.stdout)["roles"]
    assert roles == {"backup": ["lexical:bm25", "local:default"], "decider": ["lexical:bm25"]}


def test_decirank_models_reports_a_bad_config_in_one_line(config):
    """'decirank models' on a bad config exits 2 with a one-line error and no traceback."""
    config("[roles.decider]\nmodels = 5\n")
    listed = subprocess.run([sys.executable, "-m", "decirank", "models"], capture_output=True, text=True, check=False)
    assert listed.returncode == 2
    assert "roles.decider.models" in listed.stderr
    assert "Traceback" not in listed.stderr and len(listed.stderr.strip().splitlines()) == 1
