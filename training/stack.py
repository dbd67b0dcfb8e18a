"""The everyday and the 28 sets' leave-one-domain-out tables, and the blend of the decision head with the reader.

    python training/stack.py [--no-write]

Reads the reader's held-out predictions (``training/heldout/fold-K.json``,
written by ``cross_encoder.py --fold K``: each row answered by a reader that
never saw its domain) and answers the same rows with the decision head (the
shipped head for the everyday rows, which it never saw; for the 28 sets, the
head trained without the row's domain, as ``train.py`` judges it). Then:

- **yes/no**: ``p = sigmoid(a * head + b * reader + c)``, one (a, b, c) for
  every question, fitted by log loss;
- **choice**: ``softmax(a * reader_k + b * cosine_k)`` over the options, and
  "none" as ``sigmoid(c * max_k reader_k + d)`` (one threshold for every
  domain);
- **score**: ``softmax(reader_i / T)`` over the levels.

Every figure is cross-fitted: a fold's rows are answered with the blend
fitted on the other folds' rows, so no row is judged by a fit that saw its
own domain. The shipped blend is fitted on every fold and written to
``assets/blend.json`` (its sha256 goes in ``_assets.SHA256``). A fold whose
file is missing is left out of the tables (and they say so), so the tables
can be printed while the folds are still being trained.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).parent))
import everyday
import train
from corpus import YesNoRow, yes_no_rows
from vectors import VectorStore

from decirank.backends.local._head import DecisionHead, asks_yes_or_no, read_yes_no
from decirank.backends.local._assets import find_decision_head

HERE = Path(__file__).parent
ASSETS = HERE.parent / "src" / "decirank" / "backends" / "local" / "assets"
LABEL_SHARPNESS = 16.5
KINDS = ("topic", "attribute", "request", "quality", "negated")


def load_folds() -> dict[int, dict]:
    folds = {}
    for k in range(everyday.FOLDS):
        path = HERE / "heldout" / f"fold-{k}.json"
        if path.exists():
            folds[k] = json.loads(path.read_text(encoding="utf-8"))
    return folds


def _checked(entries: list[dict], rows: list, key_of, what: str) -> dict[int, dict]:
    """Entries by row, each checked against the row it names (a prediction file made from other data is refused)."""
    out = {}
    for entry in entries:
        at = entry["line"] if "line" in entry else entry["index"]
        if key_of(rows[at]) != entry["key"]:
            raise SystemExit(f"{what} row {at} does not match its held-out prediction: retrain that fold")
        out[at] = entry
    return out


def sigmoid(x):
    return train.sigmoid(np.asarray(x, dtype=np.float64))


def logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


# --- the decision head's answers --------------------------------------------------------------------------


def head_logits(rows: list[YesNoRow], store: VectorStore, heads: dict[str, DecisionHead]) -> np.ndarray:
    """The shipped head's calibrated logit of each row, questions read as the runtime reads them."""
    x, flips, kinds = train.features(rows, store)
    out = np.zeros(len(rows))
    for kind, head in heads.items():
        mine = kinds == kind
        if mine.any():
            out[mine] = head.logits(x[mine])
    return np.where(flips, -out, out)


def everyday_strings(yes_no, choices, scores) -> list[str]:
    out = []
    for row in [*yes_no, *score_rows_as_yes_no(scores)]:
        reading = read_yes_no(row.question, getattr(row, "true", None), getattr(row, "false", None))
        out += [row.text, reading.topic, reading.question, *(s for pair in reading.contrasts for s in pair)]
    for row in choices:
        out += [row.text, *row.options.values()]
    return list(dict.fromkeys(out))


def score_rows_as_yes_no(scores) -> list[YesNoRow]:
    """Each score row as the head reads it today: a "how" question's top and bottom levels as its sides."""
    out = []
    for row in scores:
        if asks_yes_or_no(row.question):
            out.append(YesNoRow(row.domain, "score", row.text, row.question, 0))
        else:
            out.append(YesNoRow(row.domain, "score", row.text, row.question, 0, row.levels[-1], row.levels[0]))
    return out


# --- fitting ----------------------------------------------------------------------------------------------


def fit_yes_no(h: np.ndarray, r: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    model = LogisticRegression(C=10.0).fit(np.stack([h, r], axis=1), y)
    return float(model.coef_[0, 0]), float(model.coef_[0, 1]), float(model.intercept_[0])


def choice_distribution(reader: np.ndarray, cosine: np.ndarray, a: float, b: float) -> np.ndarray:
    z = a * reader + b * LABEL_SHARPNESS * cosine
    e = np.exp(z - z.max())
    return e / e.sum()


def fit_choice(rows: list[tuple[np.ndarray, np.ndarray, int]]) -> tuple[float, float]:
    """(a, b) of the options' softmax, by log loss of the answer over in-scope rows."""

    def loss(params):
        return -sum(np.log(choice_distribution(r, c, *params)[answer] + 1e-12) for r, c, answer in rows)

    return tuple(float(v) for v in minimize(loss, x0=[1.0, 0.5], method="Nelder-Mead").x)


def fit_none(best: np.ndarray, is_none: np.ndarray) -> tuple[float, float]:
    model = LogisticRegression(C=10.0).fit(best[:, None], is_none)
    return float(model.coef_[0, 0]), float(model.intercept_[0])


def fit_temperature(rows: list[tuple[np.ndarray, int]]) -> float:
    def loss(params):
        t = np.exp(params[0])
        total = 0.0
        for r, answer in rows:
            z = r / t
            total -= z[answer] - z.max() - np.log(np.exp(z - z.max()).sum())
        return total

    return float(np.exp(minimize(loss, x0=[0.0], method="Nelder-Mead").x[0]))


def score_distribution(reader: np.ndarray, temperature: float) -> np.ndarray:
    z = reader / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


# --- choice and score -------------------------------------------------------------------------------------


def choice_table(choices, folds: dict[int, dict], store: VectorStore) -> dict:
    """Choice figures, cross-fitted by fold; returns the blend fitted on every fold."""
    fold_of = everyday.fold_of([row.domain for row in choices])
    entries = {}
    for record in folds.values():
        entries.update(_checked(record["choice"], choices, lambda r: everyday.row_key(r.question, r.text), "choice"))
    rows = []  # (row, reader logits, cosines, answer index or -1 for none)
    for i, row in enumerate(choices):
        if i not in entries:
            continue
        keys = list(row.options)
        cosine = store.of([row.text]) @ store.of(list(row.options.values())).T
        answer = keys.index(row.answer) if row.answer in keys else -1
        rows.append((row, np.array(entries[i]["logits"]), cosine[0], answer))
    if not rows:
        return {}

    def fit(subset):
        a, b = fit_choice([(r, c, y) for _, r, c, y in subset if y >= 0])
        offered = [(r, y) for row, r, _, y in subset if row.none_text]
        none = fit_none(np.array([r.max() for r, _ in offered]), np.array([y < 0 for _, y in offered]))
        return a, b, none

    correct = defaultdict(list)
    for k in folds:
        train_rows = [t for t in rows if fold_of[t[0].domain] != k] or [t for t in rows]
        a, b, (c, d) = fit(train_rows)
        for row, r, cosine, answer in (t for t in rows if fold_of[t[0].domain] == k):
            best_bi = int(np.argmax(cosine))
            p = choice_distribution(r, cosine, a, b)
            if answer >= 0:
                correct["bi-encoder in scope"].append(best_bi == answer)
                correct["reader in scope"].append(int(np.argmax(r)) == answer)
                correct["blend in scope"].append(int(np.argmax(p)) == answer)
            if row.none_text:
                none = float(sigmoid(c * r.max() + d))
                says_none = none > (1 - none) * p.max()
                if answer < 0:
                    correct["none recall"].append(says_none)
                else:
                    correct["in scope, none offered"].append(not says_none and int(np.argmax(p)) == answer)
                    correct["in scope, none offered, without none"].append(int(np.argmax(p)) == answer)
    print("\nEveryday choice, leave-one-domain-out (accuracy)")
    for name, hits in correct.items():
        print(f"  {name:40} {np.mean(hits):.3f} ({len(hits)} rows)")
    a, b, (c, d) = fit(rows)
    return {"reader": a, "cosine": b, "none_best": c, "none_offset": d}


def score_table(scores, folds: dict[int, dict], store: VectorStore, heads) -> dict:
    fold_of = everyday.fold_of([row.domain for row in scores])
    entries = {}
    for record in folds.values():
        entries.update(_checked(record["score"], scores, lambda r: everyday.row_key(r.question, r.text), "score"))
    known = [i for i in range(len(scores)) if i in entries]
    if not known:
        return {}
    head = sigmoid(head_logits(score_rows_as_yes_no([scores[i] for i in known]), store, heads))
    hits = defaultdict(list)
    for n, i in enumerate(known):
        row = scores[i]
        k = fold_of[row.domain]
        fitted = [(np.array(entries[j]["logits"]), scores[j].answer) for j in known if fold_of[scores[j].domain] != k]
        temperature = fit_temperature(fitted or [(np.array(entries[i]["logits"]), row.answer)])
        p = score_distribution(np.array(entries[i]["logits"]), temperature)
        levels = len(row.levels)
        # today: a binomial over the levels whose mean is the head's likelihood
        binomial = np.array([np.math.comb(levels - 1, j) for j in range(levels)]) * head[n] ** np.arange(levels) * (
            1 - head[n]
        ) ** (levels - 1 - np.arange(levels))
        for name, q in (("head (binomial)", binomial), ("reader", p)):
            hits[f"{name} exact"].append(int(np.argmax(q)) == row.answer)
            hits[f"{name} within one"].append(abs(int(np.argmax(q)) - row.answer) <= 1)
    print("\nEveryday score, leave-one-domain-out")
    for name, h in hits.items():
        print(f"  {name:30} {np.mean(h):.3f} ({len(h)} rows)")
    return {"temperature": fit_temperature([(np.array(entries[i]["logits"]), scores[i].answer) for i in known])}


# --- the tables -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=HERE.parents[1] / "shared/data/decisions")
    parser.add_argument("--everyday", type=Path, default=everyday.DEFAULT_DATA)
    parser.add_argument("--no-write", action="store_true", help="print the tables; leave assets/blend.json alone")
    args = parser.parse_args()
    folds = load_folds()
    if not folds:
        raise SystemExit("no held-out predictions in training/heldout/: run cross_encoder.py --fold K first")
    missing = sorted(set(range(everyday.FOLDS)) - set(folds))
    if missing:
        print(f"folds {missing} are not trained yet: their domains are left out of the tables below")
    yes_no, choices, scores = everyday.load(args.everyday)
    store = VectorStore(train.CACHE / "minilm.npz")
    store.ensure(everyday_strings(yes_no, choices, scores))
    heads = DecisionHead.load_all(find_decision_head())

    # everyday yes/no
    fold_of = everyday.fold_of([row.domain for row in yes_no])
    as_rows = [YesNoRow(r.domain, r.kind, r.text, r.question, r.label) for r in yes_no]
    h = head_logits(as_rows, store, heads)
    entries = {}
    for k, record in folds.items():
        entries.update(_checked(record["yes_no"], yes_no, lambda r: everyday.row_key(r.question, r.text), "yes/no"))
    known = np.array([i in entries for i in range(len(yes_no))])
    r = np.array([entries[i]["logit"] if i in entries else np.nan for i in range(len(yes_no))])
    y = np.array([row.label for row in yes_no])
    fold = np.array([fold_of[row.domain] for row in yes_no])
    kind = np.array([row.kind for row in yes_no])
    domain = np.array([row.domain for row in yes_no])
    p_blend = np.full(len(yes_no), np.nan)
    for k in folds:
        fit = known & (fold != k)
        test = known & (fold == k)
        if fit.sum() == 0:  # one fold alone: the reader's own logits, unblended
            p_blend[test] = sigmoid(r[test])
            continue
        a, b, c = fit_yes_no(h[fit], r[fit], y[fit])
        p_blend[test] = sigmoid(a * h[test] + b * r[test] + c)
    p_head, p_reader = sigmoid(h), sigmoid(r)
    print("\nEveryday yes/no, leave-one-domain-out (accuracy / AUROC / ECE at 0.5)")
    print(f"{'kind':12} {'rows':>5}  {'head':22} {'reader':22} {'blend':22}")
    for name in (*KINDS, "all"):
        rows = known & ((kind == name) if name != "all" else True)
        figures = [train.metrics(p[rows], y[rows]) for p in (p_head, p_reader, p_blend)]
        shown = ["{accuracy:.3f} / {auroc:.3f} / {ece:.3f}".format(**f) for f in figures]
        print(f"{name:12} {rows.sum():5d}  {shown[0]:22} {shown[1]:22} {shown[2]:22}")
    per_domain = {d: train.metrics(p_blend[known & (domain == d)], y[known & (domain == d)]) for d in fold_of if
                  (known & (domain == d)).any()}
    print("per domain (blend accuracy):", ", ".join(f"{d} {m['accuracy']:.3f}" for d, m in per_domain.items()))

    blend = {}
    a, b, c = fit_yes_no(h[known], r[known], y[known])
    blend["yes_no"] = {"head": a, "reader": b, "offset": c}
    blend["choice"] = choice_table(choices, folds, store)
    blend["score"] = score_table(scores, folds, store, heads)
    print(f"\nshipped yes/no blend: {a:.3f} * head + {b:.3f} * reader + {c:.3f}")
    print(f"shipped choice blend: {json.dumps(blend['choice'])}; score: {json.dumps(blend['score'])}")
    if not args.no_write:
        path = ASSETS / "blend.json"
        path.write_text(json.dumps(blend, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})")


if __name__ == "__main__":
    main()
