"""Fit the embedded model's maps for the question shapes other than passages, with cross-validated figures.

    python benchmarks/fit_local_maps.py [--data ../shared/data/decisions]

Reads Banking77 and SST-2 development rows ({"text", "label"} lines) and prints,
for each map, the figure on held-out data (labels or rows not used to fit it)
beside the constants fitted on every row; those constants are the ones in
``decirank/backends/local/_model.py`` (``MAPS``) and ``_fewshot.py``.

- topic yes/no: "Is the customer asking about <intent>?", half true; Platt map on the
  topic's log-probability against the background topics; 5 folds over intents. The
  softmax temperature is compared at 5, 10 and 20; Banking77 alone prefers 5, but a
  topic named by a broader word ("Is this about pets?" of a sentence about a cat: 0.58
  at 10, 0.44 at 5) needs 10, the value kept.
- true/false descriptions: SST-2 with "a positive movie review" / "a negative movie review",
  averaged with the question's own contrast ("... positive?" / "... negative?");
  the slope of a map with no offset, by log loss; 5 folds over rows.
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
from sklearn.metrics import log_loss, roc_auc_score

from decirank.backends.local._model import TOPIC_TEMPERATURE, _runtime, topic_log_probabilities

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
    rng = np.random.default_rng(1)

    # topic yes/no
    asked = np.where(rng.random(len(y)) < 0.5, y, (y + rng.integers(1, 77, len(y))) % 77)
    truth = (asked == y).astype(int)
    folds = np.arange(77) % 5
    rng.shuffle(folds)

    def held_out_topic(temperature: float) -> tuple[np.ndarray, np.ndarray]:
        """Held-out probabilities (5 folds over intents) and the feature, at one softmax temperature."""
        feature = np.array(
            [topic_log_probabilities(X[i : i + 1], L[asked[i]], temperature)[0] for i in range(len(y))]
        )
        held = np.zeros(len(y))
        for fold in range(5):
            test = folds[asked] == fold
            held[test] = platt(feature[~test, None], truth[~test]).predict_proba(feature[test, None])[:, 1]
        return held, feature

    # Banking77's intents prefer a softer contrast (5); topics named by a broader word ("pets",
    # "sports") need the sharper one (10) to rise above the background, so 10 is kept.
    losses = {t: log_loss(truth, held_out_topic(t)[0]) for t in (5.0, 10.0, 20.0)}
    temperature = TOPIC_TEMPERATURE
    held, feature = held_out_topic(temperature)
    model = platt(feature[:, None], truth)
    compared = ", ".join(f"{t}: {v:.3f}" for t, v in losses.items())
    print(
        f"topic yes/no: temperature {temperature} (CV log loss {compared}); "
        f"CV accuracy {((held > 0.5) == truth).mean():.3f}, ECE {ece(held, truth):.3f}, "
        f"AUROC {roc_auc_score(truth, held):.3f}; fitted slope {model.coef_[0, 0]:.3f} offset {model.intercept_[0]:.3f}"
    )

    # true/false descriptions
    sst = [json.loads(line) for line in open(data / "sst2-train.jsonl")]
    S = vectors([row["text"] for row in sst])
    positive = np.array([row["label"] == "positive" for row in sst]).astype(int)
    true, false, asked, opposite = vectors(
        [
            "a positive movie review",
            "a negative movie review",
            "Is this movie review positive?",
            "Is this movie review negative?",
        ]
    )
    # The descriptions' contrast and the question's contrast with its opposite, averaged, as the model reads them.
    contrast = (S @ true - S @ false + S @ asked - S @ opposite) / 2
    slopes = np.arange(5, 60, 0.5)

    def best_slope(rows: np.ndarray) -> float:
        return float(
            min(slopes, key=lambda k: log_loss(positive[rows], 1 / (1 + np.exp(-k * contrast[rows])), labels=[0, 1]))
        )

    order = rng.permutation(len(sst))
    held = np.zeros(len(sst))
    for fold in range(5):
        test = order[fold::5]
        train = np.setdiff1d(order, test)
        held[test] = 1 / (1 + np.exp(-best_slope(train) * contrast[test]))
    print(
        f"true/false descriptions: CV accuracy {((held > 0.5) == positive).mean():.3f}, ECE {ece(held, positive):.3f}, "
        f"AUROC {roc_auc_score(positive, held):.3f}; fitted slope {best_slope(np.arange(len(sst))):.1f}"
    )

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
    for c in (0.1, 1.0, 10.0):
        scores = []
        for seed in range(5):
            r = np.random.default_rng(seed)
            train = np.concatenate([r.choice(np.flatnonzero(positive == k), 16, replace=False) for k in (0, 1)])
            test = np.setdiff1d(np.arange(len(sst)), train)
            features = np.concatenate([S, 30.0 * contrast[:, None]], 1)
            head = LogisticRegression(C=c, max_iter=2000).fit(features[train], positive[train])
            scores.append((head.predict(features[test]) == positive[test]).mean())
        print(f"few-shot yes/no, 16 per label, C={c}: held-out accuracy {np.mean(scores):.3f}")


if __name__ == "__main__":
    main()
