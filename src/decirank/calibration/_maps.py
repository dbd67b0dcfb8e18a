"""Monotone maps from a model's probability to the frequency observed on labelled rows, and reliability.

Three maps for a yes/no probability, chosen by cross-validated log loss:

- ``identity``: the model's number as it is (when nothing fitted does better);
- ``platt``: a logistic of the model's logit, ``sigmoid(a * logit(p) + b)``, two
  parameters, smooth, right when the model ranks well but is over- or under-sure;
  ``(a, b)`` drawn towards the identity ``(1, 0)`` by a Gaussian prior whose
  strength (:data:`PLATT_PRIORS`, none among them) is chosen by the same
  cross-validation, so a hundred rows move a nearly right model only as far as
  they show it wrong, and still move a far-off one all the way;
- ``isotonic``: the pool-adjacent-violators step function, any monotone shape,
  each step's frequency shrunk by half a row towards one half so no step says 0
  or 1 from a handful of rows.

One map for a choice's distribution: ``temperature`` (every log-probability
divided by one fitted ``T``, then renormalised), which keeps the option order
and the distribution summing to 1.

Written here with numpy rather than taken from scikit-learn: each is a few
lines, and the runtime install stays free of scikit-learn and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "LIKELIHOOD_METHODS",
    "PLATT_PRIORS",
    "ProbabilityMap",
    "Reliability",
    "choose_map",
    "choose_temperature",
    "fit_map",
    "folds_of",
    "reliability",
]

#: The maps :func:`choose_map` may pick for a yes/no probability, in the order ties go.
LIKELIHOOD_METHODS = ("identity", "platt", "isotonic")
#: The strengths of the Gaussian prior drawing Platt's ``(a, b)`` towards the identity ``(1, 0)`` that
#: :func:`choose_map` tries, strongest first (ties go to the stronger). A strength is the prior's precision
#: against the log loss summed over the rows, so it weighs less the more rows there are; 0 is no prior.
PLATT_PRIORS = (30.0, 10.0, 3.0, 0.0)
#: Below this many rows the isotonic map is not tried: its steps would be a few rows each.
ISOTONIC_MIN_ROWS = 50
#: Probabilities are kept this far from 0 and 1 before taking logits.
_EPSILON = 1e-6
RELIABILITY_BINS = 10


def _clip(values: np.ndarray) -> np.ndarray:
    return np.clip(values, _EPSILON, 1.0 - _EPSILON)


def _logit(values: np.ndarray) -> np.ndarray:
    clipped = _clip(values)
    return np.log(clipped) - np.log1p(-clipped)


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -values))


@dataclass(frozen=True)
class ProbabilityMap:
    """A fitted map; ``parameters`` are what :meth:`to_dict` stores and :meth:`from_dict` reads back."""

    method: str
    parameters: dict[str, Any]

    def __call__(self, probabilities: Any) -> np.ndarray:
        """The calibrated probabilities of ``probabilities`` (yes/no: any shape; temperature: rows of options)."""
        values = np.asarray(probabilities, dtype=float)
        if self.method == "identity":
            return values.copy()
        if self.method == "platt":
            return _sigmoid(self.parameters["a"] * _logit(values) + self.parameters["b"])
        if self.method == "isotonic":
            return np.interp(values, self.parameters["x"], self.parameters["y"])
        if self.method == "temperature":
            scaled = np.log(_clip(values)) / self.parameters["t"]
            scaled -= scaled.max(axis=-1, keepdims=True)
            weights = np.exp(scaled)
            return weights / weights.sum(axis=-1, keepdims=True)
        raise ValueError(f"unknown map {self.method!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbabilityMap:
        return cls(str(data["method"]), dict(data["parameters"]))


def _fit_platt(
    probabilities: np.ndarray, labels: np.ndarray, prior: float = 0.0, ridge: float = 1e-3
) -> ProbabilityMap:
    """Newton's method with a backtracking line search on the two-parameter logistic's log loss.

    Starts from the identity (a = 1, b = 0). ``prior`` adds ``prior / 2 * |(a, b) - (1, 0)|^2``, a
    Gaussian prior centred on the identity; a small ridge towards zero keeps it finite on separable rows.
    """
    x = _logit(probabilities)
    design = np.stack([x, np.ones_like(x)], axis=1)
    identity = np.array([1.0, 0.0])

    def loss(w: np.ndarray) -> float:
        z = design @ w
        # log(1 + e^z) - y z, written to stay finite for large |z|
        away = w - identity
        return float(np.sum(np.logaddexp(0.0, z) - labels * z) + 0.5 * prior * away @ away + 0.5 * ridge * w @ w)

    weights = identity.copy()
    current = loss(weights)
    for _ in range(100):
        predicted = _sigmoid(design @ weights)
        gradient = design.T @ (predicted - labels) + prior * (weights - identity) + ridge * weights
        hessian = (design * (predicted * (1 - predicted))[:, None]).T @ design + (prior + ridge) * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while scale > 1e-8 and loss(weights - scale * step) > current:
            scale /= 2
        if scale <= 1e-8:
            break
        weights = weights - scale * step
        previous, current = current, loss(weights)
        if previous - current < 1e-10:
            break
    return ProbabilityMap("platt", {"a": float(weights[0]), "b": float(weights[1]), "prior": float(prior)})


def _fit_isotonic(probabilities: np.ndarray, labels: np.ndarray) -> ProbabilityMap:
    """Pool adjacent violators over the rows sorted by probability (ties pooled first)."""
    order = np.argsort(probabilities, kind="stable")
    xs, ys = probabilities[order], labels[order]
    unique, starts = np.unique(xs, return_index=True)
    sums = np.add.reduceat(ys, starts)
    counts = np.diff(np.append(starts, len(xs))).astype(float)
    blocks: list[list[float]] = []  # [sum, count, lowest x, highest x]
    for value, total, count in zip(unique, sums, counts, strict=True):
        blocks.append([float(total), float(count), float(value), float(value)])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total_, count_, _, high = blocks.pop()
            blocks[-1][0] += total_
            blocks[-1][1] += count_
            blocks[-1][3] = high
    # Shrunk by half a row each way, so a step of three positives says 0.875, not 1; the running
    # maximum keeps the steps in order where a small step shrank past a larger one.
    shrunk = np.maximum.accumulate([(total + 0.5) / (count + 1.0) for total, count, _, _ in blocks])
    x, y = [], []
    for (_, _, low, high), value in zip(blocks, shrunk, strict=True):
        x.extend([low, high] if high > low else [low])
        y.extend([value, value] if high > low else [value])
    return ProbabilityMap("isotonic", {"x": [float(v) for v in x], "y": [float(v) for v in y]})


def fit_map(
    method: str, probabilities: Sequence[float], labels: Sequence[int], *, prior: float = 0.0
) -> ProbabilityMap:
    """The ``method`` map fitted on yes/no ``labels`` (1 for yes) of the model's ``probabilities``.

    ``prior`` is the strength of Platt's prior towards the identity (0: none); other maps ignore it.
    """
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    if method == "identity":
        return ProbabilityMap("identity", {})
    if method == "platt":
        return _fit_platt(p, y, prior)
    if method == "isotonic":
        return _fit_isotonic(p, y)
    raise ValueError(f"unknown method {method!r}; expected one of {LIKELIHOOD_METHODS}")


def _log_loss(predicted: np.ndarray, labels: np.ndarray) -> float:
    p = _clip(predicted)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


def folds_of(labels: Sequence[Any], folds: int, seed: int) -> np.ndarray:
    """Each row's fold, the rows of each label dealt round-robin in a seeded order (stratified)."""
    values = list(labels)
    rng = np.random.default_rng(seed)
    fold = np.zeros(len(values), dtype=int)
    for label in sorted(set(values), key=repr):
        rows = np.array([i for i, value in enumerate(values) if value == label])
        rng.shuffle(rows)
        fold[rows] = (np.arange(len(rows)) + rng.integers(folds)) % folds
    return fold


def choose_map(
    probabilities: Sequence[float],
    labels: Sequence[int],
    *,
    methods: Sequence[str] = LIKELIHOOD_METHODS,
    folds: int = 5,
    seed: int = 0,
) -> tuple[ProbabilityMap, dict[str, float], np.ndarray]:
    """The method of lowest cross-validated log loss, refitted on every row.

    Platt is tried at each strength of :data:`PLATT_PRIORS` on the same folds and stands for the
    strength of lowest loss, which its map keeps as its ``prior`` parameter. Returns the map, each
    tried method's cross-validated log loss, and the chosen method's out-of-fold probabilities
    (what "after" reliability is measured on: no row judges the map that saw it).
    """
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    # Isotonic steps from under 50 rows are a few rows each: tried only when asked for by name.
    tried = [m for m in methods if m != "isotonic" or len(p) >= ISOTONIC_MIN_ROWS or len(methods) == 1]
    fold = folds_of(y.astype(int).tolist(), folds, seed)

    def cross_validated(method: str, prior: float = 0.0) -> np.ndarray:
        predicted = np.empty_like(p)
        for k in range(folds):
            held = fold == k
            if held.any():
                predicted[held] = fit_map(method, p[~held], y[~held], prior=prior)(p[held])
        return predicted

    losses: dict[str, float] = {}
    out_of_fold: dict[str, np.ndarray] = {}
    platt_prior = 0.0
    for method in tried:
        if method == "platt":
            # Ties go to the stronger prior (the earlier in PLATT_PRIORS): the map nearer the model's own.
            for prior in PLATT_PRIORS:
                predicted = cross_validated(method, prior)
                loss = _log_loss(predicted, y)
                if method not in losses or round(loss, 6) < round(losses[method], 6):
                    losses[method], out_of_fold[method], platt_prior = loss, predicted, prior
        else:
            out_of_fold[method] = cross_validated(method)
            losses[method] = _log_loss(out_of_fold[method], y)
    best = min(tried, key=lambda method: (round(losses[method], 6), tried.index(method)))
    return fit_map(best, p, y, prior=platt_prior), losses, out_of_fold[best]


def _temperature_loss(log_true: np.ndarray, log_all: np.ndarray, t: float) -> float:
    scaled = log_all / t
    top = scaled.max(axis=1, keepdims=True)
    normaliser = top[:, 0] + np.log(np.exp(scaled - top).sum(axis=1))
    return float(np.mean(normaliser - log_true / t))


def _fit_temperature(distributions: np.ndarray, truth: np.ndarray) -> ProbabilityMap:
    """The ``T`` of least log loss, by golden-section search on log T in [1/20, 20] (the loss is unimodal there)."""
    log_all = np.log(_clip(distributions))
    log_true = log_all[np.arange(len(truth)), truth]
    low, high = math.log(0.05), math.log(20.0)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    loss_a, loss_b = (
        _temperature_loss(log_true, log_all, math.exp(a)),
        _temperature_loss(log_true, log_all, math.exp(b)),
    )
    for _ in range(60):
        if loss_a < loss_b:
            high, b, loss_b = b, a, loss_a
            a = high - ratio * (high - low)
            loss_a = _temperature_loss(log_true, log_all, math.exp(a))
        else:
            low, a, loss_a = a, b, loss_b
            b = low + ratio * (high - low)
            loss_b = _temperature_loss(log_true, log_all, math.exp(b))
    return ProbabilityMap("temperature", {"t": float(math.exp((low + high) / 2))})


def choose_temperature(
    distributions: Sequence[Sequence[float]],
    truth: Sequence[int],
    *,
    methods: Sequence[str] = ("identity", "temperature"),
    folds: int = 5,
    seed: int = 0,
) -> tuple[ProbabilityMap, dict[str, float], np.ndarray]:
    """Identity or a fitted temperature (of ``methods``) for a choice's distributions, by cross-validated
    log loss of the truth.

    ``truth`` holds each row's right option as a column index. Returns as :func:`choose_map` does,
    the out-of-fold distributions last.
    """
    d = np.asarray(distributions, dtype=float)
    y = np.asarray(truth, dtype=int)
    fold = folds_of(y.tolist(), folds, seed)
    predicted = np.empty_like(d)
    for k in range(folds):
        held = fold == k
        if held.any():
            predicted[held] = _fit_temperature(d[~held], y[~held])(d[held])

    def loss(values: np.ndarray) -> float:
        return float(-np.mean(np.log(_clip(values[np.arange(len(y)), y]))))

    losses = {"identity": loss(d), "temperature": loss(predicted)}
    losses = {method: losses[method] for method in methods}
    if "temperature" in losses and losses["temperature"] < losses.get("identity", math.inf):
        return _fit_temperature(d, y), losses, predicted
    return ProbabilityMap("identity", {}), losses, d.copy()


@dataclass(frozen=True)
class Reliability:
    """How far probabilities are from the frequencies they claim, over ``rows`` labelled rows.

    ``ece`` is the expected calibration error over ten equal-width bins (the weighted mean gap
    between a bin's mean probability and its frequency of yes); ``brier`` the mean squared error;
    ``table`` one entry per non-empty bin.
    """

    rows: int
    ece: float
    brier: float
    log_loss: float
    table: list[dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "ece": round(self.ece, 4),
            "brier": round(self.brier, 4),
            "log_loss": round(self.log_loss, 4),
            "table": self.table,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reliability:
        return cls(
            int(data["rows"]), float(data["ece"]), float(data["brier"]), float(data["log_loss"]), list(data["table"])
        )


def reliability(probabilities: Sequence[float], labels: Sequence[int], bins: int = RELIABILITY_BINS) -> Reliability:
    """The reliability of yes/no ``probabilities`` against ``labels`` (1 for yes)."""
    p = np.asarray(probabilities, dtype=float)
    y = np.asarray(labels, dtype=float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    table, gap = [], 0.0
    for b in range(bins):
        inside = which == b
        count = int(inside.sum())
        if not count:
            continue
        mean, frequency = float(p[inside].mean()), float(y[inside].mean())
        gap += count * abs(mean - frequency)
        table.append(
            {
                "low": b / bins,
                "high": (b + 1) / bins,
                "rows": count,
                "mean_probability": round(mean, 4),
                "frequency": round(frequency, 4),
            }
        )
    rows = len(p)
    if not rows:
        return Reliability(0, 0.0, 0.0, 0.0, [])
    return Reliability(rows, gap / rows, float(np.mean((p - y) ** 2)), _log_loss(p, y), table)
