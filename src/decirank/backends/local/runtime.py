"""The embedded model's parts, for the repository's own scripts (``training/``, ``benchmarks/``).

The dense encoder, the reader and the cache the local backend answers with, so that what a script
computes from a text is what the model sees of it; and the names the scripts share with the model:
how a question is read (``_questions``), the decision head and its features (``_head``), the
reader's weights (``_reader``) and where the shipped files are (``_assets``). Not part of
decirank's API: they change with the model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ._assets import find_blend, find_decision_head
from ._head import BACKGROUND_TOPICS, FEATURES, SCALARS, DecisionHead, swap_sides, yes_no_features
from ._questions import (
    AUXILIARY,
    CONTRAST,
    KINDS,
    NEGATED_READS,
    TOPIC,
    asks_yes_or_no,
    level_asked,
    named_only,
    negated_reading,
    option_asked,
    option_name,
    option_reading,
    option_texts,
    question_kind,
    read_yes_no,
    strip_negation,
    yes_no_asked,
)
from ._reader import four_bit_rows, reader_layers
from ._runtime import shared_runtime as _runtime
from ._shapes import option_vector

__all__ = [
    # what the model computes, as it computes it
    "clear_cache",
    "dense_vectors",
    "reader_logits",
    "token_ids",
    # how a question is read
    "AUXILIARY",
    "CONTRAST",
    "KINDS",
    "NEGATED_READS",
    "TOPIC",
    "asks_yes_or_no",
    "level_asked",
    "named_only",
    "negated_reading",
    "option_asked",
    "option_name",
    "option_reading",
    "option_texts",
    "option_vector",
    "question_kind",
    "read_yes_no",
    "strip_negation",
    "yes_no_asked",
    # the decision head and its features
    "BACKGROUND_TOPICS",
    "FEATURES",
    "SCALARS",
    "DecisionHead",
    "swap_sides",
    "yes_no_features",
    # the reader's weights, and the shipped files
    "find_blend",
    "find_decision_head",
    "four_bit_rows",
    "reader_layers",
]


def dense_vectors(texts: Sequence[str]) -> np.ndarray:
    """Each text's MiniLM vector of its first window, unit length: ``(len(texts), 384)``."""
    # Never set: a script has no caller to hang up on it.
    never_cancelled = threading.Event()
    return _runtime.dense_vectors(list(texts), never_cancelled)[0]


def reader_logits(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """The shipped reader's logit of "yes" for each (question, text), as the model reads the pair: ``(len(pairs),)``."""
    never_cancelled = threading.Event()
    return _runtime.reader_logits(list(pairs), never_cancelled)[0]


def token_ids(texts: Sequence[str]) -> list[list[int]]:
    """The tokens of each text's first window, as the dense encoder reads them."""
    return _runtime.token_ids(list(texts))


def clear_cache() -> None:
    """Forget the vectors and readings kept so far, as after a change to how texts are read."""
    _runtime.cache.clear()
