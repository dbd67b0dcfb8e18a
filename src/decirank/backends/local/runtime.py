"""The embedded model's dense encoder, for the repository's own scripts (``training/``, ``benchmarks/``).

These are the encoder and the cache the local backend answers with, so that what a script computes
from a text is what the model sees of it. Not part of decirank's API: they change with the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ._runtime import shared_runtime as _runtime

__all__ = ["clear_cache", "dense_vectors", "token_ids"]


def dense_vectors(texts: Sequence[str]) -> np.ndarray:
    """Each text's MiniLM vector of its first window, unit length: ``(len(texts), 384)``."""
    # Never set: a script has no caller to hang up on it.
    never_cancelled = threading.Event()
    return _runtime.dense_vectors(list(texts), never_cancelled)[0]


def token_ids(texts: Sequence[str]) -> list[list[int]]:
    """The tokens of each text's first window, as the dense encoder reads them."""
    return _runtime.token_ids(list(texts))


def clear_cache() -> None:
    """Forget the vectors and readings kept so far, as after a change to how texts are read."""
    _runtime.cache.clear()
