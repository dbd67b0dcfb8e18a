"""Few-shot heads: a logistic regression on the frozen MiniLM vectors of a question's examples.

A head is fitted once per question (its instructions, descriptions, options
and examples, hashed) and kept in a small LRU, so asking the same question of
many states fits it once. Fitting takes well under a second for a few hundred
examples.

- A yes/no head reads ``[vector, zero-shot logit]``: the zero-shot answer
  (the question's topic or its true/false contrast) enters as one more
  feature, so a handful of examples corrects the prior rather than replaces it
  (SST-2, 8 examples per label: 0.71 with it, 0.57 without).
- A choice head also learns from each option's own description as one more
  example of that option, so options with few examples still have a place to
  start (Banking77, 5 examples per intent: 0.80 instead of 0.78).

The regularisation strengths were chosen by repeated random splits of the
development data (``benchmarks/fit_local_maps.py``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import InvalidInputError

__all__ = ["ChoiceHead", "LikelihoodHead", "head_key", "heads"]

#: Inverse regularisation of the yes/no head (on unit vectors plus one logit feature).
LIKELIHOOD_C = 1.0
#: Inverse regularisation of the choice head.
CHOICE_C = 10.0
_MAX_HEADS = 64


def head_key(*parts: object) -> str:
    """A digest of everything a head is fitted from."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


#: Folds of the cross-validation that calibrates a head's probabilities.
CALIBRATION_FOLDS = 3
#: Fewer examples than this leave the temperature itself too uncertain to fit (SST-2, 8 examples
#: per label: ECE 0.20 scaled, 0.09 unscaled); the regression's own probabilities are used then.
MIN_CALIBRATION_EXAMPLES = 50


def _fit(c: float, features: np.ndarray, labels: np.ndarray):
    """A logistic regression whose probabilities are temperature-scaled on held-out folds of its own examples.

    A regularised regression is underconfident (Banking77, 10 examples per intent:
    expected calibration error 0.30 raw, 0.03 scaled); one temperature, fitted on
    predictions for examples each fold did not see, fixes that without moving the
    ranking. With fewer than two examples of some answer, or fewer than
    ``MIN_CALIBRATION_EXAMPLES`` in all, the regression's own probabilities are used.
    """
    # Imported on first use: scikit-learn costs half a second to import, and most calls never fit a head.
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=2000)
    folds = min(CALIBRATION_FOLDS, int(np.unique(labels, return_counts=True)[1].min()))
    if folds >= 2 and len(labels) >= MIN_CALIBRATION_EXAMPLES:
        model = CalibratedClassifierCV(model, method="temperature", cv=folds, ensemble=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a rare non-converged fit is still a usable head
        return model.fit(features, labels)


class LikelihoodHead:
    """P(yes) from a text's vector and the zero-shot logit of the same question."""

    def __init__(self, vectors: np.ndarray, prior_logits: np.ndarray, answers: Sequence[bool]):
        labels = np.asarray(answers, dtype=int)
        if labels.min() == labels.max():
            raise InvalidInputError(
                "question.examples", "examples with both answers, true and false", got=f"only {bool(labels[0])}"
            )
        self._model = _fit(LIKELIHOOD_C, self._features(vectors, prior_logits), labels)

    @staticmethod
    def _features(vectors: np.ndarray, prior_logits: np.ndarray) -> np.ndarray:
        return np.concatenate([vectors, np.asarray(prior_logits, dtype=np.float64)[:, None]], axis=1)

    def probabilities(self, vectors: np.ndarray, prior_logits: np.ndarray) -> np.ndarray:
        return self._model.predict_proba(self._features(vectors, prior_logits))[:, 1]


class ChoiceHead:
    """A distribution over option keys from a text's vector."""

    def __init__(
        self,
        example_vectors: np.ndarray,
        example_keys: Sequence[str],
        option_vectors: np.ndarray,
        option_keys: Sequence[str],
    ):
        features = np.concatenate([example_vectors, option_vectors])
        labels = np.array([*example_keys, *option_keys])
        self.keys = list(option_keys) + sorted(set(example_keys) - set(option_keys))
        self._model = _fit(CHOICE_C, features, labels)

    def probabilities(self, vectors: np.ndarray) -> list[dict[str, float]]:
        classes = list(self._model.classes_)
        rows = self._model.predict_proba(vectors)
        return [{key: float(row[classes.index(key)]) for key in self.keys} for row in rows]


class _Heads:
    """Fitted heads by key, least recently used first out."""

    def __init__(self, size: int):
        self._size = size
        self._heads: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, fit: Callable[[], object]):
        with self._lock:
            head = self._heads.get(key)
            if head is not None:
                self._heads.move_to_end(key)
                return head
        head = fit()  # outside the lock: two threads may fit the same head once each, never wrongly
        with self._lock:
            self._heads[key] = head
            while len(self._heads) > self._size:
                self._heads.popitem(last=False)
        return head


heads = _Heads(_MAX_HEADS)
