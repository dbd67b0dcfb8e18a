"""Fit the embedded model's label-choice and "none" maps, with cross-validated figures.

    python benchmarks/fit_local_maps.py [--data ../shared/data/decisions]

Reads Banking77 development rows ({"text", "label"} lines) and prints,
for each map, the figure on held-out data (labels or rows not used to fit it)
beside the constants fitted on every row; those constants are the ones in
``decirank/backends/local/_model.py`` (``MAPS``) and ``_fewshot.py``.

- a choice among labels: softmax sharpness by log loss over the 77 intents.
- none of these: 20 intents held out of the options, 10 random splits, each scored by a
  map fitted on the other nine; a bias towards the options (``NONE_BIAS``) trades
  out-of-scope recall for in-scope accuracy.
- few-shot: the regularisation of each head over repeated random splits.
"""

from __future__ import annotations

import argparse
import json
import threading
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from decirank.backends.local._model import _runtime

warnings.filterwarnings("ignore")
NONE_BIAS = 0.3


def vectors(texts: list[str]) -> np.ndarray:
    return _runtime.dense_vectors(texts, threading.Event())[0].astype(np.float64)


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    index = np.minimum((p * bins).astype(int), bins - 1)
    return float(
        sum(
            (index == b).mean() * abs(p[index == b].mean() - y[index == b].mean())
            for b in range(bins)
            if (index == b).any()
        )
    )


def platt(features: np.ndarray, truth: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=1e4).fit(features, truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/decisions")
    data = Path(parser.parse_args().data)
    banking = [json.loads(line) for line in open(data / "banking77-train.jsonl")]
    labels = json.loads((data / "banking77.labels.json").read_text())
    words = [label.replace("_", " ") for label in labels]
    X = vectors([row["text"] for row in banking])
    L = vectors(words)
    y = np.array([labels.index(row["label"]) for row in banking])

    # a choice among labels
    cosines = X @ L.T

    def softmax(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    sharpness = min(np.arange(5, 60, 0.5), key=lambda t: log_loss(y, softmax(t * cosines), labels=range(77)))
    p = softmax(sharpness * cosines)
    right = (p.argmax(1) == y).astype(float)
    print(
        f"label choice: accuracy {right.mean():.3f}, ECE {ece(p.max(1), right):.3f}; "
        f"fitted sharpness {sharpness}"
    )

    # none of these
    splits = []
    for repeat in range(10):
        out = np.random.default_rng(100 + repeat).choice(77, 20, replace=False)
        inside = np.setdiff1d(np.arange(77), out)
        sims = cosines[:, inside]
        top = np.sort(sims, 1)[:, ::-1]
        splits.append((np.stack([top[:, 0], top[:, 0] - top[:, 1]], 1), np.isin(y, out).astype(int), sims, inside))
    recalls, drops = [], []
    for k, (features, oos, sims, inside) in enumerate(splits):
        train = [s for j, s in enumerate(splits) if j != k]
        model = platt(np.concatenate([s[0] for s in train]), np.concatenate([s[1] for s in train]))
        none = 1 / (1 + np.exp(-(model.decision_function(features) - NONE_BIAS)))
        options = softmax(sharpness * sims) * (1 - none)[:, None]
        chose_none = none > options.max(1)
        inscope = oos == 0
        recalls.append(chose_none[oos == 1].mean())
        drops.append(((inside[sims[inscope].argmax(1)] == y[inscope]) & chose_none[inscope]).mean())
    model = platt(np.concatenate([s[0] for s in splits]), np.concatenate([s[1] for s in splits]))
    print(
        f"none of these (20 intents held out): CV out-of-scope recall {np.mean(recalls):.3f}, in-scope accuracy drop "
        f"{np.mean(drops):.3f}; fitted top {model.coef_[0, 0]:.2f} margin {model.coef_[0, 1]:.2f} "
        f"offset {model.intercept_[0] - NONE_BIAS:.2f} (bias {NONE_BIAS} towards the options included)"
    )

    # few-shot regularisation
    for c in (1.0, 10.0, 100.0):
        scores = []
        for seed in range(3):
            r = np.random.default_rng(seed)
            train = np.concatenate([r.choice(np.flatnonzero(y == k), 10, replace=False) for k in range(77)])
            test = np.setdiff1d(np.arange(len(y)), train)
            head = LogisticRegression(C=c, max_iter=2000).fit(
                np.concatenate([X[train], L]), np.concatenate([y[train], np.arange(77)])
            )
            scores.append((head.predict(X[test]) == y[test]).mean())
        print(f"few-shot choice, 10 per intent, C={c}: held-out accuracy {np.mean(scores):.3f}")


if __name__ == "__main__":
    main()
