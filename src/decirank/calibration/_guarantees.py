"""Cut-offs and prediction sets with a stated promise on new rows from the same source as the labelled ones.

All three assume that the labelled rows and the new rows are drawn alike
(exchangeable): the same source, the same question, the same model.

**Recall** (``target_recall``): keep the rows whose model probability is at
least the ``k``-th lowest probability among the ``n`` labelled positives. A
new positive is then lost only if it falls below that order statistic, and
the share of the source's positives that do is the ``k``-th of ``n`` uniform
order statistics, distributed Beta(k, n + 1 - k). So that share is at most
``1 - target`` with probability ``P(Binomial(n, 1 - target) >= k)`` (a
one-sided binomial bound on a quantile; ties only help). A call filters a
finite batch, whose own share of lost positives also varies by chance: with
``m`` positives in the batch, the number lost is Beta-Binomial(m, k, n + 1 - k),
exactly. The cut-off is the highest order statistic for which both the
source's share and the batch's keep the promise with probability
``confidence``; ``m`` is not known, so the batch's bound must hold for every
``m`` the labelled rows' share of positives allows (its 90% interval times the
batch size). When even the lowest positive is too high a bar (fewer than
``log(1 - confidence) / log(target)`` positives, or a batch too small to
lose any), every row is kept: the only cut-off that keeps the promise.

**Precision** (``target_precision``): Learn then Test (Angelopoulos et al.,
2021) with fixed-sequence testing: down a fixed grid of cut-offs, from the
highest that keeps at least :data:`PRECISION_MIN_KEPT` labelled rows (a choice
made from the scores alone, never the labels), each cut-off's precision is
tested with a one-sided exact binomial test at ``1 - confidence``; the walk
stops at the first that fails, and the last that passed is the cut-off. A
fixed sequence needs no correction for the number of tests: the promise holds
with probability ``confidence``.

**Coverage** (``coverage``, for a choice): split conformal prediction with
the score ``1 - p(right option)``; the set holds every option whose
nonconformity is within the ``r``-th smallest of the labelled rows'. Plain
split conformal takes ``r = ceil((n + 1) * coverage)``, which holds the right
option ``coverage`` of the time on average over draws of the labelled rows,
so half the draws fall a little short. Here ``r`` is the smallest rank for
which the coverage on new rows is at least ``coverage`` with probability
``confidence`` (the same binomial bound as recall, from the other end: the
training-conditional guarantee of Vovk, 2012), so the promise holds for the
user's one set of labelled rows, at the price of slightly larger sets.
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
    "beta_binomial_cdf",
    "binomial_tail",
    "conformal_sets",
    "positives_needed",
    "precision_cutoff",
    "recall_cutoff",
]

#: The cut-offs on the model's probability that a precision promise may choose among.
PRECISION_GRID = tuple(round(0.01 * step, 2) for step in range(1, 100))
#: The precision walk starts where a cut-off keeps this many labelled rows: above it a test has too few to pass.
PRECISION_MIN_KEPT = 20


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


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_binomial_cdf(m: int, a: float, b: float, upto: int) -> float:
    """``P(J <= upto)`` for ``J ~ Beta-Binomial(m, a, b)``."""
    if upto < 0:
        return 0.0
    if upto >= m:
        return 1.0
    base = math.lgamma(m + 1) - _log_beta(a, b)
    terms = [base - math.lgamma(j + 1) - math.lgamma(m - j + 1) + _log_beta(j + a, m - j + b) for j in range(upto + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(term - top) for term in terms))


def _largest(passes: Any, highest: int) -> int:
    """The largest ``k`` in 1..highest with ``passes(k)``, for a test that passes up to some k and fails above; 0 if none."""
    low, high = 0, highest
    while low < high:
        middle = (low + high + 1) // 2
        if passes(middle):
            low = middle
        else:
            high = middle - 1
    return low


#: A batch's positives are counted up to this many: past it the batch's own chance adds nothing measurable.
_BATCH_CAP = 20_000


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
    #: The positives a recall promise assumed the batch holds (its size times the labelled share).
    batch_positives: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            self.target: self.level,
            "confidence": self.confidence,
            "method": self.method,
            "calibration_rows": self.rows,
            "batch_positives": self.batch_positives,
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


def recall_cutoff(
    scores: Sequence[float],
    labels: Sequence[int],
    target: float,
    confidence: float,
    batch_size: int | None = None,
) -> Cutoff:
    """The highest cut-off that keeps at least ``target`` of new positives with probability ``confidence``.

    ``batch_size`` is how many rows the cut-off will be applied to (a filter call's items); with it
    the promise also holds for that batch's own positives, not only for the source's share.
    """
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    positives = np.sort(s[y == 1])
    n = len(positives)
    miss = 1.0 - target
    chosen = _largest(lambda k: binomial_tail(n, miss, k) >= confidence, n)
    batch_positives = None
    if batch_size is not None and chosen:
        # The batch's positives are not known: their share is the labelled share, give or take its
        # sampling error, so the bound must hold at both ends of that range (and at its middle).
        share = n / len(s)
        spread = 1.645 * math.sqrt(share * (1 - share) / len(s))
        candidates = sorted(
            {min(_BATCH_CAP, max(1, round(batch_size * min(1.0, max(0.0, share + d))))) for d in (-spread, 0.0, spread)}
        )
        batch_positives = candidates[0]
        for positives_in_batch in candidates:
            allowed = math.floor(miss * positives_in_batch + 1e-9)
            chosen = _largest(
                lambda k, m=positives_in_batch, a=allowed: beta_binomial_cdf(m, k, n + 1 - k, a) >= confidence, chosen
            )
    method = "binomial bound on an order statistic of the labelled positives (and beta-binomial for the batch)"
    if not chosen:
        needed = positives_needed(target, confidence)
        note = (
            f"{n} labelled positives cannot support a cut-off for recall {target:g} at confidence {confidence:g} "
            f"(it takes at least {needed}, and a batch with enough positives to lose one); every row is kept"
        )
        recall, precision = _observed(s, y, None)
        return Cutoff(
            None, "target_recall", target, confidence, method, len(s), recall, precision, note, batch_positives
        )
    threshold = float(positives[chosen - 1])
    recall, precision = _observed(s, y, threshold)
    return Cutoff(
        threshold, "target_recall", target, confidence, method, len(s), recall, precision, None, batch_positives
    )


def precision_cutoff(scores: Sequence[float], labels: Sequence[int], target: float, confidence: float) -> Cutoff | None:
    """The lowest grid cut-off whose precision on new rows is at least ``target`` with probability ``confidence``.

    None when no cut-off of the grid passes its test.
    """
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    level = 1.0 - confidence
    passing = None
    for threshold in reversed(PRECISION_GRID):
        kept = y[s >= threshold]
        if len(kept) < PRECISION_MIN_KEPT:
            continue  # not yet started: the walk begins at the first cut-off with enough rows
        # H0: precision < target. Seeing this many positives among the kept rows is this unlikely under it.
        if binomial_tail(len(kept), target, int(kept.sum())) > level:
            break
        passing = threshold
    if passing is None:
        return None
    recall, precision = _observed(s, y, passing)
    method = "Learn then Test: exact binomial tests in a fixed sequence down a grid of cut-offs"
    return Cutoff(passing, "target_precision", target, confidence, method, len(s), recall, precision)


@dataclass(frozen=True)
class ConformalSets:
    """The nonconformity threshold for ``coverage``: an option is in a row's set when ``1 - p <= threshold``."""

    threshold: float
    coverage: float
    rows: int
    confidence: float

    def members(self, probabilities: Sequence[float]) -> list[int]:
        """The columns in the set, most probable first."""
        p = np.asarray(probabilities, dtype=float)
        inside = np.flatnonzero(1.0 - p <= self.threshold + 1e-12)
        return sorted(inside.tolist(), key=lambda column: (-p[column], column))

    def to_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.coverage,
            "confidence": self.confidence,
            "threshold": round(self.threshold, 6),
            "calibration_rows": self.rows,
            "method": "split conformal prediction, score 1 - p(right option), training-conditional rank",
        }


def conformal_sets(
    true_probabilities: Sequence[float], coverage: float, confidence: float, batch_size: int | None = None
) -> ConformalSets:
    """The threshold from each labelled row's probability of its right option.

    ``batch_size`` is how many new rows the sets are for (a classify call's texts): with it the
    promise also holds for that batch's own share, as :func:`recall_cutoff`'s does.
    """
    scores = np.sort(1.0 - np.asarray(true_probabilities, dtype=float))
    n = len(scores)
    miss = 1.0 - coverage
    # A new row is missed when its score is above the r-th smallest, a share distributed Beta(n + 1 - r, r):
    # at most 1 - coverage with probability P(Binomial(n, 1 - coverage) >= n + 1 - r). Here j = n + 1 - r.
    above = _largest(lambda j: binomial_tail(n, miss, j) >= confidence, n)
    if batch_size is not None and above:
        batch = min(_BATCH_CAP, max(1, batch_size))
        allowed = math.floor(miss * batch + 1e-9)
        above = _largest(lambda j: beta_binomial_cdf(batch, j, n + 1 - j, allowed) >= confidence, above)
    # No rank keeps the promise (too few rows): the threshold 1 lets every option in.
    threshold = 1.0 if not above else float(scores[n - above])
    return ConformalSets(threshold, coverage, n, confidence)
