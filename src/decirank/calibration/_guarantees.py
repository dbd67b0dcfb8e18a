"""Cut-offs and prediction sets with a stated promise on new rows from the same source as the labelled ones.

All three assume that the labelled rows and the new rows are drawn alike
(exchangeable): the same source, the same question, the same model.

**Recall** (``target_recall``): keep the rows whose model probability is at
least the ``k``-th lowest probability among the ``n`` labelled positives. A
new positive is then lost only if it falls below that order statistic, and
the chance it does is the ``k``-th of ``n`` uniform order statistics,
distributed Beta(k, n + 1 - k). So the miss rate is at most ``1 - target``
with probability ``P(Binomial(n, 1 - target) >= k)``, and the cut-off is the
highest order statistic for which that reaches ``confidence`` (a one-sided
binomial / Clopper-Pearson bound on a quantile; ties only help). When even the
lowest positive is too high a bar (fewer than ``log(1 - confidence) / log(target)``
positives), every row is kept: the only cut-off that keeps the promise.

**Precision** (``target_precision``): Learn then Test (Angelopoulos et al.,
2021) with a Bonferroni correction over a fixed grid of cut-offs: each
cut-off's precision is tested with a one-sided exact binomial test at
``(1 - confidence) / len(grid)``, and the lowest cut-off that passes is kept,
so every passing cut-off holds at once with probability ``confidence``.

**Coverage** (``coverage``, for a choice): split conformal prediction with
the score ``1 - p(right option)``; the set holds every option whose
nonconformity is within the ``ceil((n + 1) * coverage)``-th smallest of the
labelled rows', so it holds the right option with probability at least
``coverage`` (marginally, over the labelled and the new rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "PRECISION_GRID",
    "ConformalSets",
    "Cutoff",
    "binomial_tail",
    "conformal_sets",
    "positives_needed",
    "precision_cutoff",
    "recall_cutoff",
]

#: The cut-offs on the model's probability that a precision promise may choose among.
PRECISION_GRID = tuple(round(0.02 * step, 2) for step in range(1, 50))


def binomial_tail(n: int, p: float, k: int) -> float:
    """``P(Binomial(n, p) >= k)``, summed in log space so large ``n`` stays exact enough."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [
        math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q
        for j in range(k, n + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(term - top) for term in terms))


def positives_needed(target_recall: float, confidence: float) -> int:
    """The fewest labelled positives for which any cut-off above the lowest keeps the recall promise."""
    if target_recall >= 1.0:
        return math.inf  # type: ignore[return-value]
    return math.ceil(math.log(1.0 - confidence) / math.log(target_recall))


@dataclass(frozen=True)
class Cutoff:
    """A cut-off on the model's probability and what it promises; ``threshold`` None keeps every row."""

    threshold: float | None
    target: str
    level: float
    confidence: float
    method: str
    rows: int
    #: What the labelled rows show at this cut-off (the promise is about new rows, not these).
    observed_recall: float
    observed_precision: float | None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            self.target: self.level,
            "confidence": self.confidence,
            "method": self.method,
            "calibration_rows": self.rows,
            "observed_recall": round(self.observed_recall, 4),
            "observed_precision": None if self.observed_precision is None else round(self.observed_precision, 4),
            "note": self.note,
        }


def _observed(scores: np.ndarray, labels: np.ndarray, threshold: float | None) -> tuple[float, float | None]:
    kept = np.ones_like(labels, dtype=bool) if threshold is None else scores >= threshold
    positives = labels.sum()
    recall = float((kept & (labels == 1)).sum() / positives) if positives else 1.0
    precision = float(labels[kept].mean()) if kept.any() else None
    return recall, precision


def recall_cutoff(scores: Sequence[float], labels: Sequence[int], target: float, confidence: float) -> Cutoff:
    """The highest cut-off that keeps at least ``target`` of new positives with probability ``confidence``."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    positives = np.sort(s[y == 1])
    n = len(positives)
    chosen = 0
    for k in range(1, n + 1):
        if binomial_tail(n, 1.0 - target, k) >= confidence:
            chosen = k
        else:
            break
    method = "binomial bound on an order statistic of the labelled positives"
    if not chosen:
        needed = positives_needed(target, confidence)
        note = (
            f"{n} labelled positives cannot support a cut-off for recall {target:g} at confidence {confidence:g} "
            f"(it takes at least {needed}); every row is kept"
        )
        recall, precision = _observed(s, y, None)
        return Cutoff(None, "target_recall", target, confidence, method, len(s), recall, precision, note)
    threshold = float(positives[chosen - 1])
    recall, precision = _observed(s, y, threshold)
    return Cutoff(threshold, "target_recall", target, confidence, method, len(s), recall, precision)


def precision_cutoff(
    scores: Sequence[float], labels: Sequence[int], target: float, confidence: float
) -> Cutoff | None:
    """The lowest grid cut-off whose precision on new rows is at least ``target`` with probability ``confidence``.

    None when no cut-off of the grid passes its test.
    """
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    level = (1.0 - confidence) / len(PRECISION_GRID)
    passing = None
    for threshold in PRECISION_GRID:
        kept = y[s >= threshold]
        # H0: precision < target. Seeing this many positives among the kept rows is this unlikely under it.
        if len(kept) and binomial_tail(len(kept), target, int(kept.sum())) <= level:
            passing = threshold
            break
    if passing is None:
        return None
    recall, precision = _observed(s, y, passing)
    method = "Learn then Test: exact binomial tests, Bonferroni over a fixed grid of cut-offs"
    return Cutoff(passing, "target_precision", target, confidence, method, len(s), recall, precision)


@dataclass(frozen=True)
class ConformalSets:
    """The nonconformity threshold for ``coverage``: an option is in a row's set when ``1 - p <= threshold``."""

    threshold: float
    coverage: float
    rows: int

    def members(self, probabilities: Sequence[float]) -> list[int]:
        """The columns in the set, most probable first."""
        p = np.asarray(probabilities, dtype=float)
        inside = np.flatnonzero(1.0 - p <= self.threshold + 1e-12)
        return sorted(inside.tolist(), key=lambda column: (-p[column], column))

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.coverage,
            "threshold": round(self.threshold, 6),
            "calibration_rows": self.rows,
            "method": "split conformal prediction, score 1 - p(right option)",
        }


def conformal_sets(true_probabilities: Sequence[float], coverage: float) -> ConformalSets:
    """The threshold from each labelled row's probability of its right option."""
    scores = np.sort(1.0 - np.asarray(true_probabilities, dtype=float))
    n = len(scores)
    rank = math.ceil((n + 1) * coverage)
    # Past the last row the promise needs every option: the threshold 1 lets all in.
    threshold = 1.0 if rank > n else float(scores[rank - 1])
    return ConformalSets(threshold, coverage, n)
