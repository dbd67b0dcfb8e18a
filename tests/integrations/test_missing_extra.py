"""Without its framework, an adapter's import says which extra to install, as decirank's own typed error."""

from __future__ import annotations

import importlib
import sys

import pytest

from decirank.errors import MissingAssetError


@pytest.mark.parametrize(
    ("adapter", "framework", "extra"),
    [
        ("langchain", "langchain_core", "langchain"),
        ("llamaindex", "llama_index", "llamaindex"),
        ("haystack", "haystack", "haystack"),
    ],
)
def test_importing_an_adapter_without_its_framework_names_the_extra(monkeypatch, adapter, framework, extra):
    module = f"decirank.integrations.{adapter}"
    for name in [name for name in sys.modules if name == framework or name.startswith(framework + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)  # "import framework" now raises ImportError
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingAssetError) as missing:
        importlib.import_module(module)
    assert f"pip install 'decirank[{extra}]'" in str(missing.value)
    monkeypatch.delitem(sys.modules, module, raising=False)  # the next import loads it afresh
