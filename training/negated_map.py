"""A map of its own for negated questions, kept off topic questions: measured, not shipped (training/README.md,
"What would close the targets", negated).

    python training/negated_map.py [--heldout DIR]

The runtime answers a negated question as its plain form's blend turned round, its reader evidence from both
readings (``negated_reading``). Here, where the kind classifier's topic probability is under ``--gates``, a
negated question is answered instead by a logistic map of its own, per non-topic kind, over the head, the
reader's plain reading and its reading as asked; the topic part of the plain blend is held fixed in it.
It is fitted on the everyday negated rows (weighted ``--weights`` times) and the 28 sets' questions asked the
other way round, and cross-fitted by fold as ``stack.py`` fits the blend. Prints everyday negated accuracy
and ECE, and the 28 sets' turned questions by family, beside the shipped rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).parent))
import everyday
import stack
import train

TOPIC = stack.QUESTION_KINDS.index("topic")
FAMILIES = ("topic", "attribute", "passage")


def features(table: stack.YesNoTable, rows: np.ndarray, pi: np.ndarray, blender: stack.Blender) -> np.ndarray:
    """Column 0: the plain blend's topic part, weighted by pi_topic (fixed in the map); then for each other
    kind k, pi_k times the head, the plain reading, the reading as asked turned round, and 1."""
    h, r = table.h[rows], table.r[rows]
    asked = -np.where(table.source[rows] == "everyday", table.r_asked[rows], table.r_turned[rows])
    columns = [pi[:, TOPIC] * (blender.head[TOPIC] * h + blender.reader[TOPIC] * r + blender.offset[TOPIC])]
    for k in range(len(stack.QUESTION_KINDS)):
        if k != TOPIC:
            columns += [pi[:, k] * h, pi[:, k] * r, pi[:, k] * asked, pi[:, k]]
    return np.stack(columns, axis=1)


def fit_map(x: np.ndarray, y: np.ndarray, weight: np.ndarray, c: float) -> np.ndarray:
    """Weighted log loss with the first column as a fixed offset, L2 of strength 1 / (c * rows)."""

    def loss(b):
        z = x[:, 0] + x[:, 1:] @ b
        return (weight * (np.logaddexp(0, z) - y * z)).sum() / weight.sum() + 0.5 / (c * len(y)) * (b @ b)

    return minimize(loss, np.zeros(x.shape[1] - 1), method="L-BFGS-B").x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heldout", type=Path, help="fold files (default: the shipped reader's)")
    parser.add_argument("--gates", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    parser.add_argument("--weights", type=float, nargs="+", default=[3, 5, 8, 12])
    parser.add_argument("--strengths", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    args = parser.parse_args()
    heldout, negated_reads = stack.shipped_defaults(args.heldout, None)
    folds, (yes_no, _, _), store, heads = stack.load(heldout, everyday.DEFAULT_DATA)
    data = stack.HERE.parents[1] / "shared/data/decisions"
    table = stack.yes_no_table(data, yes_no, folds, store, heads, True, negated_reads)
    shipped = table.cross_fitted()
    everyday_negated = (table.source == "everyday") & table.negated
    corpus = table.source == "corpus"
    negated = everyday_negated | corpus
    # What the runtime answers now: the blend turned round (everyday), or the turned questions' answers (corpus).
    now = np.where(table.source == "everyday", shipped["blend"], shipped["turned"])
    truth = np.where(table.source == "everyday", table.y, 1 - table.y)

    def line(name: str, p: np.ndarray) -> str:
        m = train.metrics(p[everyday_negated], truth[everyday_negated])
        by_family = " ".join(
            f"{f} {train.metrics(p[corpus & (table.group == f)], truth[corpus & (table.group == f)])['accuracy']:.3f}"
            for f in FAMILIES
        )
        return f"{name:28} everyday negated {m['accuracy']:.3f} (ECE {m['ece']:.3f}) | 28 sets turned: {by_family}"

    print(line("shipped rule", now))
    fitted = {}  # per fold: the blend, the kind probabilities and features of its fit and test rows
    for k in np.unique(table.fold):
        fit, test = negated & (table.fold != k), negated & (table.fold == k)
        blender = table.fit(table.fold != k)
        pi_fit, pi_test = (blender.kinds.probabilities(table.vectors[rows]) for rows in (fit, test))
        fitted[k] = (fit, test, features(table, fit, pi_fit, blender), features(table, test, pi_test, blender))
        fitted[k] += (pi_test[:, TOPIC],)
    for gate in args.gates:
        for weight in args.weights:
            for c in args.strengths:
                p = now.copy()
                for fit, test, x_fit, x_test, topic in fitted.values():
                    # the plain form's answer: an everyday negated row's label turned round; a corpus row's own
                    y = np.where(table.source[fit] == "everyday", 1 - table.y[fit], table.y[fit])
                    b = fit_map(x_fit, y, np.where(table.source[fit] == "everyday", weight, 1.0), c)
                    mapped = 1 - stack.sigmoid(x_test[:, 0] + x_test[:, 1:] @ b)
                    p[test] = np.where(topic >= gate, now[test], mapped)
                print(line(f"gate {gate}, weight {weight:g}, C {c:g}", p))


if __name__ == "__main__":
    main()
