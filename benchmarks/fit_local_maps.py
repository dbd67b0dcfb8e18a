"""Fit the embedded model's label-choice map and few-shot regularisation, with cross-validated figures.

    python benchmarks/fit_local_maps.py [--data ../shared/data/decisions]

Reads Banking77 development rows ({"text", "label"} lines) and prints,
for each map, the figure on held-out data (labels or rows not used to fit it)
beside the constants fitted on every row; those constants are the ones in
``decirank/backends/local/_shapes.py`` (``MAPS``) and ``_fewshot.py``.

- a choice among labels: softmax sharpness by log loss over the 77 intents.
- few-shot: the regularisation of each head over repeated random splits.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from decirank.backends.local import runtime
from decirank.evaluation.trec import calibration

warnings.filterwarnings("ignore")


def vectors(texts: list[str]) -> np.ndarray:
    return runtime.dense_vectors(texts).astype(np.float64)


def ece(p: np.ndarray, y: np.ndarray) -> float:
    return calibration(zip(p.tolist(), (y > 0.5).tolist()))[1]


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
